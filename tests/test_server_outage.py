"""Tool calls across a Temporal server outage, on a dev server of the test's own
(stopped and restarted on the same port and SQLite file), and the worker's
ledger of completed calls."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType

from agentloop import AgentClient, AgentSpec, ToolContext
from agentloop.activities.tool_ledger import ToolLedger, idempotency_key
from agentloop.shared.activity_io import ExecuteToolResult
from agentloop.workers.devserver import DevServer
from agentloop.testing import call, calls, reply, script
from agentloop.tools.registry import Tool, ToolRegistry
from agentloop.workers.worker import build_worker, connect

#: Longer than the run's heartbeat timeout and than the worker's attempts to
#: report the completion (it gives up after ~10-20 s): the result is lost and
#: Temporal retries the call once the server is back.
OUTAGE_SECONDS = 40


@pytest.fixture
def own_server(tmp_path: Path) -> DevServer:
    server = DevServer(db_file=tmp_path / "temporal.db", log_file=tmp_path / "server.log")
    yield server
    server.stop()


async def test_a_tool_that_completed_during_an_outage_is_not_run_again(
    own_server: DevServer, tmp_path: Path
) -> None:
    executions: list[str] = []
    started, release = asyncio.Event(), asyncio.Event()

    async def charge(ctx: ToolContext) -> str:
        """Charge the customer (a side effect that must happen once)."""
        executions.append(ctx.idempotency_key)
        started.set()
        await release.wait()
        return "charged"

    registry = ToolRegistry()
    registry.register(Tool(charge))
    own_server.start()
    await own_server.wait_ready()
    client = await connect(own_server.address)
    task_queue = f"tq-{uuid.uuid4().hex[:12]}"
    spec = AgentSpec(model=script(calls(call("charge")), reply("done")), tools=["charge"],
                     default_permission="allow", heartbeat_timeout_seconds=5)

    async with build_worker(client, task_queue=task_queue, registry=registry, workspace=tmp_path):
        handle = await AgentClient(client, task_queue=task_queue).start(spec, "charge once")
        await started.wait()
        own_server.stop()
        release.set()  # the tool completes while the worker cannot report it
        await asyncio.sleep(OUTAGE_SECONDS)
        own_server.start()
        result = await asyncio.wait_for(handle.result(), timeout=120)
        history = await handle.workflow_handle.fetch_history()

    assert result.status == "completed" and result.final_text == "done"
    assert len(executions) == 1, executions
    tool_call = result.report.steps[0].tool_calls[0]
    assert result.messages[1].tool_results[0].content == "charged"
    assert tool_call.metrics == {"replayed_from_attempt": 1}
    started_attempts = [
        e.activity_task_started_event_attributes
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]
    retried = [a for a in started_attempts if a.attempt > 1]
    assert [(a.attempt, a.last_failure.message) for a in retried] == [(2, "activity Heartbeat timeout")]


def result_of(content: str) -> ExecuteToolResult:
    return ExecuteToolResult(call_id="c", content=content)


def test_ledger_returns_what_was_recorded_under_the_key() -> None:
    ledger = ToolLedger()
    key = idempotency_key("run-1", "a1b2", "7")
    assert key == "run-1/a1b2/7"
    assert ledger.lookup(key) is None
    ledger.record(key, result_of("out"), attempt=1)
    assert ledger.lookup(key) == (result_of("out"), 1)
    assert ledger.lookup(idempotency_key("run-1", "c3d4", "7")) is None  # after continue-as-new


def test_ledger_keeps_results_as_json_and_gives_them_back_whole() -> None:
    # A worker keeps up to 2048 results: as bytes, the garbage collector has
    # one object an entry to walk, however rich the result.
    import gc

    from agentloop.shared.messages import ImagePart

    rich = ExecuteToolResult(
        call_id="c", content="42 rows", is_error=False, truncated=True, latency_ms=12.5,
        metrics={"rows": 42, "nested": {"tables": ["a", "b"]}}, end_run=None,
        images=[ImagePart(media_type="image/png", data="iVBORw0KGgo=")],
    )
    ledger = ToolLedger()
    ledger.record("k", rich, attempt=2)

    assert ledger.lookup("k") == (rich, 2)
    entry = ledger._entries["k"]
    assert isinstance(entry.result, bytes) and not gc.is_tracked(entry.result)
    assert ledger.size_bytes == len(rich.model_dump_json())


def test_ledger_is_bounded_in_entries_bytes_and_age() -> None:
    now = [0.0]
    size = len(result_of("a").model_dump_json())
    by_count = ToolLedger(max_entries=2, clock=lambda: now[0])
    for key in "abc":
        by_count.record(key, result_of(key), attempt=1)
    assert [k for k in "abc" if by_count.lookup(k)] == ["b", "c"]  # the oldest went first

    ledger = ToolLedger(max_bytes=3 * size, ttl_seconds=60, clock=lambda: now[0])
    for key in "abcd":
        ledger.record(key, result_of(key), attempt=1)
    assert [k for k in "abcd" if ledger.lookup(k)] == ["b", "c", "d"]
    assert ledger.size_bytes == 3 * size
    ledger.record("huge", result_of("x" * 4 * size), attempt=1)
    assert ledger.lookup("huge") is None and len(ledger) == 3  # larger than the ledger: not kept

    now[0] = 61.0
    assert ledger.lookup("d") is None and len(ledger) == 0 and ledger.size_bytes == 0
