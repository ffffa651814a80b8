"""The run's event stream on a real dev server: order invariants, resume
from an offset, approvals on the stream, and a provider stream that breaks
mid-answer (retry without duplicated text)."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from dataclasses import replace
from pathlib import Path

from agentloop import AgentClient, AgentRunFailed, AgentSpec
from agentloop.activities.providers.models import ModelResolver
from agentloop.shared.runs.events import TERMINAL_EVENT_TYPES, MessageDelta
from agentloop.testing import call, calls, last_tool_results, reply, script
from tests.helpers.servers.provider_servers import (
    OpenAIServer,
    openai_completion,
    openai_completion_chunks,
    openai_models,
    openai_stream,
    openai_tool_call,
)


def streamed_text(events) -> dict[str, str]:
    """The text deltas published per message, applying resets."""
    shown: dict[str, str] = {}
    for event in events:
        if event.type == "thread.message.reset":
            shown[event.message_id] = ""
        elif isinstance(event, MessageDelta) and event.delta.kind == "text":
            shown[event.message_id] = shown.get(event.message_id, "") + event.delta.text
    return shown


def rendered_text(events) -> dict[str, str]:
    """What a UI shows per message: the deltas as they come (after resets),
    then, when the message completes, the rest of its text (the tail of a
    stream not worth a signal of its own is carried by the completed message)."""
    shown = streamed_text(events)
    for event in events:
        if event.type == "thread.message.completed":
            text, streamed = event.message.text, shown.get(event.message_id, "")
            assert text.startswith(streamed), (streamed, text)
            shown[event.message_id] = text
    return shown


def check_invariants(events) -> None:
    types = [e.type for e in events]
    assert types[0] == "agent.run.created"
    # Exactly one terminal event, and it is the last.
    assert sum(t in TERMINAL_EVENT_TYPES for t in types) == 1 and types[-1] in TERMINAL_EVENT_TYPES
    assert [e.seq for e in events] == list(range(len(events)))
    for msg_id in {e.message_id for e in events if e.type == "thread.message.created"}:
        positions = [i for i, e in enumerate(events) if getattr(e, "message_id", None) == msg_id]
        kinds = [events[i].type for i in positions]
        # created, then deltas, then completed.
        assert kinds[0] == "thread.message.created" and kinds[-1] == "thread.message.completed", kinds
        assert kinds.count("thread.message.created") == kinds.count("thread.message.completed") == 1
    started = Counter(e.call.id for e in events if e.type == "agent.tool.execution.started")
    completed = Counter(e.result.id for e in events if e.type == "agent.tool.execution.completed")
    announced = Counter(e.call.id for e in events if e.type == "thread.run.step.tool_call.completed_by_llm")
    assert started == completed == announced
    assert all(n == 1 for n in started.values())
    for event in events:
        if event.type == "agent.tool.execution.started":
            done = next(e for e in events
                        if e.type == "agent.tool.execution.completed" and e.result.id == event.call.id)
            assert done.seq > event.seq


async def collect(client: AgentClient, run_id: str, from_offset: int = 0, limit: int | None = None):
    events = []
    async for event in client.events(run_id, from_offset):
        events.append(event)
        if limit is not None and len(events) == limit:
            break
    return events


async def test_event_order_for_a_run_with_tools(agent_client: AgentClient, worker, workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha")

    def answer(request):
        return reply("The files say: " + " / ".join(r.content for r in last_tool_results(request)))

    # A slow stream: each chunk 50 ms after the last, batches of 20 ms.
    model = script(
        calls(call("read_file", {"file_path": "a.txt"}), call("list_dir", {"path": "."}), text="Reading both."),
        answer,
        delta_seconds=0.05,
    )
    async with worker():
        spec = AgentSpec(model=model, tools=["read_file", "list_dir"], stream_batch_seconds=0.02)
        handle = await agent_client.start(spec, "read")
        events = await collect(agent_client, handle.run_id)
        result = await handle.result()
    check_invariants(events)
    types = [e.type for e in events]
    assert types[:4] == ["agent.run.created", "agent.run.status.changed", "agent.run.step.created",
                         "thread.message.created"]
    assert types[-2:] == ["agent.run.status.changed", "thread.run.completed"]
    assert events[-1].final_text == result.final_text and events[-1].usage == result.usage
    # Deltas carry the streamed text, a prefix of the final message; with the
    # completed message a UI shows the whole text once.
    completed = [e for e in events if e.type == "thread.message.completed"]
    streamed = streamed_text(events)
    assert all(streamed.get(e.message_id) for e in completed)
    shown = rendered_text(events)
    assert [shown[e.message_id] for e in completed] == [e.message.text for e in completed]
    assert completed[-1].message.text == result.final_text
    # The tool calls were announced while streaming, before the message completed.
    created = [e for e in events if e.type == "thread.run.step.tool_call.created"]
    assert [(e.call_id, e.name) for e in created] == [("call_0_0", "read_file"), ("call_0_1", "list_dir")]
    assert all(e.seq < completed[0].seq for e in created)
    assert {e.step for e in events if e.type == "agent.tool.execution.completed"} == {0}


async def test_resume_from_offset_equals_one_subscription(agent_client: AgentClient, worker, workspace: Path) -> None:
    model = script(*[calls(call("list_dir", {"path": "."}), text=f"step {i}") for i in range(3)], reply("done"))
    async with worker():
        handle = await agent_client.start(AgentSpec(model=model, tools=["list_dir"]), "go")
        first = await collect(agent_client, handle.run_id, limit=7)  # disconnect after 7 events
        rest = await collect(agent_client, handle.run_id, from_offset=first[-1].seq + 1)
        whole = await collect(agent_client, handle.run_id)
        await handle.result()
    assert [e.model_dump() for e in first + rest] == [e.model_dump() for e in whole]
    check_invariants(whole)


async def test_approvals_and_failure_on_the_stream(agent_client: AgentClient, worker, workspace: Path) -> None:
    model = script(calls(call("write_file", {"file_path": "x.txt", "content": "x"})),
                   reply("cut", finish_reason="length"))
    async with worker():
        handle = await agent_client.start(AgentSpec(model=model, tools=["write_file"]), "write")
        events = []
        async for event in handle.events():
            events.append(event)
            if event.type == "agent.tool.approval.requested":
                assert event.approval.call_id == "call_0_0"
                await handle.deny("call_0_0", "read-only day", by="ops")
        try:
            await handle.result()
            raise AssertionError("the run should fail on length")
        except AgentRunFailed as failed:
            assert failed.reason == "length"
    check_invariants(events)
    statuses = [e.status for e in events if e.type == "agent.run.status.changed"]
    assert statuses == ["running", "awaiting_approval", "running", "failed"]
    (resolved,) = [e for e in events if e.type == "agent.tool.approval.resolved"]
    assert (resolved.decision, resolved.by, resolved.reason) == ("deny", "ops", "read-only day")
    (done,) = [e for e in events if e.type == "agent.tool.execution.completed"]
    assert not done.ran and "read-only day" in done.result.content
    assert events[-1].type == "thread.run.failed" and events[-1].reason == "length"


async def test_events_of_a_cancelled_run_end_with_cancelled(agent_client: AgentClient, worker) -> None:
    model = script(calls(call("write_file", {"file_path": "x.txt", "content": "x"})))
    async with worker():
        handle = await agent_client.start(AgentSpec(model=model, tools=["write_file"]), "write")
        async for event in handle.events():
            if event.type == "thread.run.requires_action" or event.type == "agent.tool.approval.requested":
                await handle.cancel()
            last = event
    assert last.type == "thread.run.cancelled"


async def test_stream_broken_mid_answer_is_retried_without_duplicated_text(
    agent_client: AgentClient, worker
) -> None:
    text = "The answer is forty-two, as computed."
    answer = openai_completion(content=text)
    chunks = openai_completion_chunks(answer, pieces=6)
    with OpenAIServer() as server:
        # First attempt: three chunks of text, then the connection drops;
        # chunks 50 ms apart, published in batches of 20 ms.
        server.enqueue(replace(openai_stream(chunks[:4], break_stream=True), chunk_interval=0.05),
                       replace(openai_stream(chunks), chunk_interval=0.05))
        async with worker(models=openai_models(server)):
            handle = await agent_client.start(
                AgentSpec(model="openai:gpt-test", heartbeat_timeout_seconds=5, stream_batch_seconds=0.02),
                "what is the answer?",
            )
            events = await collect(agent_client, handle.run_id)
            result = await handle.result()
    check_invariants(events)
    assert result.final_text == text
    deltas = [e for e in events if e.type == "thread.message.delta"]
    attempts = [e.attempt for e in deltas]
    assert attempts == sorted(attempts) and set(attempts) == {1, 2}
    (reset,) = [e for e in events if e.type == "thread.message.reset"]
    assert reset.attempt == 2
    assert all(e.seq < reset.seq for e in deltas if e.attempt == 1)
    assert all(e.seq > reset.seq for e in deltas if e.attempt == 2)
    # The partial first attempt was published, and a UI that applies the
    # reset shows the text exactly once.
    assert "".join(e.delta.text for e in deltas if e.attempt == 1) == text[: len("".join(
        e.delta.text for e in deltas if e.attempt == 1))]
    assert rendered_text(events) == {reset.message_id: text}
    # Both attempts count as requests of the step.
    assert result.report.steps[0].usage.requests == 2


async def test_tool_call_arguments_stream_as_deltas(agent_client: AgentClient, worker, workspace: Path) -> None:
    (workspace / "notes.txt").write_text("n")
    answer = openai_completion(tool_calls=[openai_tool_call("call_x", "read_file", '{"file_path": "notes.txt"}')],
                               finish_reason="tool_calls")
    final = openai_completion(content="done")
    with OpenAIServer() as server:
        # Chunks 50 ms apart, published in batches of 20 ms; the last
        # chunk (the finish reason) ends the message, so every fragment of
        # the arguments is published before it.
        server.enqueue(replace(openai_stream(openai_completion_chunks(answer, pieces=4)), chunk_interval=0.05),
                       openai_stream(openai_completion_chunks(final)))
        async with worker(models=openai_models(server)):
            spec = AgentSpec(model="openai:gpt-test", tools=["read_file"], stream_batch_seconds=0.02)
            handle = await agent_client.start(spec, "read")
            events = await collect(agent_client, handle.run_id)
            await handle.result()
    check_invariants(events)
    arguments = "".join(e.delta.text for e in events
                        if e.type == "thread.message.delta" and e.delta.kind == "tool_call_delta")
    assert arguments == '{"file_path": "notes.txt"}'
    (created,) = [e for e in events if e.type == "thread.run.step.tool_call.created"]
    (llm_done,) = [e for e in events if e.type == "thread.run.step.tool_call.completed_by_llm"]
    assert created.call_id == llm_done.call.id == "call_x" and created.seq < llm_done.seq
    assert llm_done.call.arguments == {"file_path": "notes.txt"}


async def test_an_answer_streamed_within_one_batch_costs_no_signal(agent_client: AgentClient, worker) -> None:
    # Every chunk at once (the scripted model's default): by the time the
    # batch window ends the message is complete, and it carries the text.
    model = script(calls(call("list_dir", {"path": "."}), text="Looking."), reply("All done here."))
    async with worker():
        handle = await agent_client.start(AgentSpec(model=model, tools=["list_dir"]), "go")
        events = await collect(agent_client, handle.run_id)
        result = await handle.result()
    check_invariants(events)
    assert not [e for e in events if e.type == "thread.message.delta"]
    assert rendered_text(events)[f"{handle.run_id}:msg:1"] == result.final_text
    history = await handle.workflow_handle.fetch_history()
    assert not [e for e in history.events if e.HasField("workflow_execution_signaled_event_attributes")]


async def test_stream_deltas_off_publishes_only_workflow_events(agent_client: AgentClient, worker) -> None:
    model = script(reply("quiet"))
    async with worker():
        handle = await agent_client.start(AgentSpec(model=model, stream_deltas=False), "go")
        events = await collect(agent_client, handle.run_id)
    check_invariants(events)
    assert not [e for e in events if e.type == "thread.message.delta"]
    history = await handle.workflow_handle.fetch_history()
    assert not [e for e in history.events if e.HasField("workflow_execution_signaled_event_attributes")]


async def test_watching_adds_nothing_to_history(agent_client: AgentClient, worker) -> None:
    release = asyncio.Event()

    async def slow(request):
        await release.wait()
        return reply("ok")

    model = script(slow)
    async with worker():
        handle = await agent_client.start(AgentSpec(model=model, stream_deltas=False), "go")
        watcher = asyncio.ensure_future(collect(agent_client, handle.run_id))
        await asyncio.sleep(1.0)  # about twenty polls while nothing happens
        release.set()
        events = await watcher
        await handle.result()
    check_invariants(events)
    history = await handle.workflow_handle.fetch_history()
    assert not [e for e in history.events if e.HasField("workflow_execution_update_accepted_event_attributes")]


async def test_tokens_of_a_failed_attempt_are_counted(agent_client: AgentClient, worker) -> None:
    from anthropic import AsyncAnthropic

    from agentloop.activities.providers.anthropic_model import AnthropicChatModel
    from tests.helpers.servers.provider_servers import (
        AnthropicServer,
        anthropic_message,
        anthropic_message_events,
        anthropic_stream,
    )

    answer = anthropic_message([{"type": "text", "text": "Forty-two, after a retry."}],
                               input_tokens=1000, output_tokens=8)
    events = anthropic_message_events(answer)
    with AnthropicServer() as server:
        # The first attempt reports its 1000 input tokens (message_start), then breaks.
        server.enqueue(anthropic_stream(events[:3], break_stream=True), anthropic_stream(events))
        client = AsyncAnthropic(base_url=server.base_url, api_key="test-key", max_retries=0)
        models = ModelResolver({"anthropic": lambda provider, name: AnthropicChatModel(client)})
        async with worker(models=models):
            result = await agent_client.run(
                AgentSpec(model="anthropic:claude-test", heartbeat_timeout_seconds=5), "answer"
            )
    assert result.final_text == "Forty-two, after a retry."
    usage = result.report.steps[0].usage
    # Both attempts' input tokens; output: the 1 token message_start reports
    # for the broken attempt plus the 8 of the answer; two requests.
    assert (usage.input_tokens, usage.output_tokens, usage.requests) == (2000, 9, 2)
    assert result.usage == usage


async def test_a_sub_agents_events_are_awaited_until_the_server_has_created_its_run(
    agent_client: AgentClient, worker, workspace: Path
) -> None:
    # A parent announces a child as it asks the server to start it; a viewer
    # that asks for the child's events at once may find no run yet. It waits
    # for the run instead of giving up (before: "no run ...", and the tree
    # view silently lost the child's lines).
    run_id = f"late-{uuid.uuid4().hex[:8]}"
    handle = agent_client.get_handle(run_id)
    seen: list[str] = []

    async def read() -> None:
        async for event in handle._own_events(0, 0.05, wait_to_exist=True):
            seen.append(event.type)

    async with worker():
        reader = asyncio.create_task(read())
        await asyncio.sleep(1)  # the reader has asked at least once and found nothing
        assert not reader.done()
        started = await agent_client.start(AgentSpec(model=script(reply("hi"))), "go", run_id=run_id)
        await started.result()
        await asyncio.wait_for(reader, 30)
    assert seen[0] == "agent.run.created" and seen[-1] == "thread.run.completed"


async def test_the_demo_model_streams_its_answers(agent_client: AgentClient, worker, workspace: Path) -> None:
    # The quick start's model: its text streams slowly enough that deltas
    # publish with the default batch window, as a real model's do.
    (workspace / "README.md").write_text("# hello\n")
    async with worker():
        spec = AgentSpec(model="scripted:demo", tools=["list_dir", "read_file"], workspace=str(workspace))
        handle = await agent_client.start(spec, "What is in this workspace?")
        events = await collect(agent_client, handle.run_id)
        result = await handle.result()
    check_invariants(events)
    streamed = streamed_text(events)
    final = [e for e in events if e.type == "thread.message.completed"][-1]
    assert streamed.get(final.message_id)
    assert result.final_text.startswith(streamed[final.message_id])
