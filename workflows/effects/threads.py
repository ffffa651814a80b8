"""A thread's turns on Temporal: one run that stays open between turns.

After a turn the run waits (``workflow.wait_condition``, no timer: idle
costs nothing) for the next message; a message that arrives during a turn
waits in the queue, or cuts the turn short (``interrupt``, ``rollback``), as
the decisions of :mod:`agentloop.workflows.decisions.conversation` decide. A
turn runs as a task of the workflow, so cutting it short is cancelling that
task: its LLM call or tools are cancelled like a cancelled run's, and the
thread goes on.

Deterministic, like all of ``agentloop.workflows``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.contrib.workflow_streams import WorkflowStream

from agentloop.shared.base.messages import Message
from agentloop.shared.runs.events import MessageDelta, MessageReset
from agentloop.shared.runs.threads import QueuedMessage

with workflow.unsafe.imports_passed_through():
    # Pydantic models and pure helpers (see agent_run.py).
    from agentloop.shared.base.messages import Message
    from agentloop.shared.definition.spec import AgentSpec
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
    from agentloop.shared.runs.report import report_text
    from agentloop.shared.runs.search_attributes import AGENT_THREAD
    from agentloop.shared.runs.state import LoopState
    from agentloop.shared.runs.threads import (
        TURNS_KEPT,
        MessageAccepted,
        QueuedMessage,
        ThreadOptions,
        ThreadState,
        TurnResult,
    )
    from agentloop.workflows.decisions.conversation import (
        MessageDecision,
        ThreadFacts,
        cut_requested,
        interrupted_tail,
        partial_text,
        queue_with,
        rolled_back,
        steering_messages,
    )
    from agentloop.workflows.decisions.next_step import FailRun, FinalAnswer, Stopped
    from agentloop.workflows.decisions.tool_messages import max_steps_message
    from agentloop.workflows.effects.recorder import RunRecorder


#: How one turn's steps end (what ``AgentRunWorkflow._steps`` returns).
TurnEnd = FinalAnswer | Stopped | FailRun

#: Runs one turn's steps with the spec it is given.
Steps = Callable[[AgentSpec], Coroutine[Any, Any, TurnEnd]]


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
        message still queued (``agentloop.workflows.effects.upgrade``)."""
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
                reason = state.stop.reason if state.stop else None
                result.error = f"stopped: {reason}" if reason else "stopped by request"
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

