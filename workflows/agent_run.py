"""AgentRunWorkflow: one agent run, durable.

Each LLM step and each tool call is an activity; Temporal's event history is
the checkpoint, so a run survives worker crashes and restarts. The run is an
interpreter over one :class:`~agentloop.shared.runs.state.LoopState`: the pure
functions of :mod:`~agentloop.workflows.loop_logic` decide, this class
matches on their answers and does the I/O (activities, waits, continue-as-new),
and a :class:`~agentloop.workflows.recorder.RunRecorder` publishes what
happened. Deterministic: no I/O, clocks or randomness, only ``workflow.now()``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.contrib.workflow_streams import WorkflowStream
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from agentloop.shared.base import contracts
    # Pydantic models and pure helpers: no side effects at import, and passing
    # them through keeps one class identity for the data converter.
    from agentloop.shared.definition.activity_io import (
        CallModelResult,
        ModelResponse,
        ResolveToolsInput,
        ResolveToolsResult,
        ToolDefinition,
    )
    from agentloop.shared.definition.approvals import (
        MAX_REASON_CHARS,
        DecisionAccepted,
        PendingWork,
        StopRequest,
        ToolGate,
        cut_oversize_fields,
        cut_text,
        oversize_fields,
    )
    from agentloop.workflows.sandbox import workflow_sandbox_from_env
    from agentloop.shared.definition.context_window import make_anchor
    from agentloop.shared.definition.context_providers import agents_md_layer
    from agentloop.shared.base.errors import (
        INVALID_INPUT_ERROR_TYPE,
        MODEL_CONTEXT_LENGTH_ERROR_TYPE,
        RUN_FAILED_ERROR_TYPE,
        TOOL_DEFINITION_ERROR_TYPE,
    )
    from agentloop.shared.definition.guardrails import GuardrailStage, messages_to_check
    from agentloop.shared.base.hooks import missing_hooks_message
    from agentloop.shared.base.model_settings import tool_choice_problem
    from agentloop.shared.runs.events import (
        ApprovalRequested,
        MessageCompleted,
        MessageCreated,
        RequiresAction,
        RunCreated,
        RunFailed,
        ToolCallCompletedByLLM,
        message_id,
    )
    from agentloop.shared.base.messages import Message
    from agentloop.shared.definition.fingerprint import DefinitionChange, agent_definition, definition_change
    from agentloop.shared.runs.report import (
        LIVE_STATUSES,
        STEP_UNDER_WAY,
        AgentRunReport,
        RunReason,
        StepReport,
        report_text,
    )
    from agentloop.shared.runs.run import AgentRunInput, MessagesResult, RunState, parse_run_input
    from agentloop.shared.runs.result import AgentRunResult
    from agentloop.shared.definition.spec import AgentSpec
    from agentloop.shared.runs.transcripts import ModelContext, TranscriptPage, context_hash, page
    from agentloop.workflows import activity_calls as calls
    from agentloop.workflows import requests
    from agentloop.workflows.handover import Handover
    from agentloop.workflows.loop_logic import (
        Continue,
        FailRun,
        FinalAnswer,
        NextStep,
        OverBudget,
        RequireAction,
        RunTools,
        Stopped,
        Verify,
        check_run_budget,
        count_failed_steps,
        decide_after_tools,
        decide_next_step,
        gate_calls,
        missing_tools_message,
    )
    from agentloop.workflows.output_logic import RetryOutput, TypedAnswer, decide_output, final_result_tool, output_mode
    from agentloop.workflows.recorder import RunRecorder, ms
    from agentloop.shared.runs.snapshots import AgentSnapshot, restores_completed
    from agentloop.workflows import snapshots
    from agentloop.shared.runs.state import LoopState, PendingStep
    from agentloop.workflows.delegation import sub_agent_tools, waiting_on
    from agentloop.workflows.guardrails import GuardrailRunner
    from agentloop.workflows.context import ContextKeeper, RunContext, system_prompt_with, wants_context
    from agentloop.workflows.sub_agents import SubAgentRunner
    from agentloop.workflows.tool_calls import StepGates, ToolRunner
    from agentloop.workflows.versions import (
        BOUNDED_SIGNALS_PATCH,
        RESTORED_COMPLETED_PATCH,
        TYPED_OUTPUT_PATCH,
        UNKNOWN_SIGNALS_PATCH,
        Features,
    )
    from agentloop.shared.runs.threads import MessageAccepted, SteerAccepted, TurnResult
    from agentloop.workflows import threads
    from agentloop.workflows.threads import ThreadRunner, apply_steering

def definition_of(spec: AgentSpec, origin: Any) -> tuple[str, DefinitionChange | None]:
    """The run's fingerprint, and (a run from a snapshot) how its definition
    differs from the snapshot's. Pure: no commands."""
    definition = agent_definition(spec)
    before = origin.definition if origin is not None else None
    return definition.fingerprint, definition_change(before, definition) if before is not None else None


