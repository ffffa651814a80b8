"""Long runs on a real dev server: the transcript by reference, context
pruning and compaction, the context-length error path, continue-as-new with
a pending approval and a subscriber, budgets, self-verification, payload
limits."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError

from agentloop import AgentClient, AgentRunFailed, AgentRunResult, AgentSpec, Message, ToolContext, UserError
from agentloop.shared.definition.compaction import is_summary_message
from agentloop.shared.definition.context_window import ContextPolicy
from agentloop.shared.definition.pricing import Budget, ModelPrice
from agentloop.shared.runs.report import REPORT_TEXT_LIMIT
from agentloop.testing import (
    call,
    calls,
    last_tool_results,
    register_scripted_model,
    reply,
    script,
    script_every_step,
    step_of,
)
from agentloop.tools.registry import ToolRegistry
from agentloop.workflows.effects import handover
from benchmarks.durability.history_growth import chain_histories
from tests.helpers.agents import awaiting
from tests.helpers.runs import wait_state


def is_summary_request(request) -> bool:
    return request.system_prompt.startswith("You summarise")


def big_tools(registry: ToolRegistry, size: int = 3000) -> None:
    @registry.tool
    def dump(part: int) -> str:
        """A large output."""
        return f"part {part}: " + "x" * size


def scheduled_inputs(history, activity: str) -> list[dict]:
    return [
        json.loads(e.activity_task_scheduled_event_attributes.input.payloads[0].data)
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == activity
    ]


# The transcript by reference -----------------------------------------------------


async def test_llm_steps_name_the_transcript_and_a_new_worker_serves_them(
    agent_client: AgentClient, worker, workspace: Path
) -> None:
    (workspace / "a.txt").write_text("alpha")
    seen: list[list[str]] = []

    def step(request):
        seen.append([m.role for m in request.messages])
        results = last_tool_results(request)
        if len(seen) == 1:
            return calls(call("read_file", {"file_path": "a.txt"}))
        if len(seen) == 2:
            assert "alpha" in results[0].content
            return calls(call("write_file", {"file_path": "b.txt", "content": "beta"}))
        return reply(f"done: {results[0].content}")

    model = script_every_step(step)
    spec = AgentSpec(model=model, tools=["read_file", "write_file"], system_prompt="Be brief.")
    async with worker():
        handle = await agent_client.start(spec, "copy")
        await wait_state(handle, awaiting(), "the write to wait")
    # The first worker is gone; a new one (empty transcript cache) approves and finishes.
    async with worker():
        await handle.approve("call_1_0")
        result = await handle.result()
    assert result.status == "completed" and (workspace / "b.txt").read_text() == "beta"
    assert seen == [["user"], ["user", "assistant", "tool"], ["user", "assistant", "tool", "assistant", "tool"]]
    history = await handle.workflow_handle.fetch_history()
    inputs = scheduled_inputs(history, "call_model")
    # No LLM step carries messages, tools or the system prompt: only the reference.
    # (fields at their defaults are left out of activity inputs altogether)
    assert [set(i["request"]) for i in inputs] == [{"model"}] * 3
    assert [i["transcript"]["message_count"] for i in inputs] == [1, 3, 5]
    assert len({len(json.dumps(i)) for i in inputs}) <= 2  # the same size every step


async def test_transcript_query_pages_and_hashes(agent_client: AgentClient, worker) -> None:
    model = script(*[calls(call("list_dir", {"path": "."})) for _ in range(3)], reply("ok"))
    async with worker():
        handle = await agent_client.start(AgentSpec(model=model, tools=["list_dir"]), "go")
        await handle.result()
        from agentloop.shared.runs.transcripts import TranscriptPage, TranscriptRange, transcript_hashes

        first = await handle.workflow_handle.query("transcript", TranscriptRange(start=0, max_bytes=200),
                                                   result_type=TranscriptPage)
        whole = await handle.workflow_handle.query("transcript", TranscriptRange(), result_type=TranscriptPage)
    assert whole.total == 8 and len(whole.messages) == 8
    assert 1 <= len(first.messages) < 8  # paged by size, at least one message
    assert transcript_hashes(whole.messages)[-1] == whole.transcript_hash


# Context management ---------------------------------------------------------------


async def test_pruning_then_compaction_keep_the_run_within_its_window(
    agent_client: AgentClient, worker, registry: ToolRegistry
) -> None:
    big_tools(registry)
    requests: list[int] = []

    def step(request):
        if is_summary_request(request):
            return reply("SUMMARY: parts 0 to 3 were dumped; all looked fine.")
        done = len(requests)  # compaction removes old assistant messages: count calls instead
        requests.append(sum(len(m.model_dump_json()) for m in request.messages))
        if done < 6:
            return calls(call("dump", {"part": done}), text="Dumping the next part. " * 120)
        return reply("finished")

    policy = ContextPolicy(context_window_tokens=4096, reserve_output_tokens=512, protect_recent_tool_results=1,
                           keep_recent_messages=2)
    model = script_every_step(step)
    async with worker():
        handle = await agent_client.start(
            AgentSpec(model=model, tools=["dump"], context=policy, default_permission="allow", max_steps=20),
            "dump everything",
        )
        events = [e async for e in handle.events()]
        result = await handle.result()
        messages = await handle.messages()
    assert result.status == "completed" and result.final_text == "finished"
    managed = [e for e in events if e.type == "agent.context.compacted"]
    kinds = [e.kind for e in managed]
    assert "prune" in kinds and "summary" in kinds
    assert all(e.tokens_after < e.tokens_before for e in managed)
    assert all(e.trigger == "threshold" for e in managed)
    assert messages[0].role == "user" and messages[0].text == "dump everything"  # the task stays verbatim
    assert any(is_summary_message(m) for m in messages)
    # Every request stayed well under the window (4096 tokens ~ 16 KB).
    assert max(requests) < 16_000
    history = await handle.workflow_handle.fetch_history()
    summaries = [e for e in history.events if e.HasField("activity_task_scheduled_event_attributes")
                 and e.user_metadata.summary.data == b'"compact context"']
    assert len(summaries) == len([k for k in kinds if k == "summary"])
    # The summariser gets the older messages by reference too: only indices in history.
    for event in summaries:
        sent = json.loads(event.activity_task_scheduled_event_attributes.input.payloads[0].data)
        assert "messages" not in sent["request"] and sent["compaction"]["head"] == 1


async def test_context_length_error_compacts_and_retries(
    agent_client: AgentClient, worker, registry: ToolRegistry
) -> None:
    big_tools(registry, size=500)
    refused: list[int] = []

    def step(request):
        if is_summary_request(request):
            return reply("SUMMARY: three parts dumped.")
        done = sum(1 for m in request.messages if m.role == "assistant")
        if len(request.messages) > 6 and not any(is_summary_message(m) for m in request.messages):
            refused.append(len(request.messages))
            raise ApplicationError("This model's maximum context length is 100 tokens",
                                   type="ModelContextLengthExceeded",
                                   non_retryable=True)
        if done < 4:
            return calls(call("dump", {"part": done}))
        return reply("fits now")

    model = script_every_step(step)
    async with worker():
        handle = await agent_client.start(
            AgentSpec(model=model, tools=["dump"], default_permission="allow",
                      context=ContextPolicy(keep_recent_messages=2)),
            "dump",
        )
        events = [e async for e in handle.events()]
        result = await handle.result()
    assert result.status == "completed" and result.final_text == "fits now"
    assert refused == [7]
    (compacted,) = [e for e in events if e.type == "agent.context.compacted"]
    assert (compacted.kind, compacted.trigger) == ("summary", "context_length_error")


async def test_context_length_error_with_nothing_to_compact_fails_clearly(agent_client: AgentClient, worker) -> None:
    def step(request):
        raise ApplicationError("prompt is too long", type="ModelContextLengthExceeded", non_retryable=True)

    async with worker():
        with pytest.raises(AgentRunFailed) as info:
            await agent_client.run(AgentSpec(model=script_every_step(step)), "x" * 1000)
    assert info.value.reason == "error"
    assert "no older history left to summarise" in info.value.result.error


# Continue-as-new ------------------------------------------------------------------


async def test_continue_as_new_with_a_pending_approval_and_a_subscriber(
    agent_client: AgentClient, worker, workspace: Path
) -> None:
    def step(request):
        done = sum(1 for m in request.messages if m.role == "assistant")
        if done == 0:
            return calls(call("list_dir", {"path": "."}))
        if done == 1:
            return calls(call("write_file", {"file_path": "out.txt", "content": "after"}))
        return reply("written: " + last_tool_results(request)[0].content)

    # The second step waits for approval: the run hands over while it waits.
    spec = AgentSpec(model=script_every_step(step), tools=["list_dir", "write_file"], continue_as_new_every_steps=2)
    async with worker():
        handle = await agent_client.start(spec, "write after looking")
        first_run = (await handle.workflow_handle.describe()).run_id
        events = []

        async def subscribe() -> None:
            async for event in handle.events():
                events.append(event)

        subscriber = asyncio.ensure_future(subscribe())
        state = await wait_state(handle, lambda s: s.status == "awaiting_approval"
                                 and any(e.type == "agent.run.continued" for e in events), "continue-as-new")
        second_run = (await handle.workflow_handle.describe()).run_id
        assert second_run != first_run
        assert [p.call_id for p in state.pending_approvals] == ["call_1_0"]
        await handle.approve("call_1_0")
        result = await handle.result()
        await asyncio.wait_for(subscriber, 30)
    assert result.status == "completed" and (workspace / "out.txt").read_text() == "after"
    assert result.final_text.startswith("written: ")
    assert result.report.step_count == 3 and [s.index for s in result.report.steps] == [0, 1, 2]
    assert result.report.steps[1].tool_calls[0].decision == "approve"
    types = [e.type for e in events]
    # One stream across both Temporal runs: contiguous offsets, one terminal event.
    assert [e.seq for e in events] == list(range(len(events)))
    assert types.count("agent.run.created") == 1 and types[-1] == "thread.run.completed"
    assert types.index("agent.tool.approval.requested") < types.index("agent.run.continued") \
        < types.index("agent.tool.approval.resolved")
    first = agent_client.temporal.get_workflow_handle(handle.run_id, run_id=first_run)
    first_history = await first.fetch_history()
    assert first_history.events[-1].HasField("workflow_execution_continued_as_new_event_attributes")


async def test_continue_as_new_every_n_steps_keeps_each_history_short(agent_client: AgentClient, worker) -> None:
    model = script(*[calls(call("list_dir", {"path": "."})) for _ in range(6)], reply("done"))
    spec = AgentSpec(model=model, tools=["list_dir"], continue_as_new_every_steps=2, max_steps=10)
    async with worker():
        handle = await agent_client.start(spec, "list six times")
        result = await handle.result()
        runs = [w async for w in agent_client.temporal.list_workflows(f'WorkflowId="{handle.run_id}"')]
    assert result.status == "completed" and result.report.step_count == 7
    assert len(result.messages) == 13  # every message of the run, across all its Temporal runs
    assert len(runs) == 4  # 2 + 2 + 2 + 1 steps
    # agentloop lists the run once (its latest Temporal run).
    deadline = asyncio.get_running_loop().time() + 15
    while True:
        listed = [r for r in await agent_client.list_runs(query=f'WorkflowId="{handle.run_id}"')]
        if [r.status for r in listed] == ["completed"] or asyncio.get_running_loop().time() > deadline:
            break
        await asyncio.sleep(0.1)
    assert [(r.run_id, r.status) for r in listed] == [(handle.run_id, "completed")]


async def test_a_hand_over_carries_large_events_within_the_payload_limit(
    agent_client: AgentClient, worker, registry: ToolRegistry
) -> None:
    # Outputs of 200,000 characters, the conversation pruned to stay under
    # 1 MB: ten steps' events alone (each output in its completed event,
    # base64 in the carry) are about 2.7 MB, past Temporal's 2 MB payload
    # limit; the whole carry was 3.3 MB before the bound, and the hand-over
    # failed on every attempt. A hand-over carries the recent events only as
    # far as CARRIED_EVENT_BYTES, so the run goes on.
    big_tools(registry, size=200_000)
    model = script_every_step(
        lambda request: reply("done") if request.messages[-1].role == "tool" and step_of(request) >= 12
        else calls(call("dump", {"part": step_of(request)}))
    )
    spec = AgentSpec(model=model, tools=["dump"], continue_as_new_every_steps=10, max_steps=20,
                     tool_output_limit=250_000, default_permission="allow",
                     context=ContextPolicy(context_window_tokens=150_000, protect_recent_tool_results=1))
    async with worker():
        handle = await agent_client.start(spec, "dump twelve parts")
        seen = []

        async def follow() -> None:
            async for event in handle.events():
                seen.append(event)

        await asyncio.wait_for(follow(), 60)
        result = await asyncio.wait_for(handle.result(), 60)
        histories = await chain_histories(agent_client.temporal, handle.run_id)
        # Read from the start once it ended: most of it is no longer in the
        # next run's stream, only in the Temporal run before it.
        late = []

        async def read_late() -> None:
            async for event in handle.events():
                late.append(event)

        await asyncio.wait_for(read_late(), 60)
    assert result.status == "completed" and result.report.step_count == 13
    assert len(histories) == 2  # handed over once, after step 10
    started = histories[1].events[0].workflow_execution_started_event_attributes
    carried = sum(len(p.data) for p in started.input.payloads)
    assert 400_000 < carried < 1_500_000  # the carry: conversation, report and the recent events
    carry = json.loads(started.input.payloads[0].data)["carry"]["stream"]
    assert 0 < len(carry["log"]) < 1000 and carry["base_offset"] > 0
    assert sum(len(item["topic"]) + len(item["data"]) for item in carry["log"]) <= handover.CARRIED_EVENT_BYTES
    # Both readers got every event once, in order: the live one however far
    # behind it was at the hand-over, the late one from both Temporal runs.
    for events in (seen, late):
        types = [e.type for e in events]
        assert [e.seq for e in events] == list(range(len(events)))
        assert types.count("agent.run.continued") == 1 and types[-1] == "thread.run.completed"
        assert types.count("agent.tool.execution.completed") == 12
    assert [e.model_dump() for e in late] == [e.model_dump() for e in seen]


async def test_events_no_run_holds_any_more_are_skipped_with_a_warning(
    agent_client: AgentClient, caplog: pytest.LogCaptureFixture
) -> None:
    # A Temporal run deleted, or past the namespace's retention, can no longer
    # give the events the next run did not carry: the reader says which are
    # gone and goes on (here the whole run is unknown to the server).
    handle = agent_client.get_handle("run-never-started")
    with caplog.at_level(logging.WARNING, logger="agentloop.client.agent_client"):
        assert await handle._earlier_items(0, 40) == []
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "agentloop.client.agent_client"]
    assert "run run-never-started: events 0 to 39 are gone with the Temporal run that held them" in warning
    assert "going on from event 40" in warning


# Budgets and verification -----------------------------------------------------------


async def test_cost_limit_ends_the_run_with_a_clear_reason(agent_client: AgentClient, worker) -> None:
    name = f"l{uuid.uuid4().hex[:10]}"
    register_scripted_model(name, [calls(call("list_dir", {"path": "."})) for _ in range(5)])
    budget = Budget(cost_limit_usd=0.05,
                    prices={f"scripted:{name}": ModelPrice(input_per_mtok=1000, output_per_mtok=1000)})
    async with worker():
        with pytest.raises(AgentRunFailed) as info:
            await agent_client.run(AgentSpec(model=f"scripted:{name}", tools=["list_dir"], budget=budget), "spend")
    assert info.value.reason == "cost_limit"
    assert "over AgentSpec.budget.cost_limit_usd=$0.05" in info.value.result.error
    assert info.value.result.report.total_cost_usd > 0.05


async def test_token_budget(agent_client: AgentClient, worker) -> None:
    model = script(*[calls(call("list_dir", {"path": "."})) for _ in range(5)])
    async with worker():
        with pytest.raises(AgentRunFailed) as info:
            await agent_client.run(
                AgentSpec(model=model, tools=["list_dir"], budget=Budget(max_total_tokens=100)), "go")
    assert info.value.reason == "cost_limit" and "max_total_tokens=100" in info.value.result.error


async def test_self_verification_asks_once_before_completing(agent_client: AgentClient, worker) -> None:
    def step(request):
        last = request.messages[-1]
        if last.role == "user" and "check your work" in last.text:
            return reply("Checked: the answer stands. 4")
        return reply("4")

    async with worker():
        result = await agent_client.run(AgentSpec(model=script_every_step(step), verify_before_completing=True), "2+2?")
    assert result.final_text == "Checked: the answer stands. 4"
    assert [m.role for m in result.messages] == ["assistant", "user", "assistant"]
    assert result.report.step_count == 2


async def test_no_verification_when_the_answer_comes_on_the_last_step(agent_client: AgentClient, worker) -> None:
    async with worker():
        result = await agent_client.run(
            AgentSpec(model=script(reply("4")), verify_before_completing=True, max_steps=1), "2+2?"
        )
    assert (result.status, result.final_text, result.report.step_count) == ("completed", "4", 1)


# Payload limits ----------------------------------------------------------------------


async def test_oversized_input_is_refused_before_starting(agent_client: AgentClient) -> None:
    with pytest.raises(UserError, match="Temporal refuses payloads over 2 MB"):
        await agent_client.start(AgentSpec(model="scripted:demo"), [Message.user("x" * 2_000_000)])


async def test_oversized_client_output_is_cut_with_a_note(agent_client: AgentClient, worker) -> None:
    from agentloop.shared.definition.activity_io import ToolDefinition

    def step(request):
        results = last_tool_results(request)
        if not results:
            return calls(call("fetch_blob"))
        return reply(f"got {len(results[0].content)} chars")

    async with worker():
        handle = await agent_client.start(
            AgentSpec(model=script_every_step(step), client_tools=[ToolDefinition(name="fetch_blob")],
                      tool_output_limit=1000),
            "fetch",
        )
        await wait_state(handle, lambda s: s.status == "requires_action", "requires_action")
        await handle.submit_tool_outputs({"call_0_0": "y" * 50_000})
        result = await handle.result()
    content = result.messages[1].tool_results[0].content
    assert len(content) < 1200 and "characters cut: the answer exceeded tool_output_limit" in content


async def test_oversized_submission_is_refused_by_the_client(agent_client: AgentClient, worker) -> None:
    from agentloop import DecisionRejected
    from agentloop.shared.definition.activity_io import ToolDefinition

    async with worker():
        handle = await agent_client.start(
            AgentSpec(model=script(calls(call("a"), call("b")), reply("x")),
                      client_tools=[ToolDefinition(name="a"), ToolDefinition(name="b")]),
            "go",
        )
        await wait_state(handle, lambda s: len(s.pending_actions) == 2, "two actions")
        with pytest.raises(DecisionRejected, match="Temporal refuses payloads over 2 MB"):
            await handle.submit_tool_outputs({"call_0_0": "a" * 900_000, "call_0_1": "b" * 900_000})
        await handle.submit_tool_outputs({"call_0_0": "a", "call_0_1": "b"})
        assert (await handle.result()).status == "completed"


async def test_a_run_on_one_worker_asks_itself_nothing_for_its_transcript(
    temporal_client, agent_client: AgentClient, task_queue: str, registry: ToolRegistry, workspace: Path
) -> None:
    # The first step carries its small transcript by value; every later step
    # is what this worker produced (the assistant message, then the tool
    # results), predicted and checked by the chained hash: no query at all.
    from temporalio.worker import Worker

    from agentloop import AgentLoopPlugin

    (workspace / "a.txt").write_text("alpha")
    plugin = AgentLoopPlugin(registry=registry, workspace=workspace)
    model = script(calls(call("read_file", {"file_path": "a.txt"})),
                   calls(call("list_dir", {"path": "."}), call("read_file", {"file_path": "a.txt"})), reply("done"))
    async with Worker(temporal_client, task_queue=task_queue, plugins=[plugin]):
        result = await agent_client.run(AgentSpec(model=model, tools=["read_file", "list_dir"],
                                                  default_permission="allow"), "look")
    assert result.final_text == "done"
    stats = plugin.agent_activities.transcripts.stats
    assert (stats.seeded, stats.predicted, stats.queries) == (1, 2, 0)


# What the result and the report keep ----------------------------------------------------


async def both_results(agent_client: AgentClient, worker, spec: AgentSpec, text: str) -> tuple[AgentRunResult, dict]:
    """A run's result as the client gives it, and its Temporal result as
    the Temporal UI and CLI show it."""
    async with worker():
        handle = await agent_client.start(spec, text)
        result = await handle.result()
        history = await handle.workflow_handle.fetch_history()
    for event in history.events:
        if event.HasField("workflow_execution_completed_event_attributes"):
            return result, json.loads(event.workflow_execution_completed_event_attributes.result.payloads[0].data)
    raise AssertionError("the run did not complete")


def sample_ten_times(registry: ToolRegistry, *, count: int, spacing: int) -> str:
    """A tool ``sample`` whose call for ``part`` reports ``count`` numbers
    from ``part * spacing`` in its metrics (only the report holds them), and
    a model that calls it at steps 0 to 9, then answers."""
    @registry.tool
    async def sample(part: int, ctx: ToolContext) -> str:
        """Reports many numbers."""
        ctx.metrics["samples"] = list(range(part * spacing, part * spacing + count))
        return f"sampled {part}"

    return script_every_step(lambda request: reply("done") if step_of(request) >= 10
                             else calls(call("sample", {"part": step_of(request)})))


async def test_the_report_keeps_long_arguments_errors_and_input_cut(
    agent_client: AgentClient, worker, registry: ToolRegistry
) -> None:
    # The whole of each is in the conversation and the events; the report,
    # carried in every hand-over and returned in the result, keeps a cut.
    @registry.tool
    async def save(content: str, note: str) -> str:
        """Fails with a long error."""
        raise ValueError("disk full: " + "e" * 30_000)

    content = "c" * 50_000
    model = script(calls(call("save", {"content": content, "note": "short"})), reply("gave up"))
    async with worker():
        handle = await agent_client.start(AgentSpec(model=model, tools=["save"], default_permission="allow"),
                                          "save this: " + "u" * 10_000)
        with pytest.raises(AgentRunFailed) as failed:  # its only call failed
            await handle.result()
        messages = await handle.messages()
        events = [e async for e in handle.events()]
    result = failed.value.result
    assert result is not None and result.reason == "tool_error"
    (report,) = result.report.steps[0].tool_calls
    assert report.arguments_cut and report.arguments["note"] == "short"
    assert report.arguments["content"].startswith("ccc") and report.arguments["content"].endswith("characters cut]")
    assert len(report.arguments["content"]) <= REPORT_TEXT_LIMIT
    assert report.error is not None and "disk full" in report.error and len(report.error) <= REPORT_TEXT_LIMIT
    assert report.result_size_bytes > 15_000  # what the model saw (up to tool_output_limit), measured whole
    assert len(result.report.user_message) <= REPORT_TEXT_LIMIT
    assert result.report.user_message.startswith("save this: uuu")
    # The conversation and the events keep everything.
    assert messages[0].text == "save this: " + "u" * 10_000
    assert messages[1].tool_calls[0].arguments["content"] == content
    assert len(messages[2].content[0].content) > 15_000
    completed = [e for e in events if e.type == "agent.tool.execution.completed"]
    assert len(completed[0].result.content) > 15_000


async def test_a_long_report_leaves_its_steps_out_of_the_temporal_result_only(
    agent_client: AgentClient, worker, registry: ToolRegistry
) -> None:
    # Ten calls whose metrics come to 30 KB each: the messages stay small,
    # the report passes RESULT_REPORT_LIMIT.
    model = sample_ten_times(registry, count=5_000, spacing=10_000)
    result, raw = await both_results(agent_client, worker, AgentSpec(
        model=model, tools=["sample"], default_permission="allow", max_steps=20), "sample ten times")
    assert raw["report_steps_omitted"] is True and raw["report"]["steps"] == []
    assert raw["messages_omitted"] == 0 and len(raw["messages"]) == 21  # the messages stay in the result
    assert raw["report"]["step_count"] == 11
    # The client fetched the steps: its caller sees the whole report.
    assert not result.report_steps_omitted and len(result.report.steps) == 11
    assert result.report.steps[3].tool_calls[0].metrics["samples"][:2] == [30_000, 30_001]
    assert len(result.messages) == 21


async def test_long_messages_leave_the_temporal_result_and_the_client_fetches_them(
    agent_client: AgentClient, worker, registry: ToolRegistry
) -> None:
    big_tools(registry, size=20_000)
    model = script(*[calls(call("dump", {"part": i})) for i in range(4)], reply("done"))
    result, raw = await both_results(agent_client, worker, AgentSpec(
        model=model, tools=["dump"], default_permission="allow", tool_output_limit=30_000), "dump four parts")
    assert raw["messages"] == [] and raw["messages_omitted"] == 9
    assert raw["report_steps_omitted"] is True and raw["report"]["steps"] == []
    assert len(result.messages) == 9 and result.messages_omitted == 9  # the count stays: it says what was fetched
    assert result.messages[1].content[0].content.startswith("part 0: xxx")
    assert len(result.report.steps) == 5 and not result.report_steps_omitted


async def test_a_hand_over_carries_the_newest_step_reports_and_counts_the_rest(
    agent_client: AgentClient, worker, registry: ToolRegistry
) -> None:
    # Each call reports 20,000 numbers (about 160 KB of report a step): at
    # the hand-over after step 8 the report is over the carry's 1 MB limit,
    # and the run used to stay in its Temporal run for good. It carries the
    # newest step reports within REPORT_STEPS_CARRY_BYTES, counts the others
    # in earlier_steps, and hands over.
    model = sample_ten_times(registry, count=20_000, spacing=1_000_000)
    spec = AgentSpec(model=model, tools=["sample"], default_permission="allow", max_steps=20,
                     continue_as_new_every_steps=8)
    async with worker():
        handle = await agent_client.start(spec, "sample ten times")
        result = await asyncio.wait_for(handle.result(), 60)
        histories = await chain_histories(agent_client.temporal, handle.run_id)
    assert result.status == "completed" and len(histories) == 2  # handed over after step 8
    started = histories[1].events[0].workflow_execution_started_event_attributes
    carried = json.loads(started.input.payloads[0].data)["carry"]["report"]
    assert sum(len(json.dumps(s, separators=(",", ":"))) for s in carried["steps"]) <= handover.REPORT_STEPS_CARRY_BYTES
    report = result.report
    assert report.step_count == 11 and report.tool_call_count == 10
    assert report.earlier_steps == carried["earlier_steps"] > 0
    assert [s.index for s in report.steps] == list(range(report.earlier_steps, 11))
    assert report.steps[-2].tool_calls[0].metrics["samples"][0] == 9_000_000
