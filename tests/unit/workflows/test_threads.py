"""The thread decisions (agentloop.workflows.effects.threads), without a server."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agentloop.shared.base.messages import Message, ToolCallPart
from agentloop.shared.definition.activity_io import StreamDelta
from agentloop.shared.runs.events import MessageDelta, MessageReset
from agentloop.shared.runs.threads import (
    INTERRUPTED_MARK,
    INTERRUPTED_TOOL_RESULT,
    MAX_QUEUED,
    QueuedMessage,
    SendMessage,
    SteerMessage,
)
from agentloop.workflows.decisions.conversation import (
    Enqueue,
    Interrupt,
    Refused,
    Rollback,
    StartTurn,
    ThreadFacts,
    cut_requested,
    decide_message,
    decide_steer,
    interrupted_tail,
    parse_send,
    partial_text,
    queue_with,
    rolled_back,
)

IDLE = ThreadFacts(run_id="t", thread_id="t", busy=False, queued=0, next_turn=2, turn=1)
BUSY = ThreadFacts(run_id="t", thread_id="t", busy=True, queued=0, next_turn=2, turn=1)


def test_an_idle_thread_starts_the_next_turn_whatever_the_strategy() -> None:
    for strategy in ("enqueue", "interrupt", "rollback", "reject"):
        decision = decide_message(SendMessage(text="hi", strategy=strategy), IDLE)
        assert decision == StartTurn(QueuedMessage(turn=2, text="hi"))


def test_a_busy_thread_applies_the_strategy_of_the_call_then_the_thread() -> None:
    assert isinstance(decide_message(SendMessage(text="x"), BUSY), Enqueue)
    assert isinstance(decide_message(SendMessage(text="x", strategy="interrupt"), BUSY), Interrupt)
    assert isinstance(decide_message(SendMessage(text="x", strategy="rollback"), BUSY), Rollback)
    by_thread = ThreadFacts(**{**BUSY.__dict__, "default_strategy": "rollback"})
    assert isinstance(decide_message(SendMessage(text="x"), by_thread), Rollback)
    assert isinstance(decide_message(SendMessage(text="x", strategy="enqueue"), by_thread), Enqueue)


def test_reject_while_busy_is_a_thread_busy_refusal() -> None:
    with pytest.raises(Refused) as info:
        decide_message(SendMessage(text="x", strategy="reject"), BUSY)
    assert info.value.error_type == "ThreadBusy"
    assert str(info.value).startswith("thread t is busy (turn 1 is under way) and rejects messages meanwhile")


def test_refusals_say_what_was_wrong() -> None:
    not_thread = ThreadFacts(run_id="run-1", thread_id="", busy=False, queued=0, next_turn=1)
    with pytest.raises(Refused, match="run run-1 is not a thread: start one with `agentloop run --thread ID`"):
        decide_message(SendMessage(text="x"), not_thread)
    with pytest.raises(Refused, match="the message is empty"):
        decide_message(SendMessage(text="  "), IDLE)
    with pytest.raises(Refused, match="has ended"):
        decide_message(SendMessage(text="x"), ThreadFacts(**{**IDLE.__dict__, "ended": True}))
    full = ThreadFacts(**{**BUSY.__dict__, "queued": MAX_QUEUED})
    with pytest.raises(Refused, match=f"already holds {MAX_QUEUED} messages"):
        decide_message(SendMessage(text="x"), full)
    with pytest.raises(Refused) as info:
        parse_send({"text": "x" * 200_000})
    assert "x" * 100 not in str(info.value) and "malformed send payload" in str(info.value)


def test_interrupting_messages_jump_the_queue_and_cut_the_turn() -> None:
    waiting = [QueuedMessage(turn=2, text="a")]
    assert cut_requested(waiting) is None
    queue = queue_with(waiting, Interrupt(QueuedMessage(turn=3, text="b", strategy="interrupt")))
    assert [m.turn for m in queue] == [3, 2] and cut_requested(queue) == "interrupt"
    assert [m.turn for m in queue_with(waiting, Enqueue(QueuedMessage(turn=3, text="b")))] == [2, 3]


def test_interrupt_or_rollback_behind_waiting_messages_when_nothing_runs_waits_in_order() -> None:
    between = ThreadFacts(run_id="t", thread_id="t", busy=False, queued=1, next_turn=3, turn=1)
    assert isinstance(decide_message(SendMessage(text="x", strategy="interrupt"), between), Enqueue)


def test_steering_needs_a_running_turn() -> None:
    assert decide_steer(SteerMessage(text="v2"), run_id="r", running=True, is_thread=False).text == "v2"
    with pytest.raises(Refused, match="nothing to steer: run r is not running a turn; use `agentloop send r"):
        decide_steer(SteerMessage(text="v2"), run_id="r", running=False, is_thread=True)
    with pytest.raises(Refused, match="the steering message is empty"):
        decide_steer(SteerMessage(text=""), run_id="r", running=True, is_thread=False)


def delta(text: str, message_id: str = "m") -> MessageDelta:
    return MessageDelta(run_id="r", time=datetime.now(UTC), message_id=message_id,
                        delta=StreamDelta(kind="text", text=text))


def test_partial_text_is_the_latest_attempts_text_of_the_message() -> None:
    reset = MessageReset(run_id="r", time=datetime.now(UTC), message_id="m", attempt=2)
    events = [delta("old "), reset, delta("The answer"), delta(" is", "other"), delta(" is")]
    assert partial_text(events, "m") == "The answer is"


def test_an_interrupted_llm_step_leaves_its_partial_text_marked() -> None:
    messages = [Message.user("q")]
    assert [m.text for m in interrupted_tail(messages, "The ans")] == [f"The ans {INTERRUPTED_MARK}"]
    assert [m.text for m in interrupted_tail(messages, "")] == [INTERRUPTED_MARK]


def test_interrupted_tool_calls_get_an_interrupted_result_each() -> None:
    calls = [ToolCallPart(id="c1", name="build"), ToolCallPart(id="c2", name="test")]
    messages = [Message.user("q"), Message.assistant("", calls)]
    (tail,) = interrupted_tail(messages, "")
    assert tail.role == "tool"
    assert [(r.id, r.content, r.is_error) for r in tail.tool_results] == [
        ("c1", INTERRUPTED_TOOL_RESULT, True), ("c2", INTERRUPTED_TOOL_RESULT, True)]


def test_rollback_keeps_the_conversation_before_the_turn() -> None:
    messages = [Message.user("a"), Message.assistant("b"), Message.user("c"), Message.assistant("d")]
    assert rolled_back(messages, 2) == messages[:2]
