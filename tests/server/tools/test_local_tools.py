"""Quick tools as local activities of the run's own worker (``local=True``),
on a real Temporal dev server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.testing import ActivityEnvironment
from temporalio.worker import Worker

from agentloop import AgentClient, AgentSpec, ToolContext, ToolError, tool
from agentloop.activities.agent_activities import AgentActivities
from agentloop.shared.definition.activity_io import ResolveToolsInput
from agentloop.shared.runs.result import AgentRunCancelled
from agentloop.testing import call, calls, reply, script
from agentloop.tools.registry import Tool, ToolRegistry, default_registry
from agentloop.workers.worker import build_worker
from tests.helpers.agents import awaiting
from tests.helpers.runs import local_activities, scheduled_queues, task_failures, wait_state


def register_shout(registry: ToolRegistry, seen: list[str]) -> None:
    @registry.tool(local=True, read_only=True)
    async def shout(text: str, ctx: ToolContext) -> str:
        """Upper-case the text."""
        seen.append(ctx.call_id)
        ctx.heartbeat("shouting")  # a local activity has no heartbeat of its own: a no-op, not an error
        if text == "boom":
            raise ToolError("nothing to shout")
        return text.upper()


def workflow_tasks(history: WorkflowHistory) -> int:
    return sum(1 for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)


# The flag, and what the lookup says (no server) -------------------------------------------------


def test_local_is_off_unless_asked_for_in_every_way_to_register_a_tool() -> None:
    async def quick(text: str) -> str:
        """Echo."""
        return text

    assert Tool(quick).local is False and Tool(quick, local=True).local is True
    registry = ToolRegistry()
    registry.tool(quick, name="quick_local", local=True)
    registry.tool(quick, name="quick_task")
    assert registry.get("quick_local").local and not registry.get("quick_task").local
    tool(quick, name="quick_default_registry", local=True)
    try:
        assert default_registry.get("quick_default_registry").local
    finally:
        default_registry._tools.pop("quick_default_registry")


async def test_the_lookup_names_the_local_tools_only_where_the_worker_serves_the_tools_beside_the_runs(
    workspace: Path,
) -> None:
    registry = ToolRegistry()
    register_shout(registry, [])

    @registry.tool
    async def slow(text: str) -> str:
        """Echo, as an activity task."""
        return text

    wanted = ResolveToolsInput(names=["slow", "shout"])
    beside = await ActivityEnvironment().run(
        AgentActivities(registry, workspace=workspace, tools_beside_runs=True).resolve_tools, wanted)
    assert [t.name for t in beside.tools] == ["slow", "shout"] and beside.local_tools == ["shout"]
    # The model sees the same definition either way.
    assert "local" not in beside.tools[1].model_dump()
    # A tools-only worker (role tools, or all answering on the tools queue
    # for a split deployment): the run's worker cannot call them locally.
    apart = await ActivityEnvironment().run(AgentActivities(registry, workspace=workspace).resolve_tools, wanted)
    assert apart.runs_queue is None and apart.local_tools == []


# Runs on a worker of role all ---------------------------------------------------------------------


async def test_a_local_tool_runs_in_the_workflow_task_that_asked_for_it(
    agent_client: AgentClient, worker, registry: ToolRegistry, workspace: Path, task_queue: str
) -> None:
    seen: list[str] = []
    register_shout(registry, seen)
    (workspace / "a.txt").write_text("alpha")
    model = script(
        calls(call("shout", {"text": "hi"}), call("read_file", {"file_path": "a.txt"})),
        calls(call("shout", {"text": "boom"}), call("shout", {"text": "again"})),
        reply("done"),
    )
    spec = AgentSpec(model=model, tools=["shout", "read_file"], workspace=str(workspace))
    async with worker():
        handle = await agent_client.start(spec, "go")
        result = await handle.result()
        events = [e.type async for e in handle.events()]
    assert result.status == "completed" and result.final_text == "done"
    first, second = [m.tool_results for m in result.messages if m.role == "tool"]
    assert [(r.name, r.is_error) for r in first] == [("shout", False), ("read_file", False)]
    assert first[0].content == "HI" and "alpha" in first[1].content
    # A tool's error is the model's to read, as from any tool.
    assert [(r.content, r.is_error) for r in second] == [("Error: nothing to shout", True), ("AGAIN", False)]
    assert sorted(seen) == ["call_0_0", "call_1_0", "call_1_1"]
    history = await handle.workflow_handle.fetch_history()
    # The local calls are markers of the worker that ran the run; the other
    # tool is an activity task on the run's queue, as before.
    assert local_activities(history) == [("resolve_tools_here", None)] + [("execute_tool_here", None)] * 3
    lane = f"{task_queue}-llm-scripted"  # the scripted model's provider lane
    assert scheduled_queues(history) == [("call_model", lane), ("execute_tool", task_queue),
                                         ("call_model", lane), ("call_model", lane)]
    # One workflow task to start, then one per activity task: the local
    # calls took none of their own.
    assert workflow_tasks(history) == len(scheduled_queues(history)) + 1
    assert task_failures(history) == []
    calls_reported = [c for s in result.report.steps for c in s.tool_calls]
    assert [(c.tool_name, c.error is None) for c in calls_reported] == [
        ("shout", True), ("read_file", True), ("shout", False), ("shout", True)]
    assert events.count("agent.tool.execution.started") == 4 and events.count("agent.tool.execution.completed") == 4


async def test_a_local_tool_that_needs_approval_waits_for_it_and_then_runs_locally(
    agent_client: AgentClient, worker, registry: ToolRegistry, workspace: Path
) -> None:
    stamped: list[str] = []

    @registry.tool(local=True)
    async def stamp(text: str) -> str:
        """Stamp the text (changes things: asks first)."""
        stamped.append(text)
        return f"stamped {text}"

    model = script(calls(call("stamp", {"text": "invoice"})), reply("done"))
    async with worker():
        handle = await agent_client.start(AgentSpec(model=model, tools=["stamp"], workspace=str(workspace)), "go")
        await wait_state(handle, awaiting(), "the local tool to wait for approval")
        assert stamped == []
        await handle.approve("call_0_0")
        result = await handle.result()
    assert result.final_text == "done" and stamped == ["invoice"]
    assert [m.tool_results[0].content for m in result.messages if m.role == "tool"] == ["stamped invoice"]
    history = await handle.workflow_handle.fetch_history()
    assert [name for name, _ in local_activities(history)] == ["resolve_tools_here", "execute_tool_here"]
    assert task_failures(history) == []


async def test_cancelling_a_run_stops_the_local_tool_it_waits_on(
    agent_client: AgentClient, worker, registry: ToolRegistry, workspace: Path
) -> None:
    started, stopped = asyncio.Event(), asyncio.Event()

    @registry.tool(local=True, read_only=True)
    async def wait_forever() -> str:
        """Wait until cancelled."""
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            stopped.set()
            raise
        return "never"

    model = script(calls(call("wait_forever", {})), reply("unreachable"))
    async with worker():
        handle = await agent_client.start(AgentSpec(model=model, tools=["wait_forever"], workspace=str(workspace)),
                                          "go")
        await asyncio.wait_for(started.wait(), 30)
        await handle.cancel()
        with pytest.raises(AgentRunCancelled):
            await handle.result()
        await asyncio.wait_for(stopped.wait(), 30)
    history = await handle.workflow_handle.fetch_history()
    assert task_failures(history) == []
    assert history.events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED


# A split deployment -----------------------------------------------------------------------------


async def test_a_local_call_that_finds_a_models_worker_moves_to_the_tools_queue(
    temporal_client: Client, agent_client: AgentClient, registry: ToolRegistry, workspace: Path, task_queue: str
) -> None:
    # A worker that serves the tools beside the runs (as role all does)
    # answered the lookup, local tools included, but only a models worker
    # runs the run: it refuses the local call (it holds no tools), at no
    # task of its own, and the call runs on the tools queue.
    seen: list[str] = []
    register_shout(registry, seen)
    tools = f"{task_queue}-tools"
    acts = AgentActivities(registry, workspace=workspace, tools_beside_runs=True)
    beside = Worker(temporal_client, task_queue=tools, activities=[acts.resolve_tools, acts.execute_tool])
    models = build_worker(temporal_client, task_queue=task_queue, registry=registry, role="models")
    model = script(calls(call("shout", {"text": "moved"})), calls(call("shout", {"text": "again"})), reply("done"))
    async with models, beside:
        handle = await agent_client.start(AgentSpec(model=model, tools=["shout"], workspace=str(workspace)), "go")
        result = await handle.result()
    assert result.final_text == "done"
    assert [m.tool_results[0].content for m in result.messages if m.role == "tool"] == ["MOVED", "AGAIN"]
    history = await handle.workflow_handle.fetch_history()
    # Refused once; the run's later calls go to the tools queue directly.
    assert local_activities(history) == [("resolve_tools_here", "ToolsNotHere"), ("execute_tool_here", "ToolsNotHere")]
    lane = f"{task_queue}-llm-scripted"  # the scripted model's provider lane
    assert scheduled_queues(history) == [
        ("resolve_tools", tools), ("call_model", lane), ("execute_tool", tools), ("call_model", lane),
        ("execute_tool", tools), ("call_model", lane)]
    assert task_failures(history) == []
