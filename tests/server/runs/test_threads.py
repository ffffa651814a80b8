"""Threads on the real dev server (README "Conversations"): follow-ups that
see the whole conversation, double-texting strategies, steering, restarts."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType

from agentloop import AgentClient, AgentSpec
from agentloop.activities.providers.scripted_model import register_scripted_model
from agentloop.client.handle import AgentRunHandle
from agentloop.shared.base.errors import DecisionRejected
from agentloop.shared.definition.activity_io import ModelRequest, ModelResponse
from agentloop.shared.runs.search_attributes import AGENT_THREAD
from agentloop.shared.runs.threads import (
    INTERRUPTED_MARK,
    INTERRUPTED_TOOL_RESULT,
    MessageRefused,
    ThreadBusy,
    ThreadNotFound,
)
from agentloop.testing import call, calls, reply, script, script_every_step
from agentloop.tools.registry import ToolRegistry
from tests.helpers.agents import recording, user_texts
from tests.helpers.polling import eventually


def texts(request: ModelRequest) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in request.messages]


async def test_a_three_message_thread_sends_the_model_every_earlier_exchange(
    agent_client: AgentClient, worker: Any
) -> None:
    model, seen = recording(lambda r: reply(f"answer {sum(1 for m in r.messages if m.role == 'user')}"))
    spec = AgentSpec(model=model)
    async with worker():
        first = await agent_client.start(spec, "first question", thread_id="thread-three")
        assert (await first.result()).final_text == "answer 1"
        second = await agent_client.send("thread-three", "second question")
        assert second.turn == 2
        assert (await second.result()).final_text == "answer 2"
        third = await agent_client.send("thread-three", "third question")
        result = await third.result()
        assert result.final_text == "answer 3"
        assert [m.text for m in result.messages] == ["answer 3"]
        state = await third.state()
        assert (state.thread_id, state.turn, state.busy, state.status) == ("thread-three", 3, False, "idle")
    assert texts(seen[2]) == [
        ("user", "first question"), ("assistant", "answer 1"),
        ("user", "second question"), ("assistant", "answer 2"),
        ("user", "third question"),
    ]
    description = await third.workflow_handle.describe()
    assert description.typed_search_attributes.get(AGENT_THREAD) == "thread-three"
    # Each turn's step has its own number, and names the transcript by
    # reference: history holds each message once, not the conversation per turn.
    history = await third.workflow_handle.fetch_history()
    inputs = [json.loads(e.activity_task_scheduled_event_attributes.input.payloads[0].data)
              for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]
    assert [(i["step"], i.get("seed") is not None) for i in inputs] == [(0, True), (1, False), (2, False)]


async def test_send_to_a_missing_thread_says_so(agent_client: AgentClient, worker: Any) -> None:
    with pytest.raises(ThreadNotFound, match="thread no-such-thread does not exist; "
                                             "start it with `agentloop run --thread no-such-thread"):
        await agent_client.send("no-such-thread", "hello?")


async def test_send_to_a_run_that_is_not_a_thread_is_refused(agent_client: AgentClient, worker: Any) -> None:
    gate = asyncio.Event()

    async def slow(request: ModelRequest) -> ModelResponse:
        await gate.wait()
        return reply("done")

    async with worker():
        handle = await agent_client.start(AgentSpec(model=script(slow)), "work")
        with pytest.raises(MessageRefused,
                           match=f"run {handle.run_id} is not a thread: start one with `agentloop run --thread ID`"):
            await agent_client.send(handle.run_id, "more")
        gate.set()
        assert (await handle.result()).final_text == "done"


# Helpers for the strategies ------------------------------------------------------------

THREAD_EVENTS = ("agent.thread.message.received", "agent.turn.started", "agent.turn.ended",
                 "agent.turn.interrupted", "agent.turn.rolled_back")


async def events_until_turn_ends(client: AgentClient, thread_id: str, turn: int) -> list[Any]:
    """The thread's events from its start until turn ``turn`` has ended."""
    handle = AgentRunHandle(client.temporal.get_workflow_handle(thread_id), turn=turn, offset=0)
    return [e async for e in handle.events(0)]


def story(events: list[Any]) -> list[tuple[Any, ...]]:
    """The thread events in order: (type, turn[, status or strategy])."""
    out: list[tuple[Any, ...]] = []
    for e in events:
        if e.type == "agent.thread.message.received":
            out.append(("received", e.turn, e.strategy))
        elif e.type == "agent.turn.ended":
            out.append(("ended", e.turn, e.status))
        elif e.type in THREAD_EVENTS:
            out.append((e.type.rsplit(".", 1)[-1], e.turn))
    return out


