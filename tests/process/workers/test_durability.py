"""A run survives its worker being SIGKILLed mid-tool or mid-LLM-step."""

from __future__ import annotations

import asyncio
import signal
from datetime import timedelta
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.worker import Worker

from agentloop import AgentClient, AgentSpec
from agentloop.activities.agent_activities import AgentActivities
from agentloop.activities.transcripts import QueryTimeouts
from agentloop.testing import reply, script
from agentloop.tools.registry import ToolRegistry
from agentloop.workers.plugin import workflow_runner
from agentloop.workflows.agent_run import AgentRunWorkflow
from agentloop.workflows.effects.activity_calls import SEED_MAX_BYTES
from tests.helpers.polling import eventually


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
    await eventually(
        lambda: calls_log.exists() and "block-start" in calls_log.read_text(),
        what=f"the blocking tool to start (worker log: {spawn_worker.log})", timeout=60,
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
    # LLM step 1, record, LLM step 2, block, LLM step 3: each completed once
    # (the tools were looked up in the run's first workflow task, a local activity).
    assert len(completed) == 5
    started = [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]
    assert sorted(started) == [1, 1, 1, 1, 2]  # only the tool in flight was retried


async def test_sigterm_lets_the_running_tool_finish(
    agent_client: AgentClient, workspace: Path, spawn_worker
) -> None:
    calls_log = workspace / "calls.log"
    first = spawn_worker()
    spec = AgentSpec(model="scripted:graceful", tools=["slow"], workspace=str(workspace),
                     heartbeat_timeout_seconds=2, default_permission="allow")
    handle = await agent_client.start(spec, "take your time")
    await eventually(lambda: calls_log.exists() and "slow-start" in calls_log.read_text(),
                     what=f"the slow tool to start (worker log: {spawn_worker.log})", timeout=60)
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


def activity_attempts(history, activity_type: str) -> list[tuple[int, str]]:
    """(attempt, the previous attempt's failure) of each started ``activity_type``
    activity: history records an activity's last attempt only."""
    scheduled = {
        e.event_id: e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    return [
        (e.activity_task_started_event_attributes.attempt,
         e.activity_task_started_event_attributes.last_failure.message)
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        and scheduled[e.activity_task_started_event_attributes.scheduled_event_id] == activity_type
    ]


async def kill_at_gate(spawn_worker, gate: Path, line: str) -> None:
    """Wait until the first worker logged ``line`` at the gate, SIGKILL it,
    open the gate and start a second worker."""
    first = spawn_worker("tests.helpers.fixtures.crash_fixture")
    await eventually(
        lambda: (gate / "calls.log").exists() and line in (gate / "calls.log").read_text(),
        what=f"{line!r} in calls.log (worker log: {spawn_worker.log})", timeout=60,
    )
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    (gate / "release").touch()
    spawn_worker("tests.helpers.fixtures.crash_fixture")


async def test_llm_step_after_a_worker_kill_needs_no_attempt_beyond_the_lost_one(
    agent_client: AgentClient, workspace: Path, spawn_worker
) -> None:
    # The retry's transcript queries first wait ~10 s on the dead worker's
    # sticky queue: an attempt that did not heartbeat meanwhile timed out
    # (3 s) and the step used 4 of its 5 attempts.
    spec = AgentSpec(model="scripted:llm_kill", workspace=str(workspace), heartbeat_timeout_seconds=3)
    handle = await agent_client.start(spec, f"gate={workspace}")
    await kill_at_gate(spawn_worker, workspace, "llm-start")
    result = await asyncio.wait_for(handle.result(), timeout=90)

    assert result.status == "completed" and result.final_text == "recovered"
    history = await handle.workflow_handle.fetch_history()
    # Attempt 1 died with the worker; attempt 2, on the new worker, finished.
    assert activity_attempts(history, "call_model") == [(2, "activity Heartbeat timeout")]
    assert not [e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT]
    assert (workspace / "calls.log").read_text().splitlines() == ["llm-start", "llm-start"]


async def test_a_tool_retried_on_another_worker_runs_again_with_the_same_idempotency_key(
    agent_client: AgentClient, workspace: Path, spawn_worker
) -> None:
    spec = AgentSpec(model="scripted:tool_kill", tools=["keyed_block"], workspace=str(workspace),
                     heartbeat_timeout_seconds=2, default_permission="allow")
    handle = await agent_client.start(spec, f"gate={workspace}")
    await kill_at_gate(spawn_worker, workspace, "tool ")
    result = await asyncio.wait_for(handle.result(), timeout=60)

    assert result.status == "completed" and result.final_text == "done"
    # The worker's ledger is in memory: the new worker runs the call again
    # (at least once), and the tool can tell a service it is the same call.
    first, second = (workspace / "calls.log").read_text().splitlines()
    assert first == second
    workflow_id, run_id, activity_id = first.removeprefix("tool ").split("/")
    assert workflow_id == handle.run_id and run_id == (await handle.workflow_handle.describe()).run_id
    assert activity_id.isdigit()


async def test_a_step_whose_run_does_not_answer_fails_fast_with_transcript_unavailable(
    temporal_client, agent_client: AgentClient, task_queue: str
) -> None:
    # Workers of different roles: one runs the workflow, another only LLM
    # steps. With no workflow worker running, the run answers no queries.
    model = script(reply("answered"))
    spec = AgentSpec(model=model)
    steps = AgentActivities(ToolRegistry())
    steps.transcript_timeouts = QueryTimeouts(reask=timedelta(seconds=0.2), total=timedelta(seconds=1))

    async with Worker(temporal_client, task_queue=task_queue, workflows=[AgentRunWorkflow],
                      workflow_runner=workflow_runner()):
        # Past SEED_MAX_BYTES: even the first step names its transcript by
        # reference only, and the worker must ask the run for it.
        handle = await agent_client.start(spec, "hello " + "x" * SEED_MAX_BYTES)
        await wait_until_scheduled(handle, "call_model")
    # The step waits in the scripted model's lane (docs/many-tenants.md).
    async with Worker(temporal_client, task_queue=f"{task_queue}-llm-scripted", activities=[steps.call_model]):
        failure = await wait_for_attempt_failure(handle)
        assert failure.application_failure_info.type == "TranscriptUnavailable"
        assert failure.message == (
            f"could not fetch the transcript of run {handle.run_id}: its 'model_context' query got "
            "no answer within 1s: no worker running the run's workflow answered (one may have just "
            "crashed, or none polls the run's task queue); the step is retried (attempt 1 of 5 failed)"
        )
        # A workflow worker is back: the step is retried and answers.
        steps.transcript_timeouts = QueryTimeouts()
        async with Worker(temporal_client, task_queue=task_queue, workflows=[AgentRunWorkflow],
                          workflow_runner=workflow_runner()):
            result = await asyncio.wait_for(handle.result(), timeout=60)
    assert result.status == "completed" and result.final_text == "answered"


async def wait_until_scheduled(handle, activity_type: str) -> None:
    async def scheduled() -> bool:
        history = await handle.workflow_handle.fetch_history()
        return any(
            e.activity_task_scheduled_event_attributes.activity_type.name == activity_type
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        )

    await eventually(scheduled, f"{activity_type} to be scheduled")


async def wait_for_attempt_failure(handle):
    """The last failure of the run's pending activity, once it has one."""

    async def last_failure():
        pending = (await handle.workflow_handle.describe()).raw_description.pending_activities
        return pending[0].last_failure if pending and pending[0].HasField("last_failure") else None

    return await eventually(last_failure, "the step to fail an attempt")
