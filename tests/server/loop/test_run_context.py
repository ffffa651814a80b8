"""Context from the worker: AGENTS.md as a system layer, the workspace
listing in the first user turn, context providers at the run's start and
before each step (replayed from the run's own history)."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.worker import Replayer

from agentloop import AgentClient, AgentRunFailed, ContextLayer, ContextRequest, context_provider
from agentloop.shared.definition.context_providers import agents_md_layer
from agentloop.testing import call, calls, reply, script, script_every_step, step_of
from agentloop.tools.context_providers import workspace_listing
from agentloop.tools.registry import ToolRegistry
from agentloop.workers.plugin import AgentLoopPlugin
from tests.helpers.agents import spec


def test_listing_and_agents_md_layer(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text("")
    (tmp_path / ".git").mkdir()
    (tmp_path / "README.md").write_text("")
    assert workspace_listing(tmp_path) == "README.md\nsrc/\nsrc/main.py"
    assert workspace_listing(tmp_path, limit=1) == "README.md\n... and 2 more"
    layer = agents_md_layer("x" * 40_000)
    assert layer.stable and layer.content.endswith("…[8,024 characters cut]") and len(layer.content) < 33_000


async def test_agents_md_and_the_listing_reach_the_model(agent_client: AgentClient, worker, workspace: Path) -> None:
    (workspace / "AGENTS.md").write_text("Run the tests with `make test` before you answer.")
    (workspace / "app.py").write_text("print('hi')\n")
    seen = []

    def answer(request):
        seen.append(request)
        return reply("ok")

    async with worker():
        await agent_client.run(spec(script(answer), system_prompt="You are a coder.", agents_md=True,
                                    workspace_listing=True), "fix the bug")
        await agent_client.run(spec(script(answer), system_prompt="You are a coder."), "fix the bug")
    with_context, without = seen
    assert with_context.system_prompt.startswith("You are a coder.\n\nInstructions from the workspace's AGENTS.md:")
    assert "make test" in with_context.system_prompt
    assert with_context.messages[0].text == (
        "fix the bug\n\nThe workspace (files and directories, two levels):\nAGENTS.md\napp.py")
    assert without.system_prompt == "You are a coder." and without.messages[0].text == "fix the bug"


def scheduled_activities(history) -> list[str]:
    return [e.activity_task_scheduled_event_attributes.activity_type.name for e in history.events
            if e.HasField("activity_task_scheduled_event_attributes")]


async def test_agents_md_by_default_in_runs_with_tools(
    agent_client: AgentClient, temporal_client: Client, worker, registry: ToolRegistry, workspace: Path
) -> None:
    """With no switch set, a run with tools gets AGENTS.md from the tool
    listing it runs anyway (no load_context activity); a step-level provider
    keeps it; agents_md=False leaves it out."""
    (workspace / "AGENTS.md").write_text("Always answer in French.")

    @context_provider(when="step", registry=registry)
    def clock(request: ContextRequest) -> str:
        return f"Step clock: {request.step}"

    prompts = []

    def answer(request):
        prompts.append(request.system_prompt)
        return calls(call("list_dir", {"path": "."})) if step_of(request) == 0 else reply("fait")

    layer = "Instructions from the workspace's AGENTS.md:\n\nAlways answer in French."
    async with worker():
        default = await agent_client.start(spec(script_every_step(answer), system_prompt="Base.", tools=["list_dir"]),
                                           "go")
        await default.result()
        await agent_client.run(spec(script_every_step(answer), system_prompt="Base.", tools=["list_dir"],
                                    context_providers=["clock"]), "go")
        await agent_client.run(spec(script_every_step(answer), system_prompt="Base.", tools=["list_dir"],
                                    agents_md=False), "go")
    assert prompts == [
        f"Base.\n\n{layer}", f"Base.\n\n{layer}",
        f"Base.\n\n{layer}\n\nStep clock: 0", f"Base.\n\n{layer}\n\nStep clock: 1",
        "Base.", "Base.",
    ]
    history = await temporal_client.get_workflow_handle(default.run_id).fetch_history()
    # The AGENTS.md came with the tools, looked up by the worker in the run's first task (no activity).
    assert scheduled_activities(history) == ["call_model", "execute_tool", "call_model"]
    replayed = await Replayer(workflows=[], plugins=[AgentLoopPlugin()]).replay_workflow(history)
    assert replayed.replay_failure is None


async def test_no_agents_md_schedules_nothing_extra(
    agent_client: AgentClient, temporal_client: Client, worker
) -> None:
    """Without an AGENTS.md a run with tools schedules the activities it
    always did, and a run without tools reads no workspace at all."""
    seen = []

    def answer(request):
        seen.append(request.system_prompt)
        return calls(call("list_dir", {"path": "."})) if step_of(request) == 0 else reply("done")

    async with worker():
        with_tools = await agent_client.start(spec(script_every_step(answer), system_prompt="Base.",
                                                   tools=["list_dir"]), "go")
        await with_tools.result()
        without = await agent_client.start(spec(script(reply("ok")), system_prompt="Base."), "hi")
        await without.result()
    assert seen == ["Base.", "Base."]
    history = await temporal_client.get_workflow_handle(with_tools.run_id).fetch_history()
    assert scheduled_activities(history) == ["call_model", "execute_tool", "call_model"]
    history = await temporal_client.get_workflow_handle(without.run_id).fetch_history()
    assert scheduled_activities(history) == ["call_model"]


async def test_no_agents_md_no_layer(agent_client: AgentClient, worker) -> None:
    seen = []
    async with worker():
        await agent_client.run(spec(script(lambda r: seen.append(r) or reply("ok")), system_prompt="Base.",
                                    agents_md=True), "hi")
    assert seen[0].system_prompt == "Base."


async def test_context_providers_at_start_and_each_step_replay(
    agent_client: AgentClient, temporal_client: Client, worker, registry: ToolRegistry
) -> None:
    calls_seen: list[tuple[str, int]] = []

    @context_provider(when="run", registry=registry)
    def profile(request: ContextRequest) -> str:
        calls_seen.append(("profile", request.step))
        return f"The user of {request.agent_name} prefers short answers."

    @context_provider(when="step", registry=registry)
    async def clock(request: ContextRequest) -> ContextLayer:
        calls_seen.append(("clock", request.step))
        return ContextLayer(name="clock", content=f"Step clock: {request.step}", stable=False)

    prompts = []

    def answer(request):
        prompts.append(request.system_prompt)
        return calls(call("list_dir", {"path": "."})) if step_of(request) == 0 else reply("done")

    async with worker():
        handle = await agent_client.start(spec(script_every_step(answer), name="helper", system_prompt="Base.",
                                               tools=["list_dir"], context_providers=["clock", "profile"]), "go")
        await handle.result()
    assert prompts == [
        "Base.\n\nThe user of helper prefers short answers.\n\nStep clock: 0",
        "Base.\n\nThe user of helper prefers short answers.\n\nStep clock: 1",
    ]
    assert calls_seen == [("profile", 0), ("clock", 0), ("clock", 1)]
    history = await temporal_client.get_workflow_handle(handle.run_id).fetch_history()
    replayed = await Replayer(workflows=[], plugins=[AgentLoopPlugin()]).replay_workflow(history)
    assert replayed.replay_failure is None
    assert len(calls_seen) == 3  # replay asked no provider again


async def test_missing_or_failing_providers_fail_the_run_with_a_sentence(
    agent_client: AgentClient, worker, registry: ToolRegistry
) -> None:
    attempts = []

    @context_provider(registry=registry)
    def broken(request: ContextRequest) -> str:
        attempts.append(1)
        raise RuntimeError("profile service down")

    async with worker():
        with pytest.raises(AgentRunFailed) as missing:
            await agent_client.run(spec(script(reply("x")), context_providers=["nope"]), "hi")
        with pytest.raises(AgentRunFailed) as failing:
            await agent_client.run(spec(script(reply("x")), context_providers=["broken"], tool_max_attempts=2), "hi")
    assert missing.value.result.error == (
        "the spec names context provider 'nope' that the tools worker does not have (it has: broken); register them "
        "with agentloop.context_provider in a module the tools worker imports, or remove them from "
        "AgentSpec.context_providers")
    assert failing.value.result.error == (
        "loading the run's context failed after 2 attempts: context provider broken raised RuntimeError: "
        "profile service down")
    assert len(attempts) == 2