async def wait_for_event(client: AgentClient, thread_id: str, kind: str) -> Any:
    """The first event of type ``kind`` on the thread's stream (waits for it)."""
    async for event in client.get_handle(thread_id).events(0):
        if event.type == kind:
            return event
    raise AssertionError(f"the stream ended without {kind}")


def gated_model(gate: asyncio.Event, seen: list[ModelRequest], *, wait_on: str) -> str:
    """Answers every step "answer to <last user text>"; the step whose last
    user message is ``wait_on`` waits for ``gate`` first."""

    async def step(request: ModelRequest) -> ModelResponse:
        seen.append(request)
        last = user_texts(request)[-1]
        if last == wait_on:
            await gate.wait()
        return reply(f"answer to {last}")

    return script_every_step(step)


# Double-texting --------------------------------------------------------------------------


async def test_enqueue_answers_each_message_after_the_turn_before_it(agent_client: AgentClient, worker: Any) -> None:
    gate, seen = asyncio.Event(), []
    spec = AgentSpec(model=gated_model(gate, seen, wait_on="first"))
    async with worker():
        first = await agent_client.start(spec, "first", thread_id="thread-enqueue")
        await eventually(lambda: seen, "the model asked")
        second = await agent_client.send("thread-enqueue", "second")
        third = await agent_client.send("thread-enqueue", "third", strategy="enqueue")
        assert (second.turn, third.turn) == (2, 3)
        state = await first.state()
        assert (state.busy, state.turn, state.queued) == (True, 1, 2)
        gate.set()
        results = [await h.result() for h in (first, second, third)]
        events = await events_until_turn_ends(agent_client, "thread-enqueue", 3)
    assert [r.final_text for r in results] == ["answer to first", "answer to second", "answer to third"]
    assert [user_texts(r) for r in seen] == [["first"], ["first", "second"], ["first", "second", "third"]]
    assert story(events) == [
        ("started", 1), ("received", 2, "enqueue"), ("received", 3, "enqueue"), ("ended", 1, "completed"),
        ("started", 2), ("ended", 2, "completed"), ("started", 3), ("ended", 3, "completed"),
    ]


async def test_interrupt_keeps_the_partial_text_marked_and_answers_the_new_message(
    agent_client: AgentClient, worker: Any
) -> None:
    long_answer = "The answer is forty-two, and here is the long reason why it is so"
    seen: list[ModelRequest] = []

    def step(request: ModelRequest) -> ModelResponse:
        seen.append(request)
        return reply(long_answer if len(seen) == 1 else f"answer to {user_texts(request)[-1]}")

    name = f"interrupt-{uuid.uuid4().hex[:6]}"
    register_scripted_model(name, step, delta_seconds=1.5)
    spec = AgentSpec(model=f"scripted:{name}")
    async with worker():
        first = await agent_client.start(spec, "tell me everything", thread_id="thread-interrupt")
        await wait_for_event(agent_client, "thread-interrupt", "thread.message.delta")
        second = await agent_client.send("thread-interrupt", "stop, what is 2+2?", strategy="interrupt")
        interrupted = await first.result()
        answered = await second.result()
        messages = await second.messages()
        events = await events_until_turn_ends(agent_client, "thread-interrupt", 2)
    cut = next(e for e in events if e.type == "agent.turn.interrupted")
    assert cut.partial_text and long_answer.startswith(cut.partial_text) and cut.partial_text != long_answer
    assert (interrupted.status, interrupted.error) == ("stopped", "interrupted by the message of turn 2")
    assert answered.final_text == "answer to stop, what is 2+2?"
    assert [(m.role, m.text) for m in messages] == [
        ("user", "tell me everything"),
        ("assistant", f"{cut.partial_text} {INTERRUPTED_MARK}"),
        ("user", "stop, what is 2+2?"),
        ("assistant", "answer to stop, what is 2+2?"),
    ]
    assert [(m.role, m.text) for m in seen[1].messages] == [(m.role, m.text) for m in messages[:3]]
    assert story(events) == [
        ("started", 1), ("received", 2, "interrupt"), ("interrupted", 1), ("ended", 1, "interrupted"),
        ("started", 2), ("ended", 2, "completed"),
    ]


