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
from agentloop.testing import call, calls, reply, script
from agentloop.tools.registry import Tool, ToolRegistry
from agentloop.workers.devserver import DevServer
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


