"""Live deltas merged with the history's: what one subscriber is shown.

A worker with ``AGENTLOOP_LIVE_URL`` posts each text or thinking delta to the
gateway the moment the provider sends it (``POST /internal/live``), with its
position ``at`` in its message's text (or thinking) of its attempt. The
history still carries the same text later, in batched ``thread.message.delta``
events. A subscriber is shown each character once:

* a live delta goes out at once, without an SSE ``id:`` (``seq`` is None), so
  ``Last-Event-ID`` is only ever a history offset;
* a history delta whose text was all shown live becomes :class:`Seen`, an SSE
  event with its ``id:`` alone (it moves the client's last event id and
  dispatches nothing); one shown in part is cut to the part not shown yet;
* a live delta past what the subscriber was shown (one was dropped on the
  way) is skipped: the history brings that text, then live deltas go on;
* a retried attempt's reset comes live too (before its deltas) and the
  history's reset of that attempt is then only an id, as is any text of
  the attempts before it that the history brings after that reset.

The decisions are pure (:class:`LiveView`); the hub keeps one per subscriber.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from agentloop.shared.runs.events import MessageCompleted, MessageDelta, MessageReset

#: The kinds of delta that travel live (a tool call's arguments wait for the history).
LIVE_KINDS: Final = ("text", "thinking")
#: Messages a run's live record keeps (for a reconnecting client's catch-up).
KEPT_MESSAGES: Final = 8

Key = tuple[str, int, str]  # message id, attempt, kind


@dataclass(frozen=True)
class Seen:
    """A history event whose content the subscriber was shown live: sent as
    an SSE event with its ``id:`` alone."""

    seq: int
    type: str = "seen"
    run_id: str = ""


@dataclass(frozen=True)
class Positioned:
    """A history delta with where its text starts in its message's text of
    its kind and attempt (None when unknown)."""

    event: MessageDelta
    at: int | None


def key(event: MessageDelta) -> Key:
    return (event.message_id, event.attempt, event.delta.kind)


def cut(event: MessageDelta, start: int) -> MessageDelta:
    """``event`` with its text from character ``start`` on."""
    return event.model_copy(update={"delta": event.delta.model_copy(update={"text": event.delta.text[start:]})})


@dataclass
class LiveView:
    """What one subscriber was shown of each message's text: decides what it
    is shown of the next live or history event."""

    shown: dict[Key, int] = field(default_factory=dict)
    resets: set[tuple[str, int]] = field(default_factory=set)
    attempts: dict[str, int] = field(default_factory=dict)
    completed: set[str] = field(default_factory=set)

    def live(self, event: Any, at: int) -> list[Any]:
        """What to show of a live delta (at position ``at``) or reset."""
        if isinstance(event, MessageReset):
            return self._reset(event, live=True)
        mid, attempt = event.message_id, event.attempt
        if mid in self.completed or attempt < self.attempts.get(mid, 1) or \
                (attempt > 1 and (mid, attempt) not in self.resets):
            return []  # late, an attempt replaced, or one whose reset was not shown: the history brings it
        shown = self.shown.get(key(event), 0)
        end = at + len(event.delta.text)
        if at > shown or end <= shown:
            return []  # a gap (a delta dropped on the way), or all shown already
        self.shown[key(event)] = end
        return [event if at == shown else cut(event, shown - at)]

    def history(self, event: Any, at: int | None = None) -> list[Any]:
        """What to show of a history event (``at``: a text delta's position)."""
        if isinstance(event, MessageReset):
            return self._reset(event, live=False)
        if isinstance(event, MessageCompleted):
            self.completed.add(event.message_id)  # a live delta later than this is not shown
        if not isinstance(event, MessageDelta) or event.delta.kind not in LIVE_KINDS or at is None:
            return [event]
        latest = self.attempts.get(event.message_id, 1)
        if event.attempt < latest and (event.message_id, latest) in self.resets:
            return [Seen(event.seq or 0, run_id=event.run_id)]  # an attempt whose reset was shown (live, first)
        self.attempts[event.message_id] = max(event.attempt, self.attempts.get(event.message_id, 1))
        shown = self.shown.get(key(event), 0)
        end = at + len(event.delta.text)
        self.shown[key(event)] = max(shown, end)
        if shown >= end:
            return [Seen(event.seq or 0, run_id=event.run_id)]
        return [event if shown <= at else cut(event, shown - at)]

    def _reset(self, event: MessageReset, *, live: bool) -> list[Any]:
        mark = (event.message_id, event.attempt)
        if mark in self.resets:
            return [] if live else [Seen(event.seq or 0, run_id=event.run_id)]
        self.resets.add(mark)
        self.attempts[event.message_id] = max(event.attempt, self.attempts.get(event.message_id, 1))
        return [event]


@dataclass
class LiveMessage:
    """What reached the gateway live of one message's latest attempt, in
    order (consecutive pieces of one kind joined), for a catch-up."""

    run_id: str
    step: int
    attempt: int
    pieces: list[MessageDelta] = field(default_factory=list)
    lengths: dict[str, int] = field(default_factory=dict)
    completed_seq: int | None = None


class LiveRecord:
    """The live messages of one run, the most recent :data:`KEPT_MESSAGES`."""

    def __init__(self) -> None:
        self.messages: OrderedDict[str, LiveMessage] = OrderedDict()

    def add(self, event: Any, at: int) -> None:
        """Record a live delta or reset (only what extends the text without a gap)."""
        mid = event.message_id
        message = self.messages.get(mid)
        if message is not None and message.completed_seq is not None:
            return  # late: the message is complete
        if message is None or event.attempt > message.attempt:
            if isinstance(event, MessageDelta) and event.attempt > 1 and (message is None or
                                                                          message.attempt < event.attempt):
                return  # an attempt's deltas count only after its reset
            message = self.messages[mid] = LiveMessage(event.run_id, event.step, event.attempt)
            while len(self.messages) > KEPT_MESSAGES:
                self.messages.popitem(last=False)
        if isinstance(event, MessageReset) or event.attempt < message.attempt:
            return
        kind, text = event.delta.kind, event.delta.text
        have = message.lengths.get(kind, 0)
        if at > have or at + len(text) <= have:
            return
        text = text[have - at:]
        message.lengths[kind] = have + len(text)
        last = message.pieces[-1] if message.pieces else None
        if last is not None and last.delta.kind == kind:
            message.pieces[-1] = last.model_copy(update={"delta": last.delta.model_copy(
                update={"text": last.delta.text + text})})
        else:
            message.pieces.append(event.model_copy(update={"delta": event.delta.model_copy(update={"text": text})}))

    def completed(self, event: MessageCompleted) -> None:
        message = self.messages.get(event.message_id)
        if message is not None and message.completed_seq is None:
            message.completed_seq = event.seq

    def unfinished(self, from_offset: int) -> set[str]:
        """The messages a client resuming at ``from_offset`` may have been
        shown live in part: those not completed before that offset."""
        return {mid for mid, m in self.messages.items() if m.completed_seq is None or m.completed_seq >= from_offset}

    def catch_up(self, view: LiveView, mid: str) -> list[Any]:
        """Message ``mid`` for a resuming subscriber: reset (the client drops
        what it was shown of it), then shown again as far as it reached the
        gateway (``view`` records it)."""
        message = self.messages.get(mid)
        if message is None:
            return []
        reset = MessageReset(run_id=message.run_id, step=message.step, time=_time(message),
                             message_id=mid, attempt=message.attempt, reason="reconnected")
        out = view.live(reset, 0)
        for piece in message.pieces:
            out += view.live(piece, view.shown.get(key(piece), 0))
        return out


def _time(message: LiveMessage) -> datetime:
    return message.pieces[0].time if message.pieces else datetime.now(UTC)