async def test_interrupt_during_a_tool_call_gives_it_an_interrupted_result(
    agent_client: AgentClient, worker: Any, registry: ToolRegistry
) -> None:
    release, cancelled = asyncio.Event(), []

    @registry.tool
    async def build() -> str:
        """Build the project (slow)."""
        try:
            await release.wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "built"

    model = script(calls(call("build")), reply("answer to the new message"))
    spec = AgentSpec(model=model, tools=["build"], default_permission="allow")
    async with worker():
        first = await agent_client.start(spec, "build it", thread_id="thread-interrupt-tool")
        await wait_for_event(agent_client, "thread-interrupt-tool", "agent.tool.execution.started")
        second = await agent_client.send("thread-interrupt-tool", "never mind", strategy="interrupt")
        assert (await first.result()).status == "stopped"
        assert (await second.result()).final_text == "answer to the new message"
        messages = await second.messages()
    assert [m.role for m in messages] == ["user", "assistant", "tool", "user", "assistant"]
    (result,) = messages[2].tool_results
    assert (result.id, result.is_error, result.content) == (messages[1].tool_calls[0].id, True, INTERRUPTED_TOOL_RESULT)
    assert cancelled == [True]  # the tool was cancelled, not left running


async def test_rollback_discards_the_turn_and_answers_in_its_place(
    agent_client: AgentClient, worker: Any, registry: ToolRegistry
) -> None:
    release = asyncio.Event()

    @registry.tool
    async def research() -> str:
        """Research (slow)."""
        await release.wait()
        return "found"

    seen: list[ModelRequest] = []

    def step(request: ModelRequest) -> ModelResponse:
        seen.append(request)
        last = user_texts(request)[-1]
        if last == "research it" and request.messages[-1].role == "user":
            return calls(call("research"))
        return reply(f"answer to {last}")

    spec = AgentSpec(model=script_every_step(step), tools=["research"], default_permission="allow")
    async with worker():
        first = await agent_client.start(spec, "hello", thread_id="thread-rollback")
        await first.result()
        second = await agent_client.send("thread-rollback", "research it")
        await wait_for_event(agent_client, "thread-rollback", "agent.tool.execution.started")
        third = await agent_client.send("thread-rollback", "actually, just say hi", strategy="rollback")
        rolled = await second.result()
        answered = await third.result()
        messages = await third.messages()
        state = await third.state()
        events = await events_until_turn_ends(agent_client, "thread-rollback", 3)
    assert (rolled.status, rolled.error, rolled.messages) == ("stopped", "rolled back for the message of turn 3", [])
    assert answered.final_text == "answer to actually, just say hi"
    assert [(m.role, m.text) for m in messages] == [
        ("user", "hello"), ("assistant", "answer to hello"),
        ("user", "actually, just say hi"), ("assistant", "answer to actually, just say hi"),
    ]
    assert user_texts(seen[-1]) == ["hello", "actually, just say hi"]
    assert state.usage.requests == 3  # the discarded turn's LLM call stays counted
    rolled_event = next(e for e in events if e.type == "agent.turn.rolled_back")
    assert rolled_event.discarded == 2  # its user message and its tool call
    assert story(events) == [
        ("started", 1), ("ended", 1, "completed"), ("received", 2, "enqueue"), ("started", 2),
        ("received", 3, "rollback"), ("rolled_back", 2), ("ended", 2, "rolled_back"),
        ("started", 3), ("ended", 3, "completed"),
    ]


async def test_reject_refuses_while_busy_and_leaves_no_trace_in_history(
    agent_client: AgentClient, worker: Any
) -> None:
    gate, seen = asyncio.Event(), []
    spec = AgentSpec(model=gated_model(gate, seen, wait_on="first"), double_texting="reject")
    async with worker():
        first = await agent_client.start(spec, "first", thread_id="thread-reject")
        await eventually(lambda: seen, "the model asked")
        with pytest.raises(ThreadBusy, match="thread thread-reject is busy \\(turn 1 is under way\\) and rejects "
                                             "messages meanwhile \\(strategy reject\\)"):
            await agent_client.send("thread-reject", "a secret second message")
        gate.set()
        assert (await first.result()).final_text == "answer to first"
        state = await first.state()
        later = await agent_client.send("thread-reject", "now I may")  # idle: taken
        assert (await later.result()).final_text == "answer to now I may"
        history = await first.workflow_handle.fetch_history()
    assert state.queued == 0 and state.turn == 1
    assert "a secret second message" not in history.to_json()
    updates = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED]
    assert len(updates) == 1  # the later message only


# Steering ------------------------------------------------------------------------------------


