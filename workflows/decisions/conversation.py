"""Threads, decided: what a message sent to a thread does, what steering
does, and how a turn that is cut short leaves the conversation.

Pure functions over plain values (no Temporal); the runner
(:mod:`agentloop.workflows.effects.threads`) matches on their answers, which
are small tagged unions, and does the waiting and cancelling.
docs/conversations.md describes the behaviour; tests/unit/workflows/test_threads.py
tests the decisions without a server.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from agentloop.shared.base.errors import INVALID_REQUEST_ERROR_TYPE, describe_validation_error
from agentloop.shared.base.messages import ContentPart, Message, TextPart, ToolResultPart
from agentloop.shared.definition.spec import DoubleTexting
from agentloop.shared.runs.events import MessageDelta, MessageReset
from agentloop.shared.runs.threads import (
    INTERRUPTED_MARK,
    INTERRUPTED_TOOL_RESULT,
    MAX_QUEUED,
    NOT_A_THREAD_ERROR_TYPE,
    NOTHING_TO_STEER_ERROR_TYPE,
    THREAD_BUSY_ERROR_TYPE,
    QueuedMessage,
    SendMessage,
    SteerMessage,
)

SEND_EXAMPLE = '{"text": "and in French?", "strategy": "enqueue"}'
STEER_EXAMPLE = '{"text": "use the v2 API instead"}'


class Refused(ValueError):
    """Why a ``send`` or ``steer`` was refused; ``error_type`` names the kind
    (the update's failure type)."""

    def __init__(self, message: str, error_type: str = INVALID_REQUEST_ERROR_TYPE) -> None:
        super().__init__(message)
        self.error_type = error_type


@dataclass(frozen=True)
class ThreadFacts:
    """What a decision about a message needs to know of the run.

    Attributes:
        run_id: The run (thread) id.
        thread_id: The thread id; empty for a run that is not a thread.
        busy: A turn is running.
        queued: Messages waiting for their turn.
        next_turn: The number the next accepted message's turn gets.
        turn: The turn under way, or the last one.
        default_strategy: The thread's strategy (input, else spec).
        ended: The run has ended (or is ending): it takes no message.
    """

    run_id: str
    thread_id: str
    busy: bool
    queued: int
    next_turn: int
    turn: int = 0
    default_strategy: DoubleTexting = "enqueue"
    ended: bool = False


# What a message does ---------------------------------------------------------------


@dataclass(frozen=True)
class StartTurn:
    """The thread is idle: the message starts the next turn."""

    message: QueuedMessage


@dataclass(frozen=True)
class Enqueue:
    """The thread is busy: the message waits for the turns before it."""

    message: QueuedMessage


@dataclass(frozen=True)
class Interrupt:
    """Cancel the step under way (its partial text kept, marked), end the
    turn ``interrupted``, and answer the message next."""

    message: QueuedMessage


@dataclass(frozen=True)
class Rollback:
    """Cancel the turn under way, discard its messages (its user message
    included), and answer the message in its place."""

    message: QueuedMessage


MessageDecision = StartTurn | Enqueue | Interrupt | Rollback


def parse_send(payload: Any) -> SendMessage:
    """A ``send`` payload: a JSON object, or a bare string (the text)."""
    if isinstance(payload, str):
        payload = {"text": payload}
    if isinstance(payload, SendMessage):
        return payload
    try:
        return SendMessage.model_validate(payload)
    except ValidationError as exc:
        problem = describe_validation_error(exc)
        raise Refused(f"malformed send payload: {problem}; expected e.g. {SEND_EXAMPLE}") from None


def parse_steer(payload: Any) -> SteerMessage:
    """A ``steer`` payload: a JSON object, or a bare string (the text)."""
    if isinstance(payload, str):
        payload = {"text": payload}
    if isinstance(payload, SteerMessage):
        return payload
    try:
        return SteerMessage.model_validate(payload)
    except ValidationError as exc:
        problem = describe_validation_error(exc)
        raise Refused(f"malformed steer payload: {problem}; expected e.g. {STEER_EXAMPLE}") from None


def decide_message(message: SendMessage, facts: ThreadFacts) -> MessageDecision:
    """What a message sent to a thread does (or why it is refused).

    Raises:
        Refused: Not a thread, an ended thread, empty text, a full queue, or
            ``reject`` while busy (``ThreadBusy``).
    """
    if not facts.thread_id:
        raise Refused(f"run {facts.run_id} is not a thread: start one with `agentloop run --thread ID`",
                      NOT_A_THREAD_ERROR_TYPE)
    if facts.ended:
        raise Refused(f"thread {facts.thread_id} has ended; it takes no more messages")
    if not message.text.strip():
        raise Refused("the message is empty: say something")
    strategy = message.strategy or facts.default_strategy
    busy = facts.busy or facts.queued > 0
    if busy and strategy == "reject":
        raise Refused(f"thread {facts.thread_id} is busy (turn {facts.turn} is under way"
                      f"{f', {facts.queued} more waiting' if facts.queued else ''}) and rejects messages meanwhile "
                      "(strategy reject): send it again once the turn has ended, or choose another strategy",
                      THREAD_BUSY_ERROR_TYPE)
    if facts.queued >= MAX_QUEUED:
        raise Refused(f"thread {facts.thread_id} already holds {facts.queued} messages waiting for their turn; "
                      "wait for it to catch up")
    if not busy:
        return StartTurn(QueuedMessage(turn=facts.next_turn, text=message.text, by=message.by))
    if not facts.busy and strategy in ("interrupt", "rollback"):
        strategy = "enqueue"  # nothing runs to cut: messages wait in order
    queued = QueuedMessage(turn=facts.next_turn, text=message.text, by=message.by,
                           strategy="enqueue" if strategy == "reject" else strategy)
    match strategy:
        case "interrupt":
            return Interrupt(queued)
        case "rollback":
            return Rollback(queued)
        case _:
            return Enqueue(queued)


def queue_with(queue: Sequence[QueuedMessage], decision: MessageDecision) -> list[QueuedMessage]:
    """The queue once the message is in: an interrupting or rolling-back
    message is answered next, ahead of messages already waiting."""
    if isinstance(decision, (Interrupt, Rollback)):
        return [decision.message, *queue]
    return [*queue, decision.message]


def cut_requested(queue: Sequence[QueuedMessage]) -> DoubleTexting | None:
    """The turn under way must be cut short: the message answered next asks
    to interrupt or roll back."""
    if queue and queue[0].strategy in ("interrupt", "rollback"):
        return queue[0].strategy
    return None


# Steering --------------------------------------------------------------------------------


def decide_steer(message: SteerMessage, *, run_id: str, running: bool, is_thread: bool) -> SteerMessage:
    """A steering message the run takes (it joins the conversation before
    the next LLM step).

    Raises:
        Refused: Empty text, or no turn is running (``NothingToSteer``).
    """
    if not message.text.strip():
        raise Refused("the steering message is empty: say what the agent should do differently")
    if not running:
        hint = f"use `agentloop send {run_id} ...` for the next turn" if is_thread else "the run has ended"
        raise Refused(f"nothing to steer: run {run_id} is not running a turn; {hint}", NOTHING_TO_STEER_ERROR_TYPE)
    return message


def steering_messages(texts: Sequence[str]) -> list[Message]:
    """The user messages steering adds, in the order they arrived."""
    return [Message.user(t) for t in texts]


# A turn cut short -----------------------------------------------------------------------------


def partial_text(events: Sequence[Any], message_id: str) -> str:
    """The text a step's assistant message streamed so far: the text deltas
    of its latest attempt (a reset drops the earlier attempts')."""
    text: list[str] = []
    for event in events:
        if isinstance(event, MessageReset) and event.message_id == message_id:
            text = []
        elif isinstance(event, MessageDelta) and event.message_id == message_id and event.delta.kind == "text":
            text.append(event.delta.text or "")
    return "".join(text)


def interrupted_tail(messages: Sequence[Message], partial: str) -> list[Message]:
    """What closes an interrupted turn so the conversation stays well formed:
    the partial text as an assistant message marked interrupted (when the
    LLM step was under way), and an "interrupted" result for every tool call
    of the last assistant message that has none (when tools were)."""
    last = messages[-1] if messages else None
    if last is not None and last.role == "assistant" and last.tool_calls:
        answered = {r.id for m in messages[-1:] for r in m.tool_results}
        results: list[ContentPart] = [
            ToolResultPart(id=c.id, name=c.name, content=INTERRUPTED_TOOL_RESULT, is_error=True)
            for c in last.tool_calls if c.id not in answered]
        return [Message(role="tool", content=results)] if results else []
    text = f"{partial} {INTERRUPTED_MARK}" if partial.strip() else INTERRUPTED_MARK
    return [Message(role="assistant", content=[TextPart(text=text)])]


def rolled_back(messages: Sequence[Message], first_message: int) -> list[Message]:
    """The conversation without the turn that began at ``first_message``."""
    return list(messages[:max(0, first_message)])


def one_payload(name: str, args: tuple[Any, ...]) -> Any:
    """A ``send`` or ``steer`` request's one argument."""
    if len(args) != 1:
        example = SEND_EXAMPLE if name == "send" else STEER_EXAMPLE
        raise Refused(f"{name} takes one JSON object, not {len(args)} inputs; expected e.g. {example}")
    return args[0]

