"""Agents inside a user's own workflows (agentloop.in_workflow), on the real dev
server: the README's order triage example, failures caught and uncaught,
ids, search attributes, the parent close policy, replay."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import EventType, ParentClosePolicy
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.worker import Replayer

from agentloop import AgentClient, AgentLoopPlugin, AgentSpec, Message
from agentloop.in_workflow import agent_result, run_agent, start_agent
from agentloop.shared.runs.result import AgentRunCancelled, MaxStepsExceeded
from agentloop.shared.runs.search_attributes import AGENT_MODEL, AGENT_NAME, AGENT_STATUS
from agentloop.testing import call, calls, reply, script, script_every_step
from agentloop.workers.devserver import DevServer
from tests.helpers.paths import ROOT


def readme_block(first_line: str) -> str:
    """The Python block of docs/backend.md (agents inside your own workflows) that starts with ``first_line``."""
    # (Paths are resolved here, not at import: the workflow sandbox re-imports this module.)
    readme = ROOT / "docs" / "backend.md"
    for block in re.findall(r"```python\n(.*?)```", readme.read_text(), flags=re.DOTALL):
        if block.startswith((first_line + "\n", first_line + ":")):
            return block
    raise AssertionError(f"docs/backend.md has no python block starting with {first_line!r}")


def test_the_readme_order_triage_example_runs_as_written(dev_server: DevServer, tmp_path: Path) -> None:
    # The README's two blocks, as a user would save them: the workflow module
    # and its pytest file (scripted models, no key), on the real dev server.
    (tmp_path / "order_triage.py").write_text(readme_block("# order_triage.py"))
    (tmp_path / "test_order_triage.py").write_text(readme_block("# test_order_triage.py"))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_order_triage.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=240, check=False,
        env={"PATH": "/usr/bin:/bin", "TEMPORAL_ADDRESS": dev_server.address, "HOME": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed" in proc.stdout


def looping_model() -> str:
    """A model that asks for a tool call at every step: never done."""
    return script(*[calls(call("list_dir", {"path": "."})) for _ in range(5)])


@workflow.defn
class CatchingWorkflow:
    """Catches the one failure it expects, by its class."""

    @workflow.run
    async def run(self, model: str) -> str:
        try:
            await run_agent(AgentSpec(model=model, tools=["list_dir"], max_steps=2), "loop")
        except MaxStepsExceeded as failed:
            assert failed.result is not None
            return f"{type(failed).__name__}: reason {failed.reason}, {failed.result.report.step_count} steps"
        return "completed"


@workflow.defn
class UncaughtWorkflow:
    """Lets the agent's failure end it."""

    @workflow.run
    async def run(self, model: str) -> str:
        result = await run_agent(AgentSpec(model=model, tools=["list_dir"], max_steps=1), "loop")
        return result.final_text


@workflow.defn
class ConversationWorkflow:
    """Input as messages, an id of its own choosing, another task queue."""

    @workflow.run
    async def run(self, args: list[str]) -> str:
        model, agent_id, queue = args
        messages = [Message.user("Earlier question"), Message.assistant("Earlier answer"), Message.user("Now?")]
        result = await run_agent(AgentSpec(name="chat", model=model), messages, id=agent_id, task_queue=queue)
        return f"{result.final_text} ({len(result.messages)} messages)"  # those the run added


@workflow.defn
class StartThenReturnWorkflow:
    """Starts an agent and ends at once: the parent close policy applies."""

    @workflow.run
    async def run(self, model: str) -> str:
        handle = await start_agent(
            AgentSpec(name="waiter", model=model, tools=["write_file"], default_permission="ask"), "write it"
        )
        return handle.id


@workflow.defn
class WaitForAgentWorkflow:
    """Waits for an agent that waits for approval: cancelled with it."""

    @workflow.run
    async def run(self, model: str) -> str:
        handle = await start_agent(
            AgentSpec(name="waiter", model=model, tools=["write_file"], default_permission="ask"), "write it"
        )
        try:
            await agent_result(handle)
        except AgentRunCancelled as cancelled:
            return f"cancelled: {cancelled.reason}"
        return "done"


@workflow.defn
class EmptyInputWorkflow:
    @workflow.run
    async def run(self, model: str) -> str:
        await run_agent(AgentSpec(model=model), [])
        return "unreachable"


USER_WORKFLOWS = [CatchingWorkflow, UncaughtWorkflow, ConversationWorkflow, StartThenReturnWorkflow,
                  WaitForAgentWorkflow, EmptyInputWorkflow]


async def closed_or_retrying(handle: WorkflowHandle) -> tuple[WorkflowExecutionStatus, int]:
    """Wait until the workflow closes or a workflow task of it fails (which
    Temporal would retry forever); the status then and the failed tasks."""
    deadline = asyncio.get_running_loop().time() + 120
    while True:
        history = await handle.fetch_history()
        failed_tasks = sum(1 for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED)
        status = (await handle.describe()).status
        if status != WorkflowExecutionStatus.RUNNING or failed_tasks:
            return status, failed_tasks
        assert asyncio.get_running_loop().time() < deadline, "the workflow neither closed nor failed a task"
        await asyncio.sleep(0.1)


async def test_a_failed_agent_is_caught_by_its_class_inside_the_users_workflow(
    temporal_client: Client, task_queue: str, worker: Callable[..., Any]
) -> None:
    async with worker(workflows=USER_WORKFLOWS):
        outcome = await temporal_client.execute_workflow(
            CatchingWorkflow.run, looping_model(), id=f"catch-{uuid.uuid4().hex[:8]}", task_queue=task_queue
        )
    assert outcome == "MaxStepsExceeded: reason max_steps, 2 steps"


