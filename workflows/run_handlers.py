"""The state of an agent run and the handlers that read and change it.

:class:`RunHandlers` is the base of
:class:`~agentloop.workflows.agent_run.AgentRunWorkflow`: it builds the run's
:class:`~agentloop.shared.runs.state.LoopState` from the workflow's input (or the
carried state), and holds its queries, signals and updates (their checks:
:mod:`~agentloop.workflows.decisions.requests`). Deterministic, like all of
``agentloop.workflows``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.contrib.workflow_streams import WorkflowStream
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from agentloop.shared.base import contracts

    # Pydantic models and pure helpers: no side effects at import, and passing
    # them through keeps one class identity for the data converter.
    from agentloop.shared.definition.approvals import (
        DecisionAccepted,
        PendingWork,
        StopRequest,
        cut_oversize_fields,
        oversize_fields,
    )
    from agentloop.shared.runs.report import LIVE_STATUSES, STEP_UNDER_WAY, AgentRunReport, report_text
    from agentloop.shared.runs.run import AgentRunInput, MessagesResult, RunState, parse_run_input
    from agentloop.shared.runs.snapshots import AgentSnapshot
    from agentloop.shared.runs.state import LoopState
    from agentloop.shared.runs.threads import MessageAccepted, SteerAccepted, TurnResult
    from agentloop.shared.runs.transcripts import ModelContext, TranscriptPage, page
    from agentloop.workflows.decisions import conversation, requests
    from agentloop.workflows.decisions.delegation import waiting_on
    from agentloop.workflows.effects import snapshots
    from agentloop.workflows.effects.recorder import RunRecorder, ms
    from agentloop.workflows.effects.threads import ThreadRunner
    from agentloop.workflows.patches import (
        BOUNDED_SIGNALS_PATCH,
        UNKNOWN_SIGNALS_PATCH,
        Features,
    )


class RunHandlers:
    """The run's state, and its queries, signals and updates."""

    @workflow.init
    def __init__(self, *args: Any) -> None:
        # The arguments arrive raw: input that is not one AgentRunInput (a
        # string, a binary payload, none, two) fails the run once, in `run`,
        # instead of failing workflow tasks forever on a decode error.
        self._run_id = workflow.info().workflow_id
        self._input: AgentRunInput | None = None
        self._input_error: str | None = None
        try:
            self._input = parse_run_input(args)
        except ValueError as exc:
            self._input_error = str(exc)
        carry = self._input.carry if self._input else None
        # The event stream (Temporal Workflow Streams): subscribers poll it by
        # offset; the LLM activity publishes deltas into it.
        self._stream = WorkflowStream(prior_state=carry.stream if carry else None)
        # A carried state is restored here, before any handler runs: a decision
        # delivered in the new run's first activation must find its pending call.
        self._state = carry if carry is not None else self._fresh_state()
        if carry is not None and self._input is not None:
            self._state.resume(self._input.messages)
        self._recorder = RunRecorder(self._stream, self._run_id, self._state)
        self._features = Features()
        self._model_context = ModelContext()
        thread = self._input.thread if self._input else None
        self._threads = (ThreadRunner(self._state, self._recorder, self._stream, self._run_id, thread, self._input.spec)
                         if thread is not None and self._input is not None else None)

    def _fresh_state(self) -> LoopState:
        if self._input is not None and self._input.origin is not None:
            return snapshots.origin_state(self._input, self._run_id, workflow.now())  # restored or forked
        messages = list(self._input.messages) if self._input else []
        report = AgentRunReport(
            id=self._run_id,
            model=self._input.spec.model if self._input else "",
            started_at=workflow.now(),
            user_message=report_text(next((m.text for m in reversed(messages) if m.role == "user"), "")),
        )
        return LoopState(input_count=len(messages), report=report, messages=messages)

    # Queries -----------------------------------------------------------------------

    @workflow.query(name=contracts.STATE_QUERY)
    def state(self) -> RunState:
        """Status, step, tool calls running now, what the run waits for, usage."""
        s, spec = self._state, self._input.spec if self._input else None
        return RunState(
            run_id=self._run_id, status=s.status, step=s.step, reason=s.reason, error=s.error,
            current_step=s.step + 1 if s.status in STEP_UNDER_WAY else None, steps_taken=s.report.step_count,
            running_tool_calls=list(s.running_calls.values()), message_count=len(s.messages), usage=s.usage,
            pending_approvals=list(s.approvals.values()), pending_actions=list(s.actions.values()),
            stop_requested=s.stop is not None, rejected_signals=list(s.rejected_signals),
            agent_name=spec.name if spec else "", model=spec.model if spec else "",
            waiting_on=waiting_on(s.running_subs) if s.running_subs else "",
            thread_id=s.thread.id if s.thread else "", turn=s.thread.turn if s.thread else 0,
            busy=s.thread.busy if s.thread else s.status in LIVE_STATUSES,
            queued=len(s.thread.queue) if s.thread else 0, workspace=spec.workspace if spec else None,
        )

    @workflow.query(name=contracts.MESSAGES_QUERY)
    def messages(self) -> MessagesResult:
        """The conversation so far, input included."""
        return MessagesResult(messages=list(self._state.messages))

    @workflow.query(name=contracts.REPORT_QUERY)
    def report(self) -> AgentRunReport:
        """The run report, complete up to now."""
        report = self._state.report.model_copy()
        if report.completed_at is None:
            report.total_ms = ms(workflow.now() - report.started_at)
        return report

    @workflow.query(name=contracts.EXPORT_QUERY)
    def export(self) -> AgentSnapshot:
        """The run as a versioned snapshot (``agentloop.shared.runs.snapshots``), in one read."""
        if self._input is None:
            raise ApplicationError(f"run {self._run_id} has no valid input to export")
        return snapshots.export_snapshot(self._state, self._input, self._run_id,
                                       [t.name for t in self._model_context.tools], self.report(), workflow.now())

    @workflow.query(name=contracts.TRANSCRIPT_QUERY)
    def transcript(self, *args: Any) -> TranscriptPage:
        """Messages from an offset, with the transcript's hash: how a worker
        fills its cache for an LLM step that names the transcript by reference."""
        return page(self._state.messages, self._state.transcript_hashes(), requests.transcript_range(args))

    @workflow.query(name=contracts.MODEL_CONTEXT_QUERY)
    def model_context(self) -> ModelContext:
        """The system prompt and tools every LLM step of this run uses."""
        return self._model_context

    @workflow.query(name=contracts.PENDING_QUERY)
    def pending(self) -> PendingWork:
        """Calls waiting for an operator's decision or the client's outputs."""
        return PendingWork(approvals=list(self._state.approvals.values()), actions=list(self._state.actions.values()))

    # Signals and updates (checks: agentloop.workflows.decisions.requests) ---------------------
    #
    # Each decision arrives as a signal (fire and forget: what ops tools and
    # `temporal workflow signal` send) or as an update of the same name, whose
    # validator refuses bad input before it reaches history. A replayed update
    # was accepted by the validator of its day: its handler checks the run's
    # state again, not the request's size.

    @workflow.signal(name=contracts.APPROVE)
    def approve_signal(self, *args: Any) -> None:
        """Decide a pending call: approve, deny, skip, or approve with a result."""
        try:
            payload = self._signal_payload("approve", args)
            self._state.decide(requests.check_decision(payload, self._state, self._run_id))
        except ValueError as exc:
            self._note(f"approve signal ignored: {exc}")

    @workflow.update(name=contracts.APPROVE)
    def approve_update(self, *args: Any) -> DecisionAccepted:
        """Like the ``approve`` signal, but answers, and refuses bad input."""
        decision = requests.as_update_error(
            lambda: requests.check_decision(requests.one_payload("approve", args), self._state, self._run_id))
        self._state.decide(decision)
        return DecisionAccepted(call_ids=[decision.call_id], still_pending=self._state.still_pending())

    @approve_update.validator
    def _validate_approve(self, *args: Any) -> None:
        requests.as_update_error(
            lambda: requests.check_decision(requests.update_payload("approve", args), self._state, self._run_id))

    @workflow.signal(name=contracts.SUBMIT_TOOL_OUTPUTS)
    def submit_signal(self, *args: Any) -> None:
        """Outputs of the calls the client ran (``requires_action``)."""
        try:
            payload = self._signal_payload("submit_tool_outputs", args)
            self._state.take_outputs(requests.check_outputs(payload, self._state, self._run_id))
        except ValueError as exc:
            self._note(f"submit_tool_outputs signal ignored: {exc}")

    @workflow.update(name=contracts.SUBMIT_TOOL_OUTPUTS)
    def submit_update(self, *args: Any) -> DecisionAccepted:
        """Like the ``submit_tool_outputs`` signal, but answers, and refuses bad input."""
        submission = requests.as_update_error(lambda: requests.check_outputs(
            requests.one_payload("submit_tool_outputs", args), self._state, self._run_id))
        self._state.take_outputs(submission)
        ids = [o.call_id for o in submission.tool_outputs]
        return DecisionAccepted(call_ids=ids, still_pending=self._state.still_pending())

    @submit_update.validator
    def _validate_submit(self, *args: Any) -> None:
        requests.as_update_error(lambda: requests.check_outputs(
            requests.update_payload("submit_tool_outputs", args), self._state, self._run_id))

    @workflow.signal(name=contracts.STOP_SIGNAL)
    def stop_signal(self, *args: Any) -> None:
        """End the run ``stopped`` once the current step is done."""
        try:
            request = requests.parse_stop(self._signal_payload("stop", args))
        except ValueError as exc:
            self._note(f"stop signal ignored: {exc}")
            request = StopRequest()
        self._state.request_stop(request)

    @workflow.signal(dynamic=True)
    def unknown_signal(self, name: str, args: Sequence[RawValue]) -> None:
        """A signal of a name the run does not know: noted, never dropped
        without a trace (runs started before the patch marker left none)."""
        if workflow.patched(UNKNOWN_SIGNALS_PATCH):
            self._note(requests.unknown_signal(name))

    # Threads: send and steer (decisions: agentloop.workflows.decisions.conversation) ------------

    @workflow.signal(name=contracts.SEND)
    def send_signal(self, *args: Any) -> None:
        """A thread's next message (see the ``send`` update)."""
        try:
            self._accept(self._decide_send(args))
        except ValueError as exc:
            self._note(f"send signal ignored: {exc}")

    @workflow.update(name=contracts.SEND)
    def send_update(self, *args: Any) -> MessageAccepted:
        """A thread's next message, handled by its double-texting strategy;
        answers the turn that will answer it. Refused (before it reaches
        history) when the run is not a thread, or by ``reject`` while busy."""
        return self._accept(requests.as_update_error(lambda: self._decide_send(args)))

    @send_update.validator
    def _validate_send(self, *args: Any) -> None:
        requests.as_update_error(lambda: self._decide_send(args))

    def _decide_send(self, args: tuple[Any, ...]) -> conversation.MessageDecision:
        message = conversation.parse_send(conversation.one_payload("send", args))
        s = self._state
        # A stop ends the turn under way; only a stop while the thread waits ends the thread.
        idle_stop = s.stop is not None and s.thread is not None and not s.thread.busy
        ended = s.status in ("completed", "failed", "cancelled", "stopped") or idle_stop
        facts = self._threads.facts(ended=ended) if self._threads is not None else \
            conversation.ThreadFacts(run_id=self._run_id, thread_id="", busy=False, queued=0, next_turn=1)
        return conversation.decide_message(message, facts)

    def _accept(self, decision: conversation.MessageDecision) -> MessageAccepted:
        assert self._threads is not None  # decide_message refuses runs that are not threads
        return self._threads.accept(decision)

    @workflow.signal(name=contracts.STEER)
    def steer_signal(self, *args: Any) -> None:
        """A user message for the run's next LLM step (see the ``steer`` update)."""
        try:
            self._steer(self._decide_steer(args))
        except ValueError as exc:
            self._note(f"steer signal ignored: {exc}")

    @workflow.update(name=contracts.STEER)
    def steer_update(self, *args: Any) -> SteerAccepted:
        """A user message the model sees before its next LLM step, after the
        results of the step under way; the turn goes on."""
        return self._steer(requests.as_update_error(lambda: self._decide_steer(args)))

    @steer_update.validator
    def _validate_steer(self, *args: Any) -> None:
        requests.as_update_error(lambda: self._decide_steer(args))

    def _decide_steer(self, args: tuple[Any, ...]) -> Any:
        s = self._state
        running = (s.status in LIVE_STATUSES and
                   (s.thread.busy if s.thread is not None else True))
        return conversation.decide_steer(conversation.parse_steer(conversation.one_payload("steer", args)),
                                         run_id=self._run_id, running=running, is_thread=s.thread is not None)

    def _steer(self, message: Any) -> SteerAccepted:
        self._state.steering = [*self._state.steering, message.text]
        turn = self._state.thread.turn if self._state.thread is not None else 0
        return SteerAccepted(run_id=self._run_id, turn=turn, waiting=len(self._state.steering))

    @workflow.query(name=contracts.TURN_QUERY)
    def turn(self, *args: Any) -> TurnResult | None:
        """Turn ``n`` of a thread (the argument): running, or how it ended;
        None when it has not begun (or the run is not a thread)."""
        thread = self._state.thread
        n = args[0] if args else (thread.turn if thread else 0)
        if thread is None or not isinstance(n, int):
            return None
        return thread.result(n)

    def _signal_payload(self, name: str, args: tuple[Any, ...]) -> Any:
        """A signal's one payload, its free text cut to the limits (each cut noted)."""
        payload = requests.one_payload(name, args)
        # A stop is taken whatever its reason, so cutting it changes no
        # command; approve and submit_tool_outputs signals with oversize text
        # were ignored before, and still are in runs that started then.
        if oversize_fields(name, payload) and (name == "stop" or workflow.patched(BOUNDED_SIGNALS_PATCH)):
            payload, notes = cut_oversize_fields(name, payload)
            for note in notes:
                self._note(note)
        return payload

    def _note(self, text: str) -> None:
        """Say in the ``state`` query's ``rejected_signals`` what became of a signal."""
        workflow.logger.warning(text)
        self._state.note(text)
