"""The run loop on a real Temporal dev server, with scripted models."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.exceptions import ApplicationError

from agentloop import AgentClient, AgentRunFailed, ToolContext, ToolError
from agentloop.shared.base.messages import Message, ToolCallPart
from agentloop.shared.definition.activity_io import ModelResponse
from agentloop.testing import call, calls, last_tool_results, reply, script
from agentloop.tools.registry import ToolRegistry
from tests.helpers.agents import spec


async def test_plain_answer_completes(agent_client: AgentClient, worker) -> None:
    model = script(reply("Hello there."))
    async with worker():
        result = await agent_client.run(spec(model), "Say hello")
    assert result.status == "completed"
    assert result.reason == "done"
    assert result.final_text == "Hello there."
    assert [m.role for m in result.messages] == ["assistant"]
    assert result.report.step_count == 1
    assert result.report.steps[0].type == "initial"
    assert result.report.steps[0].finish_reason == "stop"
    assert result.report.user_message == "Say hello"
    assert result.usage.requests == 1 and result.usage.output_tokens > 0


async def test_tool_call_result_flows_back_with_matching_id(
    agent_client: AgentClient, worker, workspace: Path
) -> None:
    (workspace / "notes.txt").write_text("alpha\nbeta\n")

    def answer(request):
        (result,) = last_tool_results(request)
        return reply(f"The file says: {result.content}")

    model = script(calls(call("read_file", {"file_path": "notes.txt"})), answer)
    async with worker():
        result = await agent_client.run(spec(model, tools=["read_file"]), "Read notes.txt")
    roles = [m.role for m in result.messages]
    assert roles == ["assistant", "tool", "assistant"]
    (tool_call,) = result.messages[0].tool_calls
    (tool_result,) = result.messages[1].tool_results
    assert tool_result.id == tool_call.id == "call_0_0"
    assert tool_result.name == "read_file" and not tool_result.is_error
    assert "alpha" in tool_result.content and "beta" in tool_result.content
    assert "alpha" in result.final_text
    assert result.report.tool_call_count == 1
    report = result.report.steps[0].tool_calls[0]
    assert report.tool_name == "read_file" and report.error is None
    assert report.result_size_bytes == len(tool_result.content.encode())


def timing_tools(registry: ToolRegistry, log: list[tuple[str, str]]) -> None:
    @registry.tool
    async def slow(label: str) -> str:
        """Sleep a little, then answer."""
        log.append(("start", label))
        await asyncio.sleep(0.4)
        log.append(("end", label))
        return f"slow {label}"

    @registry.tool
    async def fast(label: str) -> str:
        """Answer at once."""
        log.append(("start", label))
        log.append(("end", label))
        return f"fast {label}"


@pytest.mark.parametrize("parallel", [True, False])
async def test_tool_calls_parallel_or_sequential_results_in_call_order(
    agent_client: AgentClient, worker, registry: ToolRegistry, parallel: bool
) -> None:
    log: list[tuple[str, str]] = []
    timing_tools(registry, log)
    model = script(
        calls(call("slow", {"label": "A"}), call("fast", {"label": "B"})),
        reply("done"),
    )
    async with worker():
        result = await agent_client.run(
            spec(model, tools=["slow", "fast"], parallel_tool_calls=parallel), "go"
        )
    contents = [r.content for r in result.messages[1].tool_results]
    assert contents == ["slow A", "fast B"]  # call order, whichever finished first
    assert [r.tool_name for r in result.report.steps[0].tool_calls] == ["slow", "fast"]
    if parallel:
        assert log.index(("start", "B")) < log.index(("end", "A"))
    else:
        assert log == [("start", "A"), ("end", "A"), ("start", "B"), ("end", "B")]


async def test_unknown_tool_fails_run_when_it_was_the_only_call(
    agent_client: AgentClient, worker
) -> None:
    model = script(calls(call("launch_rockets", {"count": 3})), reply("unreachable"))
    async with worker():
        with pytest.raises(AgentRunFailed) as info:
            await agent_client.run(spec(model, tools=["read_file", "list_dir"]), "go")
    err = info.value
    assert err.reason == "tool_error"
    assert err.result is not None
    (result_part,) = err.result.messages[-1].tool_results
    assert result_part.is_error
    assert result_part.content == (
        "Unknown tool 'launch_rockets'. Available tools: read_file, list_dir. "
        "Call one of these by its exact name."
    )
    assert "every tool call of step 1 failed" in err.result.error
    assert err.result.report.steps[0].tool_calls[0].skipped


async def test_model_sees_errors_and_recovers_when_allowed(
    agent_client: AgentClient, worker, registry: ToolRegistry, workspace: Path
) -> None:
    @registry.tool
    def explode() -> str:
        """Always fails."""
        raise RuntimeError("kaput")

    @registry.tool
    def refuse() -> str:
        """Fails with a message for the model."""
        raise ToolError("the ledger is closed on Sundays")

    seen: list[list[str]] = []

    def after_errors(request):
        seen.append([r.content for r in last_tool_results(request)])
        return calls(call("write_file", {"file_path": "ok.txt", "content": "fine"}))

    model = script(
        calls(
            call("nope"),
            call("read_file", {"path": "x"}),
            call("explode"),
            call("refuse"),
        ),
        after_errors,
        reply("recovered"),
    )
    async with worker():
        result = await agent_client.run(
            spec(
                model,
                tools=["read_file", "write_file", "explode", "refuse"],
                max_consecutive_failed_tool_steps=2,
            ),
            "go",
        )
    assert result.status == "completed" and result.final_text == "recovered"
    unknown, bad_args, raised, refused = seen[0]
    assert unknown.startswith("Unknown tool 'nope'. Available tools: read_file, write_file")
    assert bad_args.startswith(
        "Invalid arguments for tool 'read_file': file_path: Field required; "
        "path: Extra inputs are not permitted. Expected arguments matching this JSON schema: "
    )
    assert raised == "Tool 'explode' raised RuntimeError: kaput"
    assert refused == "Error: the ledger is closed on Sundays"
    assert (workspace / "ok.txt").read_text() == "fine"


async def test_tool_timeout_becomes_error_result(
    agent_client: AgentClient, worker, registry: ToolRegistry
) -> None:
    @registry.tool
    async def hang() -> str:
        """Never returns."""
        await asyncio.sleep(3600)
        return "never"

    @registry.tool
    def quick() -> str:
        """Returns at once."""
        return "quick"

    model = script(calls(call("hang"), call("quick")), reply("ok"))
    async with worker():
        result = await agent_client.run(
            spec(model, tools=["hang", "quick"], tool_timeouts={"hang": 0.5}), "go"
        )
    hung, quick_result = result.messages[1].tool_results
    assert hung.is_error
    assert hung.content == (
        "Tool 'hang' timed out after 0.5s and was stopped; try a smaller task or raise its "
        "timeout (AgentSpec.tool_timeouts)."
    )
    assert quick_result.content == "quick" and not quick_result.is_error
    assert result.status == "completed"


async def test_invalid_json_arguments_from_provider_become_error_result(
    agent_client: AgentClient, worker
) -> None:
    broken = ToolCallPart(
        id="c1", name="read_file", raw_arguments='{"file_path": "a.txt"', arguments_error="not valid JSON"
    )
    model = script(
        ModelResponse(message=Message.assistant("", [broken]), finish_reason="tool_calls"),
        reply("unreachable"),
    )
    async with worker():
        with pytest.raises(AgentRunFailed) as info:
            await agent_client.run(spec(model, tools=["read_file"]), "go")
    (part,) = info.value.result.messages[-1].tool_results
    assert part.content == (
        "Invalid arguments for tool 'read_file': not valid JSON. Received: "
        "'{\"file_path\": \"a.txt\"'. Send the arguments as one JSON object matching the "
        "tool's schema."
    )


@pytest.mark.parametrize(
    ("finish_reason", "reason", "message"),
    [
        ("length", "length", "the model stopped because it reached its output token limit"),
        ("content_filter", "content_filter", "the provider's content filter stopped"),
        ("other", "error", "the model stopped for an unexpected reason (other)"),
    ],
)
async def test_finish_reasons_other_than_stop_fail_the_run(
    agent_client: AgentClient, worker, finish_reason: str, reason: str, message: str
) -> None:
    model = script(reply("partial answer", finish_reason=finish_reason))
    async with worker():
        with pytest.raises(AgentRunFailed) as info:
            await agent_client.run(spec(model), "go")
    assert info.value.reason == reason
    assert info.value.result.error.startswith(message)
    assert info.value.result.final_text == "partial answer"
    assert info.value.result.status == "failed"


@pytest.fixture
def with_ping(registry: ToolRegistry) -> ToolRegistry:
    """The registry, with a ``ping`` tool that answers ``pong``."""

    @registry.tool
    def ping() -> str:
        """Pong."""
        return "pong"

    return registry


async def test_max_steps_ends_run_and_one_step_always_runs(
    agent_client: AgentClient, worker, with_ping: ToolRegistry
) -> None:
    model = script(*[calls(call("ping")) for _ in range(5)])
    async with worker():
        with pytest.raises(AgentRunFailed) as info:
            await agent_client.run(spec(model, tools=["ping"], max_steps=3), "go")
        assert info.value.reason == "max_steps"
        assert info.value.result.report.step_count == 3
        assert "used all 3 steps (AgentSpec.max_steps)" in info.value.result.error

        with pytest.raises(AgentRunFailed) as one:
            await agent_client.run(spec(model, tools=["ping"], max_steps=1), "go")
        assert one.value.reason == "max_steps"
        assert one.value.result.report.step_count == 1
        assert one.value.result.messages[-1].tool_results[0].content == "pong"


async def test_unknown_tool_in_spec_fails_with_clear_message(
    agent_client: AgentClient, worker
) -> None:
    model = script(reply("unreachable"))
    async with worker():
        with pytest.raises(AgentRunFailed) as info:
            await agent_client.run(spec(model, tools=["read_file", "teleport"]), "go")
    assert info.value.reason == "error"
    assert info.value.result.error.startswith(
        "AgentSpec.tools names tools this worker does not have: teleport. Available: "
    )
    assert info.value.result.report.step_count == 0


async def test_llm_errors_retry_then_fail_with_provider_message(
    agent_client: AgentClient, worker
) -> None:
    def flaky(request):
        if activity.info().attempt == 1:
            raise ApplicationError("server overloaded", type="ModelServerError",
                                   next_retry_delay=__import__("datetime").timedelta(milliseconds=10))
        return reply("second time lucky")

    fatal = script(
        ApplicationError(
            "OpenAI rejected the API key (401): check OPENAI_API_KEY in the worker's environment",
            type="ModelAuthenticationError",
            non_retryable=True,
        )
    )
    async with worker():
        ok = await agent_client.run(spec(script(flaky)), "go")
        with pytest.raises(AgentRunFailed) as info:
            await agent_client.run(spec(fatal), "go")
    assert ok.final_text == "second time lucky"
    assert info.value.reason == "error"
    assert info.value.result.error == (
        "LLM step 1 failed: OpenAI rejected the API key (401): check OPENAI_API_KEY in the "
        "worker's environment"
    )


async def test_queries_while_running_and_after(
    agent_client: AgentClient, worker, registry: ToolRegistry
) -> None:
    release = asyncio.Event()
    started = asyncio.Event()

    @registry.tool
    async def wait_here(ctx: ToolContext) -> str:
        """Blocks until the test releases it."""
        started.set()
        await release.wait()
        return "released"

    model = script(calls(call("wait_here"), text="waiting"), reply("all done"))
    async with worker():
        handle = await agent_client.start(spec(model, tools=["wait_here"]), "go")
        await asyncio.wait_for(started.wait(), 10)
        state = await handle.state()
        assert state.status == "running"
        assert [c.name for c in state.running_tool_calls] == ["wait_here"]
        assert state.message_count == 2
        report = await handle.report()
        assert report.reason is None and report.step_count == 1
        messages = await handle.messages()
        assert [m.role for m in messages] == ["user", "assistant"]
        release.set()
        result = await handle.result()
        final = await handle.state()
    assert result.final_text == "all done"
    assert final.status == "completed" and final.reason == "done"
    assert final.running_tool_calls == []


async def test_activity_summaries_name_step_and_tool(
    agent_client: AgentClient, worker, workspace: Path
) -> None:
    (workspace / "a.txt").write_text("a")
    model = script(calls(call("read_file", {"file_path": "a.txt"})), reply("ok"))
    async with worker():
        handle = await agent_client.start(spec(model, tools=["read_file"]), "go")
        await handle.result()
    history = await handle.workflow_handle.fetch_history()
    summaries = []
    for event in history.events:
        # The tools' lookup is a local activity: its marker carries the summary.
        if event.event_type in (EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, EventType.EVENT_TYPE_MARKER_RECORDED) \
                and event.user_metadata.HasField("summary"):
            summaries.append(json.loads(event.user_metadata.summary.data))
    assert summaries == ["resolve tools", "LLM step 1", "tool read_file", "LLM step 2"]


async def test_malformed_run_input_fails_the_run_with_the_reasons(
    agent_client: AgentClient, worker, task_queue: str
) -> None:
    from temporalio.client import WorkflowFailureError

    from agentloop.shared.runs.run import RUN_INPUT_EXAMPLE

    async with worker():
        handle = await agent_client.temporal.start_workflow(
            "AgentRunWorkflow",
            {"spec": {"model": "gpt-4", "max_steps": 0}, "messages": []},
            id=f"bad-{task_queue}",
            task_queue=task_queue,
        )
        with pytest.raises(WorkflowFailureError) as info:
            await handle.result()
    cause = info.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "InvalidInput"
    assert cause.non_retryable
    assert cause.message == (
        "invalid run input: spec.model: model 'gpt-4' must be 'provider:model', e.g. "
        "'openai:gpt-4.1-mini' or 'anthropic:claude-sonnet-4-5'; providers: openai, anthropic, "
        "scripted; spec.max_steps: Input should be greater than or equal to 1; messages: List "
        "should have at least 1 item after validation, not 0. A run takes one JSON object with the "
        f"agent's spec and the input messages, e.g. {RUN_INPUT_EXAMPLE}"
    )


async def test_worker_confines_spec_workspaces_to_its_roots(
    agent_client: AgentClient, worker, registry: ToolRegistry, tmp_path: Path, monkeypatch
) -> None:
    allowed = tmp_path / "allowed"
    (allowed / "project").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("AGENTLOOP_WORKSPACE_ROOTS", str(allowed))
    model = script(calls(call("list_dir")), reply("ok"))
    async with worker():
        ok = await agent_client.run(spec(model, tools=["list_dir"], workspace=str(allowed / "project")), "go")
        with pytest.raises(AgentRunFailed) as info:
            await agent_client.run(spec(model, tools=["list_dir"], workspace=str(elsewhere)), "go")
        with pytest.raises(AgentRunFailed) as at_root:  # a root holds every run's workspace: never one itself
            await agent_client.run(spec(model, tools=["list_dir"], workspace=str(allowed)), "go")
    assert not ok.messages[1].tool_results[0].is_error
    assert info.value.result.messages[-1].tool_results[0].content == (
        f"The workspace {elsewhere} is outside the directories this worker allows "
        f"(AGENTLOOP_WORKSPACE_ROOTS or the worker's workspace: {allowed}); use a directory inside one of them "
        "(AgentSpec.workspace)."
    )
    assert at_root.value.result.messages[-1].tool_results[0].content == (
        f"The workspace {allowed} is one of the directories this worker allows "
        f"(AGENTLOOP_WORKSPACE_ROOTS or the worker's workspace: {allowed}); a root holds the workspaces of many "
        "runs: use a directory inside it (AgentSpec.workspace)."
    )