async def test_an_uncaught_agent_failure_fails_the_users_workflow_without_retrying_its_task(
    temporal_client: Client, task_queue: str, worker: Callable[..., Any]
) -> None:
    async with worker(workflows=USER_WORKFLOWS):
        handle = await temporal_client.start_workflow(
            UncaughtWorkflow.run, looping_model(), id=f"uncaught-{uuid.uuid4().hex[:8]}", task_queue=task_queue
        )
        status, failed_tasks = await closed_or_retrying(handle)
        assert (status, failed_tasks) == (WorkflowExecutionStatus.FAILED, 0)
        with pytest.raises(WorkflowFailureError) as info:
            await handle.result()
    cause = info.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "MaxStepsExceeded"
    assert cause.message.startswith(f"run {handle.id}-agent-") and "failed (max_steps)" in cause.message


async def test_the_agent_run_is_a_child_with_a_replay_safe_id_and_search_attributes(
    temporal_client: Client, agent_client: AgentClient, task_queue: str, worker: Callable[..., Any]
) -> None:
    # (The input holds an assistant message: the script answers any step.)
    model = script_every_step(lambda request: reply(f"saw {len(request.messages)} messages"))
    parent_id = f"conv-{uuid.uuid4().hex[:8]}"
    async with worker(workflows=USER_WORKFLOWS):
        outcome = await temporal_client.execute_workflow(
            ConversationWorkflow.run, [model, f"{parent_id}-chat", task_queue], id=parent_id, task_queue=task_queue
        )
        assert outcome == "saw 3 messages (1 messages)"
        child = await agent_client.temporal.get_workflow_handle(f"{parent_id}-chat").describe()
        assert child.parent_id == parent_id
        attrs = child.typed_search_attributes
        assert (attrs.get(AGENT_STATUS), attrs.get(AGENT_NAME), attrs.get(AGENT_MODEL)) == ("completed", "chat", model)
        # A default id: the parent's id, then 12 hex digits from workflow.uuid4().
        handle = await temporal_client.start_workflow(
            CatchingWorkflow.run, looping_model(), id=f"catch-{uuid.uuid4().hex[:8]}", task_queue=task_queue
        )
        await handle.result()
    history = await handle.fetch_history()
    started = [e.start_child_workflow_execution_initiated_event_attributes for e in history.events
               if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED]
    assert len(started) == 1 and re.fullmatch(rf"{handle.id}-agent-[0-9a-f]{{12}}", started[0].workflow_id)
    assert started[0].workflow_type.name == "AgentRunWorkflow" and started[0].task_queue.name == task_queue
    assert started[0].parent_close_policy == ParentClosePolicy.PARENT_CLOSE_POLICY_REQUEST_CANCEL
    # The parent's history replays: the id came from workflow.uuid4().
    replayer = Replayer(workflows=USER_WORKFLOWS, plugins=[AgentLoopPlugin()])
    assert (await replayer.replay_workflow(history)).replay_failure is None


async def test_an_agent_left_running_when_its_parent_ends_is_cancelled(
    temporal_client: Client, agent_client: AgentClient, task_queue: str, worker: Callable[..., Any]
) -> None:
    model = script(calls(call("write_file", {"file_path": "x.txt", "content": "x"})), reply("written"))
    async with worker(workflows=USER_WORKFLOWS):
        child_id = await temporal_client.execute_workflow(
            StartThenReturnWorkflow.run, model, id=f"start-{uuid.uuid4().hex[:8]}", task_queue=task_queue
        )
        with pytest.raises(AgentRunCancelled) as info:
            await agent_client.get_handle(child_id).result()
    assert info.value.reason == "cancelled" and info.value.result is None


async def test_cancelling_the_users_workflow_cancels_the_agent_it_waits_for(
    temporal_client: Client, agent_client: AgentClient, task_queue: str, worker: Callable[..., Any]
) -> None:
    model = script(calls(call("write_file", {"file_path": "x.txt", "content": "x"})), reply("written"))
    async with worker(workflows=USER_WORKFLOWS):
        parent = await temporal_client.start_workflow(
            WaitForAgentWorkflow.run, model, id=f"wait-{uuid.uuid4().hex[:8]}", task_queue=task_queue
        )
        child_id = await wait_for_child(parent)
        child = agent_client.get_handle(child_id)
        while (await child.state()).status != "awaiting_approval":
            await asyncio.sleep(0.05)
        await parent.cancel()
        with pytest.raises(AgentRunCancelled):
            await child.result()
        # The cancellation reaches the workflow as the agent's AgentRunCancelled
        # (once the agent run has ended): here it catches it.
        assert await parent.result() == "cancelled: cancelled"


async def wait_for_child(parent: WorkflowHandle) -> str:
    while True:
        for event in (await parent.fetch_history()).events:
            if event.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED:
                return event.child_workflow_execution_started_event_attributes.workflow_execution.workflow_id
        await asyncio.sleep(0.05)


async def test_an_empty_input_fails_the_users_workflow_with_the_reason(
    temporal_client: Client, task_queue: str, worker: Callable[..., Any]
) -> None:
    async with worker(workflows=USER_WORKFLOWS):
        handle = await temporal_client.start_workflow(
            EmptyInputWorkflow.run, "scripted:demo", id=f"empty-{uuid.uuid4().hex[:8]}", task_queue=task_queue
        )
        assert await closed_or_retrying(handle) == (WorkflowExecutionStatus.FAILED, 0)
        with pytest.raises(WorkflowFailureError) as info:
            await handle.result()
    cause = info.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "UserError"
    assert cause.message == "a run needs at least one input message"
