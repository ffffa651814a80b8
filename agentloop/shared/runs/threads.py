"""Threads: a conversation that goes on over many turns (docs/conversations.md).

A thread is one run that stays open between turns (its run id is the thread
id): after a turn it waits for the next message, which costs nothing while it
waits. The models here are what people send a thread (``send``, ``steer``)
and what it answers (``MessageAccepted``, ``SteerAccepted``, ``TurnResult``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentloop.shared.base.errors import UserError
from agentloop.shared.base.usage import Usage
from agentloop.shared.definition.spec import DoubleTexting
from agentloop.shared.runs.report import RunReason

#: Most characters of one message sent to a thread or steering a run.
MAX_MESSAGE_CHARS = 100_000

#: Most messages a thread holds waiting for their turn.
MAX_QUEUED = 100

#: Most characters of a thread id (it is the run's workflow id).
MAX_THREAD_ID_CHARS = 200

#: The update failure type of a message refused by ``reject`` while busy.
THREAD_BUSY_ERROR_TYPE = "ThreadBusy"

#: The update failure type of ``send`` to a run that is not a thread.
NOT_A_THREAD_ERROR_TYPE = "NotAThread"

#: The update failure type of ``steer`` when no turn is running.
NOTHING_TO_STEER_ERROR_TYPE = "NothingToSteer"

#: How an interrupted assistant message ends: what the model reads next time.
INTERRUPTED_MARK = "[interrupted: the user sent a new message]"

#: The result a tool call gets when its turn was interrupted.
INTERRUPTED_TOOL_RESULT = "interrupted: the user sent a new message before this call finished; it did not complete"

TurnStatus = Literal["running", "completed", "failed", "stopped", "interrupted", "rolled_back", "cancelled"]


class ThreadOptions(BaseModel):
    """A run that is a thread (``AgentRunInput.thread``).

    Attributes:
        id: The thread id (also the run id).
        double_texting: What to do with a message that arrives while a turn
            runs, unless the message says; None: the spec's
            (``AgentSpec.double_texting``).
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=MAX_THREAD_ID_CHARS)
    double_texting: DoubleTexting | None = None


class SendMessage(BaseModel):
    """The ``send`` update's payload: the thread's next user message.

    Attributes:
        text: The message.
        strategy: Double-texting strategy for this message; None: the
            thread's (input, then spec).
        by: Who sent it (kept in the event).
    """

    model_config = ConfigDict(extra="forbid")

    text: str = Field(max_length=MAX_MESSAGE_CHARS)
    strategy: DoubleTexting | None = None
    by: str | None = Field(default=None, max_length=200)


class SteerMessage(BaseModel):
    """The ``steer`` update's payload: a user message the model sees before
    its next step, without ending the turn."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(max_length=MAX_MESSAGE_CHARS)
    by: str | None = Field(default=None, max_length=200)


class MessageAccepted(BaseModel):
    """What ``send`` answers.

    Attributes:
        thread_id: The thread.
        turn: The turn that answers the message.
        strategy: The strategy applied (``enqueue`` when the thread was idle).
        offset: The thread's event-stream offset when the message was
            accepted: the turn's events come after it.
    """

    thread_id: str
    turn: int
    strategy: DoubleTexting
    offset: int = 0


class SteerAccepted(BaseModel):
    """What ``steer`` answers: the message waits for the run's next LLM step.

    Attributes:
        run_id: The run.
        turn: The turn it steers (0: a run that is not a thread).
        waiting: Steering messages waiting for the next step, this one included.
    """

    run_id: str
    turn: int = 0
    waiting: int = 1


class QueuedMessage(BaseModel):
    """A message waiting for its turn (carried across continue-as-new)."""

    turn: int
    text: str
    strategy: DoubleTexting = "enqueue"
    by: str | None = None


class TurnResult(BaseModel):
    """One turn of a thread (query ``turn``).

    Attributes:
        turn: Its number, from 1.
        status: ``running``, or how it ended.
        reason: Why it ended (a run reason), once it has.
        final_text: The turn's last assistant text.
        output: A typed turn's answer (``AgentSpec.output``), as JSON.
        error: What went wrong, or why it ended early.
        usage: What its LLM calls used (an interrupted or rolled-back turn's included).
        steps: LLM steps it took.
        first_message: Index in the conversation of its user message.
        end_message: How many messages the conversation had when it ended.
    """

    turn: int
    status: TurnStatus = "running"
    reason: RunReason | None = None
    final_text: str = ""
    output: Any = None
    error: str | None = None
    usage: Usage = Field(default_factory=Usage)
    steps: int = 0
    first_message: int = 0
    end_message: int = 0


class ThreadNotFound(UserError):
    """``send`` to a thread that does not exist, without a spec to start it."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        super().__init__(
            f"thread {thread_id} does not exist; start it with `agentloop run --thread {thread_id} ...` "
            "(or pass a spec to AgentClient.send)"
        )


#: Turn results a thread keeps (the ``turn`` query answers for these).
TURNS_KEPT = 200


class ThreadState(BaseModel):
    """A thread's turns, as its run keeps them (``LoopState.thread``; carried
    across continue-as-new).

    Attributes:
        id: The thread id.
        turn: The turn under way, or the last one.
        busy: A turn is under way.
        next_turn: The number the next accepted message gets.
        queue: Messages waiting for their turn, the next first.
        turns: Recent turns' results, oldest first (the one under way last).
        first_step: Steps finished when the turn under way began.
        usage_at_start: The run's usage when it began.
        offset: The event stream's offset when it began.
    """

    model_config = ConfigDict(extra="ignore")

    id: str
    turn: int = 0
    busy: bool = False
    next_turn: int = 1
    queue: list[QueuedMessage] = Field(default_factory=list)
    turns: list[TurnResult] = Field(default_factory=list)
    first_step: int = 0
    usage_at_start: Usage = Field(default_factory=Usage)
    offset: int = 0

    def result(self, turn: int) -> TurnResult | None:
        """Turn ``turn``'s result (``running`` while under way); None when
        it is unknown, waits in the queue, or is too old to be kept."""
        for result in reversed(self.turns):
            if result.turn == turn:
                return result
        return None


class ThreadBusy(UserError):
    """A message refused because the thread is busy and its strategy is ``reject``."""


class MessageRefused(UserError):
    """A message a thread refused (not a thread, ended, empty...); nothing changed."""