@dataclass(frozen=True)
class ContextTooLong:
    """The provider refused the step's request as longer than the model's window."""

    message: str


# Deterministic by construction and checked under the sandbox by the test
# suite; run without it unless AGENTLOOP_WORKFLOW_SANDBOX says otherwise.
# Pinned on a versioned worker by the worker's default (agentloop.workers.worker.deployment_config):
# a behaviour named here would be refused by unversioned workers' servers.
@workflow.defn(name=contracts.WORKFLOW_NAME, sandboxed=workflow_sandbox_from_env())
class AgentRunWorkflow:
    """The agent loop: step, decide, run tools, repeat (docs/how-a-run-works.md)."""

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

    # Signals and updates (checks: agentloop.workflows.requests) ---------------------
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

    # Threads: send and steer (decisions: agentloop.workflows.conversation) ------------

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

    def _decide_send(self, args: tuple[Any, ...]) -> threads.MessageDecision:
        message = threads.parse_send(threads.one_payload("send", args))
        s = self._state
        # A stop ends the turn under way; only a stop while the thread waits ends the thread.
        idle_stop = s.stop is not None and s.thread is not None and not s.thread.busy
        ended = s.status in ("completed", "failed", "cancelled", "stopped") or idle_stop
        facts = self._threads.facts(ended=ended) if self._threads is not None else \
            threads.ThreadFacts(run_id=self._run_id, thread_id="", busy=False, queued=0, next_turn=1)
        return threads.decide_message(message, facts)

    def _accept(self, decision: threads.MessageDecision) -> MessageAccepted:
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
        return threads.decide_steer(threads.parse_steer(threads.one_payload("steer", args)),
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

    # The loop --------------------------------------------------------------------------

    @workflow.run
    async def run(self, *args: Any) -> AgentRunResult:
        if self._input is None:
            self._refuse_input()
        self._features = Features.of_this_run()
        spec = self._input.spec
        self._recorder.configure(search_attributes=self._features.hitl, name=spec.name, model=spec.model,
                                 trust_start_attributes=self._features.lean)
        self._keeper = ContextKeeper(self._state, self._recorder, spec)
        delegate = SubAgentRunner(self._state, self._recorder, self._run_id, self._input).delegate
        self._tools = ToolRunner(self._state, self._recorder, self._run_id, self._features,
                                 delegate=delegate if spec.sub_agents else None)
        self._handover = Handover(self._stream, self._state, self._recorder, self._input,
                                  enabled=self._features.by_reference)
        # Only runs whose spec asks for context from the worker load it.
        self._context = (RunContext(self._state, self._run_id, spec, self._features.tool_queue)
                         if wants_context(spec) else None)
        # Only runs whose spec names guardrails schedule their activities.
        self._guards = GuardrailRunner(self._state, self._recorder, self._run_id, spec) if spec.guardrails else None
        if self._input.carry is None:
            version, change = definition_of(spec, self._input.origin)
            self._state.report.agent_version, self._state.report.definition_change = version, change
            self._recorder.emit(RunCreated, agent_name=spec.name, model=spec.model, input=list(self._input.messages),
                                agent_version=version, definition_change=change)
        if self._input.origin is not None and self._input.carry is None:
            snapshots.announce_pending(self._state, self._recorder)
        self._recorder.index()
        if spec.output is not None:
            workflow.patched(TYPED_OUTPUT_PATCH)  # typed answers: decided by agentloop.workflows.output_logic
        try:
            return await self._loop(spec)
        except asyncio.CancelledError:
            self._recorder.cancelled()
            raise

    async def _loop(self, spec: AgentSpec) -> AgentRunResult:
        if (self._input.carry is None and restores_completed(self._input)
                and workflow.patched(RESTORED_COMPLETED_PATCH)):
            # A completed run, restored without a new message: completed, at
            # once (decided before any activity, so its marker comes first).
            self._state.report.final_text = self._input.messages[-1].text
            return self._recorder.completed(omit_long=self._features.by_reference)
        tools = await self._prepare(spec)
        if self._threads is not None:
            # A thread: turn after turn, waiting for messages in between.
            self._threads.index_thread()
            return await self._threads.run(lambda turn_spec: self._steps(turn_spec, tools), ended=self._end_stopped,
                                           hand_over=lambda: self._handover.when_due(None),
                                           upgrade=self._handover.upgrade)
        match await self._steps(spec, tools):
            case FinalAnswer():
                return self._recorder.completed(omit_long=self._features.by_reference)
            case Stopped():
                return self._end_stopped()
            case FailRun(reason, message):
                self._fail(reason, message)

    async def _steps(self, spec: AgentSpec, tools: list[ToolDefinition]) -> FinalAnswer | Stopped | FailRun:
        """Step after step until the model answers, a stop, or a failure: a
        whole run, or one turn of a thread."""
        while True:
            self._features.raise_if_cancelled()
            pending = self._state.pending_step
            if pending is not None:
                # Resumed after continue-as-new: the step's calls wait for people.
                self._state.pending_step = None
                self._recorder.add_step(pending.report)
                step = StepGates(pending.gates, pending.report)
            else:
                if self._state.stop is not None:
                    return Stopped()
                apply_steering(self._state, self._recorder)
                await self._handover.when_due(None)
                match await self._llm_step(spec, tools):
                    case FinalAnswer() as answer:
                        if self._state.steering:
                            continue  # steered while it answered: one more step, with the steering in
                        return answer
                    case Verify(prompt):
                        self._state.ask_to_verify(prompt)
                        continue
                    case RetryOutput(message):
                        self._state.retry_output(message)
                        continue
                    case FailRun() as failed:
                        return failed
                    case StepGates() as step:
                        if any(g.approval is not None or g.action is not None for g in step.gates):
                            # Waiting for people may take days: hand over a short history first.
                            await self._handover.when_due(PendingStep(gates=step.gates, report=step.report))
            self._features.raise_if_cancelled()
            results = await self._tools.run_step(spec, step)
            failed = count_failed_steps([f for _, f in results], self._state.failed_tool_steps)
            self._state.finish_step(results, failed_steps=failed)
            if self._tools.end_run is not None:
                return FailRun("tool_error", self._tools.end_run)
            over_budget = self._tree_over_budget(spec) if spec.sub_agents else None
            if over_budget is not None:
                return over_budget
            match decide_after_tools([r for r, _ in results], spec=spec, step=self._state.step,
                                     failed_tool_steps=failed, stop_requested=self._state.stop is not None):
                case Continue():
                    continue
                case Stopped() | FailRun() as end:
                    return end

    async def _prepare(self, spec: AgentSpec) -> list[ToolDefinition]:
        """Resolve the spec's tools (a run naming tools the worker lacks fails)
        and fix what every LLM request of the run carries."""
        tools: list[ToolDefinition] = []
        layers = []  # the workspace's AGENTS.md, when the tool list brought it
        if spec.tools or spec.mcp_servers:
            try:
                resolved = await self._look_tools_up(
                    ResolveToolsInput(names=spec.tools, hooks=spec.tool_hooks, mcp_servers=spec.mcp_servers,
                                      agents_md=spec.agents_md is None, workspace=spec.workspace))
            except ActivityError as err:
                if not spec.mcp_servers and calls.failure_type(err) != TOOL_DEFINITION_ERROR_TYPE:
                    raise
                calls.reraise_cancel(err)
                self._fail("error", calls.failure_detail(err))
            missing = snapshots.unexpected_missing(resolved.missing, self._input.origin, self._state)
            if missing:
                self._fail("error", missing_tools_message(missing, resolved.available))
            tools = resolved.tools
            self._tools.run_beside(resolved.runs_queue, resolved.local_tools)
            if resolved.agents_md is not None:
                layers = [agents_md_layer(resolved.agents_md)]
            if resolved.missing_hooks:
                self._fail("error", missing_hooks_message(resolved.missing_hooks, resolved.available_hooks))
        if self._guards is not None:
            failed = await self._guards.prepare()
            if failed is not None:
                self._fail(failed.reason, failed.message)
        tools = tools + sub_agent_tools(spec) + [t.definition() for t in spec.activity_tools]
        model_tools = tools + (spec.client_tools if self._features.hitl else [])
        if spec.output is not None and output_mode(spec.model) == "tool":
            model_tools = [*model_tools, final_result_tool(spec.output)]
        problem = tool_choice_problem(spec.tool_choice, [t.name for t in model_tools])
        if problem is not None:
            self._fail("error", problem)
        system_prompt = spec.composed_system_prompt
        if self._context is not None:
            failed = await self._context.at_start(fresh=self._input.carry is None)
            if failed is not None:
                self._fail(failed.reason, failed.message)
            self._context.run_layers = layers = [*layers, *self._context.run_layers]
        if self._context is not None or layers:
            system_prompt = system_prompt_with(spec, layers)
        self._model_context = ModelContext(system_prompt=system_prompt, tools=model_tools,
                                           context_hash=context_hash(system_prompt, model_tools))
        self._keeper.use(self._model_context)
        if self._input.carry is None:
            snapshots.note_tool_changes(self._input.origin, [t.name for t in model_tools], self._state, self._recorder)
        return tools

    # One LLM step ------------------------------------------------------------------------

    async def _llm_step(self, spec: AgentSpec, tools: list[ToolDefinition]) -> NextStep | RetryOutput | StepGates:
        """One LLM step and what follows it: the run's end, one more step, or
        the step's calls, gated."""
        state, features = self._state, self._features
        refreshed = await self._refresh_context()
        if refreshed is not None:
            return refreshed
        managed = await self._manage_context("threshold")
        if managed is not None:
            return managed
        report = self._recorder.step_started()
        blocked = await self._guard("input", messages_to_check(state.messages), report)
        if blocked is not None:
            return blocked
        msg_id = message_id(self._run_id, state.step)
        self._recorder.emit(MessageCreated, message_id=msg_id)
        result = await self._call_model_fitting(spec, report)
        if isinstance(result, FailRun):
            return result
        blocked = await self._guard("output", [result.response.message], report)
        if blocked is not None:
            return blocked  # a response that trips a guardrail does not join the conversation
        self._take_response(result.response, msg_id)
        if features.by_reference:
            budget = check_run_budget(state.usage, spec, sub_usage=state.sub_usage, sub_cost_usd=state.sub_cost_usd)
            state.report.total_cost_usd = budget.cost_usd
            if isinstance(budget, OverBudget):
                return FailRun("cost_limit", budget.message)
        typed = self._typed_answer(spec, result.response) if spec.output is not None else None
        if typed is not None:
            return typed
        decision = decide_next_step(
            result.response, spec=spec, continuations=state.continuations, limit_requires_action=features.hitl,
            may_verify=features.by_reference and not state.verified, last_step=state.step + 1 >= spec.max_steps,
        )
        match decision:
            case RunTools() | RequireAction():
                gates = gate_calls(decision, spec=spec, tools=tools, step=state.step + 1, now=workflow.now(),
                                   hitl=features.hitl, strict_client_arguments=features.by_reference)
                state.continuations = state.continuations + 1 if isinstance(decision, RunTools) else 0
            case _:
                return decision
        return self._gated(gates, report)

    def _typed_answer(self, spec: AgentSpec, response: ModelResponse) -> FinalAnswer | RetryOutput | FailRun | None:
        """A typed run's answer checked against ``spec.output``
        (:func:`~agentloop.workflows.output_logic.decide_output`); None when
        the response is not an answer."""
        assert spec.output is not None
        state = self._state
        decision = decide_output(response, spec.output, tries=state.output_tries, retries=spec.output_retries,
                                 last_step=state.step + 1 >= spec.max_steps)
        if not isinstance(decision, TypedAnswer):
            return decision
        state.report.output, state.report.final_text = decision.value, decision.text
        if decision.results is not None:  # the answer was a final_result call: answer the step's calls
            state.messages.append(decision.results)
            state.end_step_here()
        return FinalAnswer(decision.text)

    async def _refresh_context(self) -> FailRun | None:
        """The step's system prompt with the spec's per-step context layers
        (runs with context providers only)."""
        if self._context is None:
            return None
        prompt = await self._context.before_step()
        if isinstance(prompt, FailRun):
            return prompt
        if prompt is not None and prompt != self._model_context.system_prompt:
            tools = self._model_context.tools
            self._model_context = ModelContext(system_prompt=prompt, tools=tools,
                                               context_hash=context_hash(prompt, tools))
            self._keeper.use(self._model_context)
        return None

    async def _guard(self, stage: GuardrailStage, messages: list[Message], report: StepReport) -> FailRun | None:
        """The stage's guardrails on ``messages`` (runs with guardrails only)."""
        if self._guards is None:
            return None
        return await self._guards.check(stage, messages, report)

    def _gated(self, gates: list[ToolGate], report: StepReport) -> StepGates:
        """The step's calls that ask someone start waiting; say so."""
        self._state.under_way = PendingStep(gates=gates, report=report)
        self._state.wait_for(gates)
        for gate in gates:
            if gate.approval is not None:
                self._recorder.emit(ApprovalRequested, approval=gate.approval)
        actions = [g.action for g in gates if g.action is not None]
        if actions:
            self._recorder.emit(RequiresAction, actions=actions)
        self._recorder.index()
        return StepGates(gates, report)

    async def _manage_context(self, trigger: str) -> FailRun | None:
        if not self._features.by_reference:
            return None
        return await self._keeper.manage(trigger=trigger)

    async def _call_model_fitting(self, spec: AgentSpec, report: StepReport) -> CallModelResult | FailRun:
        """The step's LLM call; a request the provider refuses as too long is
        compacted and taken again, at most twice."""
        result = await self._call_model(spec, report)
        for _ in range(2):
            if not isinstance(result, ContextTooLong):
                break
            managed = await self._manage_context("context_length_error")
            if managed is not None:
                return managed
            result = await self._call_model(spec, report)
        return FailRun("error", result.message) if isinstance(result, ContextTooLong) else result

    async def _look_tools_up(self, input: ResolveToolsInput) -> ResolveToolsResult:
        """The spec's tools: from this worker when it serves them (a local
        activity; the run's clock then stays held until the first LLM step's
        answer, see ``RunRecorder.hold_clock``), else from the tools queue."""
        if self._features.resolve_here:
            self._recorder.hold_clock()
            found = await calls.resolve_tools_here(input)
            if found is not None:
                return found
            self._recorder.release_clock()  # the tools queue's answer arrives at one time in every execution
        return await calls.resolve_tools(input, calls.resolve_tools_options(self._features.tool_queue))

    async def _call_model(self, spec: AgentSpec, report: StepReport) -> CallModelResult | ContextTooLong | FailRun:
        step, started = self._state.step + 1, self._recorder.now()
        input = calls.model_step_input(self._run_id, spec, self._state, self._model_context,
                                       by_reference=self._features.by_reference, seed=self._features.lean)
        try:
            result = await calls.call_model(input, calls.model_call_options(spec), f"LLM step {step}")
        except ActivityError as err:
            self._recorder.release_clock()
            calls.reraise_cancel(err)
            report.llm_latency_ms = ms(workflow.now() - started)
            detail = calls.failure_detail(err)
            if calls.failure_type(err) == MODEL_CONTEXT_LENGTH_ERROR_TYPE and self._features.by_reference:
                return ContextTooLong(f"LLM step {step} failed: {detail}")
            after = calls.attempts_note(err, spec.llm_max_attempts)
            return FailRun("error", f"LLM step {step} failed{after}: {detail}")
        self._recorder.release_clock()
        response, by_reference = result.response, self._features.by_reference
        report.llm_latency_ms = ms(workflow.now() - started)
        report.finish_reason = response.finish_reason
        usage = response.usage + result.failed_attempts_usage if by_reference else response.usage
        report.usage = self._state.add_usage(usage, result.attempt if by_reference else 1)
        self._state.report.total_llm_time_ms += report.llm_latency_ms
        return result

    def _take_response(self, response: ModelResponse, msg_id: str) -> None:
        """The assistant message joins the conversation and is announced."""
        state = self._state
        tokens = response.usage.input_tokens
        state.anchor = make_anchor(state.messages, tokens) if tokens else None
        state.messages.append(response.message)
        if response.message.text:
            state.report.final_text = response.message.text
        if not response.message.tool_calls:
            state.end_step_here()  # a step without tool calls ends with its answer
        self._recorder.emit(MessageCompleted, message_id=msg_id, message=response.message, usage=response.usage,
                            finish_reason=response.finish_reason)
        for tool_call in response.message.tool_calls:
            self._recorder.emit(ToolCallCompletedByLLM, call=tool_call)

    def _tree_over_budget(self, spec: AgentSpec) -> FailRun | None:
        """After a step that may have delegated: the run and its sub-agents
        together against the budget (one budget for the whole tree)."""
        state = self._state
        budget = check_run_budget(state.usage, spec, sub_usage=state.sub_usage, sub_cost_usd=state.sub_cost_usd)
        state.report.total_cost_usd = budget.cost_usd
        if isinstance(budget, OverBudget):
            return FailRun("cost_limit", f"with its sub-agents, {budget.message}")
        return None

    # The end ----------------------------------------------------------------------------------

    def _end_stopped(self) -> AgentRunResult:
        assert self._state.stop is not None
        # Bounded again: a stop carried from a run of an older version may hold any reason.
        reason = cut_text(self._state.stop.reason, MAX_REASON_CHARS) if self._state.stop.reason else None
        note = f"stopped: {reason}" if reason else "stopped by request"
        return self._recorder.stopped(note, omit_long=self._features.by_reference)

    def _fail(self, reason: RunReason, message: str) -> NoReturn:
        """End the run ``failed``. It fails in Temporal (so it shows as Failed
        in the UI and CLI); the full result rides along in the error's details."""
        result = self._recorder.failed(reason, message, omit_long=self._features.by_reference)
        raise ApplicationError(f"agent run failed ({reason}): {result.error or message}", result,
                               type=RUN_FAILED_ERROR_TYPE, non_retryable=True)

    def _refuse_input(self) -> NoReturn:
        message = self._input_error or "invalid run input"
        self._state.end("failed", "error", message)
        self._recorder.emit(RunFailed, reason="error", error=message)
        raise ApplicationError(message, type=INVALID_INPUT_ERROR_TYPE, non_retryable=True)
