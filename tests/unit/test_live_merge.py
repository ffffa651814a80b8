"""The merge of live deltas with the history's (agentloop/server/streams/live.py):
each character shown once, whatever the order and the gaps."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from agentloop.server.streams.live import LiveRecord, LiveView, Seen
from agentloop.shared.definition.activity_io import StreamDelta
from agentloop.shared.runs.events import MessageCompleted, MessageDelta, MessageReset, RunCreated

T = datetime(2026, 1, 1, tzinfo=UTC)
MID = "r:msg:0"


def delta(text: str, seq: int | None = None, attempt: int = 1, kind: str = "text") -> MessageDelta:
    return MessageDelta(run_id="r", time=T, seq=seq, message_id=MID, attempt=attempt,
                        delta=StreamDelta(kind=kind, text=text))  # type: ignore[arg-type]


def reset(attempt: int, seq: int | None = None) -> MessageReset:
    return MessageReset(run_id="r", time=T, seq=seq, message_id=MID, attempt=attempt)


def texts(out: list[Any]) -> str:
    return "".join(e.delta.text for e in out if isinstance(e, MessageDelta))


def test_a_history_delta_shown_live_is_its_id_alone_and_one_shown_in_part_is_cut() -> None:
    view = LiveView()
    shown = view.live(delta("Hel"), 0) + view.live(delta("lo "), 3)
    assert texts(shown) == "Hello " and all(e.seq is None for e in shown)
    assert view.history(delta("Hello", seq=4), 0) == [Seen(4, run_id="r")]
    (rest,) = view.history(delta(" world", seq=5), 5)
    assert rest.seq == 5 and rest.delta.text == "world"  # " " was shown live
    assert view.live(delta("world", attempt=1), 6) == []  # the history brought it first
    other = view.history(RunCreated(run_id="r", time=T, seq=0, agent_name="a", model="m"))
    assert [e.type for e in other] == ["agent.run.created"]


def test_a_live_delta_after_a_gap_waits_for_the_history() -> None:
    view = LiveView()
    assert texts(view.live(delta("ab"), 0)) == "ab"
    assert view.live(delta("ef"), 4) == []  # "cd" was dropped on the way
    assert texts(view.history(delta("abcd", seq=3), 0)) == "cd"
    assert texts(view.live(delta("efg"), 4)) == "efg"


def test_thinking_and_text_are_counted_apart() -> None:
    view = LiveView()
    view.live(delta("why", kind="thinking"), 0)
    assert texts(view.live(delta("so"), 0)) == "so"
    assert view.history(delta("why", seq=2, kind="thinking"), 0) == [Seen(2, run_id="r")]


def test_a_retried_attempt_shows_after_its_reset_once() -> None:
    view = LiveView()
    view.live(delta("Hel"), 0)
    assert view.live(delta("Hi", attempt=2), 0) == []  # its reset not seen yet
    (shown_reset,) = view.live(reset(2), 0)
    assert shown_reset.seq is None
    assert texts(view.live(delta("Hi", attempt=2), 0)) == "Hi"
    assert view.live(delta("lo", attempt=1), 3) == []  # the failed attempt is over
    assert view.history(reset(2, seq=7)) == [Seen(7, run_id="r")]
    assert view.history(delta("Hi there", seq=8, attempt=2), 0)[0].delta.text == " there"


def test_a_history_reset_not_shown_live_is_passed_on() -> None:
    view = LiveView()
    (passed,) = view.history(reset(2, seq=3))
    assert passed.seq == 3
    assert texts(view.live(delta("ok", attempt=2), 0)) == "ok"


def test_a_resuming_client_gets_the_unfinished_message_reset_and_whole() -> None:
    record = LiveRecord()
    for text, at in (("Hel", 0), ("lo", 3), ("xx", 9)):  # "xx" after a gap: not kept
        record.add(delta(text), at)
    record.add(delta("hm", kind="thinking"), 0)
    assert record.unfinished(4) == {MID}
    view = LiveView()
    out = record.catch_up(view, MID)
    assert out[0].type == "thread.message.reset" and out[0].reason == "reconnected"
    assert texts(out) == "Hellohm"
    assert view.history(delta("Hello", seq=5), 0) == [Seen(5, run_id="r")]
    record.completed(MessageCompleted(run_id="r", time=T, seq=9, message_id=MID,
                                      message={"role": "assistant", "content": []}))
    assert record.unfinished(9) == {MID} and record.unfinished(10) == set()


def test_a_record_keeps_a_retried_attempt_from_its_reset_on() -> None:
    record = LiveRecord()
    record.add(delta("Hel"), 0)
    record.add(delta("Hi", attempt=2), 0)  # before its reset: not kept
    assert record.messages[MID].attempt == 1
    record.add(reset(2), 0)
    record.add(delta("Hi", attempt=2), 0)
    assert record.messages[MID].attempt == 2 and texts(record.messages[MID].pieces) == "Hi"


def test_a_live_delta_later_than_its_completed_message_is_not_shown_or_kept() -> None:
    view, record = LiveView(), LiveRecord()
    view.live(delta("Hel"), 0)
    record.add(delta("Hel"), 0)
    completed = MessageCompleted(run_id="r", time=T, seq=6, message_id=MID,
                                 message={"role": "assistant", "content": [{"type": "text", "text": "Hello"}]})
    assert view.history(completed) == [completed]
    record.completed(completed)
    assert view.live(delta("lo"), 3) == []  # the completed message brought it
    record.add(delta("lo"), 3)
    assert texts(record.messages[MID].pieces) == "Hel" and record.unfinished(7) == set()


def test_a_replaced_attempt_s_history_text_after_its_reset_came_live_is_its_id_alone() -> None:
    view = LiveView()
    assert texts(view.live(delta("Hel"), 0)) == "Hel"  # attempt 1's "lo" is dropped on the way
    assert [e.type for e in view.live(reset(2), 0)] == ["thread.message.reset"]
    assert view.history(delta("Hello", seq=3), 0) == [Seen(3, run_id="r")]  # not "lo" after the reset
    assert view.history(reset(2, seq=4)) == [Seen(4, run_id="r")]
    assert texts(view.live(delta("Hi", attempt=2), 0)) == "Hi"