async def test_steering_during_a_long_tool_call_reaches_the_next_step(
    agent_client: AgentClient, worker: Any, registry: ToolRegistry
) -> None:
    release = asyncio.Event()

    @registry.tool
    async def fetch_docs() -> str:
        """Fetch the API docs (slow)."""
        await release.wait()
        return "v1 docs"

    seen: list[ModelRequest] = []

    def step(request: ModelRequest) -> ModelResponse:
        seen.append(request)
        return calls(call("fetch_docs")) if len(seen) == 1 else reply(f"using: {user_texts(request)[-1]}")

    spec = AgentSpec(model=script_every_step(step), tools=["fetch_docs"], default_permission="allow")
    async with worker():
        handle = await agent_client.start(spec, "write the client")
        await wait_for_event(agent_client, handle.run_id, "agent.tool.execution.started")
        accepted = await handle.steer("use the v2 API instead")
        assert accepted.waiting == 1
        release.set()
        result = await handle.result()
        events = [e async for e in handle.events()]
        with pytest.raises(DecisionRejected, match=f"nothing to steer: run {handle.run_id} is not running"):
            await handle.steer("too late")
    assert result.final_text == "using: use the v2 API instead"
    assert [(m.role, m.text or (m.tool_results[0].content if m.tool_results else "")) for m in seen[1].messages] == [
        ("user", "write the client"), ("assistant", ""), ("tool", "v1 docs"), ("user", "use the v2 API instead"),
    ]
    kinds = [e.type for e in events]
    steered = kinds.index("agent.run.steered")
    last_step = len(kinds) - 1 - kinds[::-1].index("agent.run.step.created")
    assert kinds.index("agent.tool.execution.completed") < steered < last_step


async def test_steering_a_thread_that_waits_for_a_message_is_refused(agent_client: AgentClient, worker: Any) -> None:
    async with worker():
        first = await agent_client.start(AgentSpec(model=script(reply("hi"))), "hello", thread_id="thread-idle-steer")
        await first.result()
        with pytest.raises(DecisionRejected, match="nothing to steer: run thread-idle-steer is not running a turn; "
                                                   "use `agentloop send thread-idle-steer ...`"):
            await first.steer("faster")


# Restarts ---------------------------------------------------------------------------------


# The command line ------------------------------------------------------------------------------


async def test_a_stop_ends_the_turn_under_way_and_the_thread_takes_the_next_message(
    agent_client: AgentClient, worker: Any
) -> None:
    gate, seen = asyncio.Event(), []
    spec = AgentSpec(model=gated_model(gate, seen, wait_on="first"))
    async with worker():
        first = await agent_client.start(spec, "first", thread_id="thread-stop-turn")
        await eventually(lambda: seen, "the model asked")
        await first.stop("enough of that")
        second = await agent_client.send("thread-stop-turn", "second")  # the thread goes on
        gate.set()
        assert (await first.result()).final_text == "answer to first"
        assert (await second.result()).final_text == "answer to second"
        await first.stop()  # idle now: the thread ends
        ended = await AgentRunHandle(first.workflow_handle).result()
    assert (ended.status, ended.final_text) == ("stopped", "answer to second")


async def test_a_thread_continues_as_new_while_idle_and_every_run_has_agent_thread(
    agent_client: AgentClient, worker: Any
) -> None:
    model, seen = recording(lambda r: reply(f"answer to {user_texts(r)[-1]}"))
    spec = AgentSpec(model=model, continue_as_new_every_steps=2)
    async with worker():
        first = await agent_client.start(spec, "one", thread_id="thread-can")
        await first.result()
        for text in ("two", "three", "four"):
            await (await agent_client.send("thread-can", text)).result()
        runs: list[Any] = []
        for _ in range(100):  # visibility may lag a moment behind the runs
            runs = [w async for w in agent_client.temporal.list_workflows('AgentThread="thread-can"')]
            if len(runs) >= 2:
                break
            await asyncio.sleep(0.1)
        state = await first.state()
    assert len(runs) >= 2  # it handed over to a new Temporal run, and each is found by AgentThread
    assert (state.turn, state.message_count) == (4, 8)
    assert user_texts(seen[-1]) == ["one", "two", "three", "four"]


async def test_an_idle_thread_has_its_own_status_and_list_finds_it(agent_client: AgentClient, worker: Any) -> None:
    release = asyncio.Event()

    async def answer(request: ModelRequest) -> ModelResponse:
        if user_texts(request)[-1] == "slow one":
            await release.wait()
        return reply(f"answer to {user_texts(request)[-1]}")

    thread_id = f"thread-idle-{uuid.uuid4().hex[:6]}"
    async with worker():
        first = await agent_client.start(AgentSpec(model=script_every_step(answer)), "hello", thread_id=thread_id)
        await first.result()
        state = await first.state()
        assert (state.busy, state.status) == (False, "idle")

        async def listed(status: str) -> bool:
            return thread_id in [r.run_id for r in await agent_client.list_runs(status=status)]

        await eventually(lambda: listed("idle"), "the idle thread listed with status idle")
        slow = await agent_client.send(thread_id, "slow one")
        await eventually(lambda: listed("running"), "the thread listed running during its turn")
        assert (await slow.state()).status == "running"
        release.set()
        await slow.result()
        await eventually(lambda: listed("idle"), "the thread idle again")
        await agent_client.get_handle(thread_id).stop()
        await eventually(lambda: listed("stopped"), "the thread stopped")
