"""A run survives its worker being SIGKILLed mid-tool."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType

from agentloop import AgentClient, AgentSpec
from agentloop.devserver import DevServer

ROOT = Path(__file__).resolve().parent.parent


def start_worker(server: DevServer, task_queue: str, log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, TEMPORAL_ADDRESS=server.address, AGENTLOOP_TASK_QUEUE=task_queue)
    return subprocess.Popen(
        [sys.executable, "-m", "agentloop.cli", "worker", "--import", "tests.durable_fixture"],
        cwd=ROOT,
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )


@pytest.fixture
def spawn_worker(dev_server: DevServer, task_queue: str, tmp_path: Path):
    """Start worker subprocesses on the test's queue; any still alive are killed at the end."""
    procs: list[subprocess.Popen[bytes]] = []
    log = tmp_path / "worker.log"

    def spawn() -> subprocess.Popen[bytes]:
        procs.append(start_worker(dev_server, task_queue, log))
        return procs[-1]

    spawn.log = log  # type: ignore[attr-defined]
    yield spawn
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


async def wait_for(predicate, timeout: float = 60.0, what: str = "condition") -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def test_run_survives_worker_sigkill(
    agent_client: AgentClient, workspace: Path, spawn_worker
) -> None:
    calls_log = workspace / "calls.log"
    first = spawn_worker()
    spec = AgentSpec(
        model="scripted:durable",
        tools=["record", "block"],
        workspace=str(workspace),
        heartbeat_timeout_seconds=2,
        default_permission="allow",
    )
    handle = await agent_client.start(spec, "do the durable thing")
    await wait_for(
        lambda: calls_log.exists() and "block-start" in calls_log.read_text(),
        what=f"the blocking tool to start (worker log: {spawn_worker.log})",
    )
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    assert first.returncode == -signal.SIGKILL

    (workspace / "release").touch()
    spawn_worker()
    result = await asyncio.wait_for(handle.result(), timeout=90)

    assert result.status == "completed"
    assert result.final_text == "survived"
    # The completed tool call ran once; the one in flight at the kill ran again.
    assert calls_log.read_text().splitlines() == ["a", "block-start", "block-start"]
    history = await handle.workflow_handle.fetch_history()
    completed = [
        e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
    ]
    # resolve tools, LLM step 1, record, LLM step 2, block, LLM step 3: each completed once.
    assert len(completed) == 6
    started = [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]
    assert sorted(started) == [1, 1, 1, 1, 1, 2]  # only the tool in flight was retried


async def test_sigterm_lets_the_running_tool_finish(
    agent_client: AgentClient, workspace: Path, spawn_worker
) -> None:
    calls_log = workspace / "calls.log"
    first = spawn_worker()
    spec = AgentSpec(model="scripted:graceful", tools=["slow"], workspace=str(workspace),
                     heartbeat_timeout_seconds=2, default_permission="allow")
    handle = await agent_client.start(spec, "take your time")
    await wait_for(lambda: calls_log.exists() and "slow-start" in calls_log.read_text(),
                   what=f"the slow tool to start (worker log: {spawn_worker.log})")
    first.send_signal(signal.SIGTERM)
    await asyncio.to_thread(first.wait, 30)
    assert first.returncode == 0, spawn_worker.log.read_text()
    # The tool finished during shutdown, before the worker exited.
    assert calls_log.read_text().splitlines() == ["slow-start", "slow-end"]
    spawn_worker()
    result = await asyncio.wait_for(handle.result(), timeout=60)
    assert result.final_text == "finished"
    assert result.messages[1].tool_results[0].content == "slept 1.5"
    assert calls_log.read_text().splitlines() == ["slow-start", "slow-end"]  # not run again


async def test_approval_survives_worker_sigkill(
    agent_client: AgentClient, workspace: Path, spawn_worker
) -> None:
    calls_log = workspace / "calls.log"
    first = spawn_worker()
    # `record` is not read-only, so the default policy asks before it runs.
    spec = AgentSpec(model="scripted:approval", tools=["record"], workspace=str(workspace),
                     heartbeat_timeout_seconds=2)
    handle = await agent_client.start(spec, "record after approval")
    deadline = asyncio.get_running_loop().time() + 60
    while True:
        try:
            state = await handle.state()
        except Exception:
            state = None
        if state and state.status == "awaiting_approval":
            break
        assert asyncio.get_running_loop().time() < deadline, f"never awaited approval: {state}"
        await asyncio.sleep(0.05)
    assert [p.call_id for p in state.pending_approvals] == ["call_0_0"]

    first.send_signal(signal.SIGKILL)
    first.wait()
    # The decision arrives while no worker runs; the signal waits in history.
    await handle.workflow_handle.signal("approve", {"call_id": "call_0_0", "decision": "approve"})
    assert not calls_log.exists()
    spawn_worker()
    result = await handle.result()
    assert result.status == "completed" and result.final_text == "approved and done"
    assert calls_log.read_text() == "approved\n"
    assert result.report.steps[0].tool_calls[0].decision == "approve"
