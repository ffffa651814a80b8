"""Threads, decided: what a message sent to a thread does, what steering
does, and how a turn that is cut short leaves the conversation.

The decisions are pure functions over plain values (no Temporal); the
runner below matches on their answers, which are small tagged unions, and
does the waiting and cancelling. docs/conversations.md describes the
behaviour; tests/unit/test_threads.py tests the decisions without a server.

A thread's turns on Temporal: one run that stays open between turns.

After a turn the run waits (``workflow.wait_condition``, no timer: idle
costs nothing) for the next message; a message that arrives during a turn
waits in the queue, or cuts the turn short (``interrupt``, ``rollback``), as
the decisions above decide. A turn runs as a task of
the workflow, so cutting it short is cancelling that task: its LLM call or
tools are cancelled like a cancelled run's, and the thread goes on.

Deterministic, like all of ``agentloop.workflows``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Union

from pydantic import ValidationError
from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.contrib.workflow_streams import WorkflowStream

from agentloop.shared.base.errors import INVALID_REQUEST_ERROR_TYPE, describe_validation_error
from agentloop.shared.runs.events import MessageDelta, MessageReset
from agentloop.shared.base.messages import Message, TextPart, ToolResultPart
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
from agentloop.shared.definition.spec import DoubleTexting

with workflow.unsafe.imports_passed_through():
    # Pydantic models and pure helpers (see agent_run.py).
    from agentloop.shared.runs.events import (
        EVENT_ADAPTER,
        EVENTS_TOPIC,
        MessageDelta,
        MessageReset,
        RunSteered,
        ThreadMessageReceived,
        TurnEnded,
        TurnInterrupted,
        TurnRolledBack,
        TurnStarted,
        message_id,
    )
    from agentloop.shared.base.messages import Message
    from agentloop.shared.runs.report import report_text
    from agentloop.shared.runs.search_attributes import AGENT_THREAD
    from agentloop.shared.definition.spec import AgentSpec
    from agentloop.shared.runs.state import LoopState
    from agentloop.shared.runs.threads import (
        TURNS_KEPT,
        MessageAccepted,
        QueuedMessage,
        ThreadOptions,
        ThreadState,
        TurnResult,
    )
    from agentloop.workflows.loop_logic import FailRun, FinalAnswer, Stopped, max_steps_message
    from agentloop.workflows.recorder import RunRecorder

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


MessageDecision = Union[StartTurn, Enqueue, Interrupt, Rollback]


def parse_send(payload: Any) -> SendMessage:
    """A ``send`` payload: a JSON object, or a bare string (the text)."""
    if isinstance(payload, str):
        payload = {"text": payload}
    if isinstance(payload, SendMessage):
        return payload
    try:
        return SendMessage.model_validate(payload)
    except ValidationError as exc:
        raise Refused(f"malformed send payload: {describe_validation_error(exc)}; expected e.g. {SEND_EXAMPLE}") from None


def parse_steer(payload: Any) -> SteerMessage:
    """A ``steer`` payload: a JSON object, or a bare string (the text)."""
    if isinstance(payload, str):
        payload = {"text": payload}
    if isinstance(payload, SteerMessage):
        return payload
    try:
        return SteerMessage.model_validate(payload)
    except ValidationError as exc:
        raise Refused(f"malformed steer payload: {describe_validation_error(exc)}; expected e.g. {STEER_EXAMPLE}") from None


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
        results = [ToolResultPart(id=c.id, name=c.name, content=INTERRUPTED_TOOL_RESULT, is_error=True)
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


#: How one turn's steps end (what ``AgentRunWorkflow._steps`` returns).
TurnEnd = Union[FinalAnswer, Stopped, FailRun]

#: Runs one turn's steps with the spec it is given.
Steps = Callable[[AgentSpec], Awaitable[TurnEnd]]


class ThreadRunner:
    """The turns of a thread's run.

    Args:
        state: The run's state (``state.thread`` is set here when missing).
        recorder: For the turn events and the status.
        stream: The run's event stream (partial text of an interrupted step).
        run_id: The run (thread) id.
        options: The run's thread options.
        spec: The agent.
    """

    def __init__(self, state: LoopState, recorder: RunRecorder, stream: WorkflowStream, run_id: str,
                 options: ThreadOptions, spec: AgentSpec) -> None:
        self.state, self.recorder, self.stream, self.run_id = state, recorder, stream, run_id
        self.options, self.spec = options, spec
        if state.thread is None:
            # Busy from the start: the first turn answers the run's input.
            state.thread = ThreadState(id=options.id, busy=True, next_turn=2)

    @property
    def thread(self) -> ThreadState:
        assert self.state.thread is not None
        return self.state.thread

    # Messages ---------------------------------------------------------------------------

    def facts(self, ended: bool = False) -> ThreadFacts:
        t = self.thread
        return ThreadFacts(run_id=self.run_id, thread_id=t.id, busy=t.busy, queued=len(t.queue),
                           next_turn=t.next_turn, turn=t.turn,
                           default_strategy=self.options.double_texting or self.spec.double_texting, ended=ended)

    def accept(self, decision: MessageDecision) -> MessageAccepted:
        """Take a message the validator let in: it waits for its turn."""
        t, message = self.thread, decision.message
        t.queue = queue_with(t.queue, decision)
        t.next_turn = max(t.next_turn, message.turn + 1)
        offset = self.stream._on_offset()
        self.recorder.emit(ThreadMessageReceived, turn=message.turn, strategy=message.strategy,
                           text=message.text, by=message.by)
        return MessageAccepted(thread_id=t.id, turn=message.turn, strategy=message.strategy, offset=offset)

    def index_thread(self) -> None:
        """Set the ``AgentThread`` search attribute when the run lacks it
        (a run started by the client has it; continue-as-new carries it)."""
        if workflow.info().typed_search_attributes.get(AGENT_THREAD) != self.thread.id:
            workflow.upsert_search_attributes([AGENT_THREAD.value_set(self.thread.id)])

    # The turns ----------------------------------------------------------------------------

    async def run(self, steps: Steps, ended: Callable[[], Any], hand_over: Callable[[], Awaitable[None]],
                  upgrade: Callable[[], Awaitable[None]] | None = None) -> Any:
        """Turn after turn until a stop while idle (``ended()``'s result) or
        a cancel; the first turn answers the run's input. ``upgrade`` runs
        when a message is about to begin its turn after the thread waited:
        it may continue the run as new on another worker version, the
        message still queued (``agentloop.workflows.upgrade``)."""
        t = self.thread
        if t.turn == 0:
            self._begin(QueuedMessage(turn=1, text=""), from_input=True)
        while True:
            if not t.busy:
                await hand_over()
                await workflow.wait_condition(lambda: bool(t.queue) or self.state.stop is not None)
                if not t.queue:
                    return ended()
                if upgrade is not None:
                    await upgrade()
                self._begin(t.queue.pop(0))
            self._end(await self._run_turn(steps))

    async def _run_turn(self, steps: Steps) -> TurnEnd | str:
        """The turn's steps, as a task; cut short when a message asks (then
        the strategy that cut it)."""
        spec = self.spec.model_copy(update={"max_steps": self.spec.max_steps + self.thread.first_step})
        task = asyncio.create_task(steps(spec))
        try:
            await workflow.wait_condition(lambda: task.done() or cut_requested(self.thread.queue) is not None)
        except asyncio.CancelledError:  # the run is cancelled: so is the turn
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise
        if task.done():
            return task.result()
        strategy = cut_requested(self.thread.queue)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return strategy or "interrupt"

    def _begin(self, message: QueuedMessage, *, from_input: bool = False) -> None:
        state, t = self.state, self.thread
        if from_input:
            first = max((i for i, m in enumerate(state.messages) if m.role == "user"), default=0)
        else:
            first = len(state.messages)
            state.messages.append(Message.user(message.text))
        t.turn, t.busy = message.turn, True
        t.first_step, t.usage_at_start, t.offset = state.step, state.usage, self.stream._on_offset()
        t.turns = [*t.turns, TurnResult(turn=message.turn, first_message=first)][-TURNS_KEPT:]
        state.continuations = state.failed_tool_steps = 0
        state.verified = False
        state.output_tries = 0
        state.report.final_text, state.report.output = "", None
        state.report.user_message = report_text(state.messages[first].text) if state.messages else ""
        self.recorder.emit(TurnStarted, turn=message.turn)
        self.recorder.index()

    def _end(self, end: TurnEnd | str) -> None:
        state, t = self.state, self.thread
        result = t.result(t.turn) or TurnResult(turn=t.turn)
        match end:
            case FinalAnswer():
                result.status, result.reason = "completed", "done"
            case Stopped():
                result.status, result.reason = "stopped", "stopped"
                result.error = f"stopped: {state.stop.reason}" if state.stop and state.stop.reason else "stopped by request"
            case FailRun(reason, message):
                result.status, result.reason = "failed", reason
                result.error = max_steps_message(self.spec) if reason == "max_steps" else message
            case "rollback":
                self._roll_back(result)
            case _:
                self._interrupt(result)
        self._close_pending()
        state.stop = None  # a stop is for the turn under way, however that turn ended
        if state.report.steps and state.report.steps[-1].index >= state.step:
            # The turn's last step began but was not counted (a final answer
            # ends a plain run there): count it, so the next turn's steps get
            # their own numbers (message ids, the transcript by reference).
            state.advance()
        result.final_text = state.report.final_text if result.status != "rolled_back" else ""
        result.output = state.report.output if result.status == "completed" else None
        result.usage = state.usage - t.usage_at_start
        result.steps = state.step - t.first_step
        result.end_message = len(state.messages)
        t.busy = False
        self.recorder.emit(TurnEnded, turn=result.turn, status=result.status, reason=result.reason,
                           final_text=result.final_text, output=result.output, error=result.error, usage=result.usage)
        self.recorder.index()

    def _interrupt(self, result: TurnResult) -> None:
        state, t = self.state, self.thread
        by = t.queue[0].turn if t.queue else 0
        events = self._events_since(t.offset)
        partial = partial_text(events, message_id(self.run_id, state.step))
        tail = interrupted_tail(state.messages[result.first_message:], partial)
        state.messages.extend(tail)
        result.status, result.reason = "interrupted", "stopped"
        result.error = f"interrupted by the message of turn {by}"
        if tail and tail[-1].role == "assistant":
            state.report.final_text = tail[-1].text
        self.recorder.emit(TurnInterrupted, turn=result.turn, by_turn=by, partial_text=partial)

    def _roll_back(self, result: TurnResult) -> None:
        state, t = self.state, self.thread
        by = t.queue[0].turn if t.queue else 0
        discarded = len(state.messages) - result.first_message
        state.replace_messages(rolled_back(state.messages, result.first_message))
        result.status, result.reason = "rolled_back", "stopped"
        result.error = f"rolled back for the message of turn {by}"
        self.recorder.emit(TurnRolledBack, turn=result.turn, by_turn=by, discarded=discarded)

    def _close_pending(self) -> None:
        """Nothing of a turn that ended waits for people any more."""
        state = self.state
        state.approvals.clear()
        state.actions.clear()
        state.running_calls.clear()
        state.pending_step = None
        state.steering = []

    def _events_since(self, offset: int) -> list[Any]:
        """The stream's deltas and resets published since ``offset`` (the
        turn's start), decoded."""
        converter = workflow.payload_converter()
        base = self.stream._on_offset() - len(self.stream._log)
        events = []
        for item in self.stream._log[max(0, offset - base):]:
            if item.topic != EVENTS_TOPIC or not isinstance(item.data, Payload):
                continue
            value = converter.from_payload(item.data)
            if isinstance(value, dict) and value.get("type") in ("thread.message.delta", "thread.message.reset"):
                events.append(EVENT_ADAPTER.validate_python(value))
        return [e for e in events if isinstance(e, (MessageDelta, MessageReset))]


def apply_steering(state: LoopState, recorder: RunRecorder) -> None:
    """Steering messages that arrived join the conversation (before the next
    LLM step), in order, and are announced."""
    if not state.steering:
        return
    texts, state.steering = state.steering, []
    state.messages.extend(steering_messages(texts))
    recorder.emit(RunSteered, texts=texts, turn=state.thread.turn if state.thread else 0)

