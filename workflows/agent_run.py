"""AgentRunWorkflow: one agent run, durable.

Each LLM step and each tool call is an activity; Temporal's event history is
the checkpoint, so a run survives worker crashes and restarts. This module is
deterministic: no I/O, clocks or randomness, only ``workflow.now()``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.contrib.workflow_streams import WorkflowStream
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    # Pydantic models and pure helpers: no side effects at import, and passing
    # them through keeps one class identity for the data converter.
    from pydantic import ValidationError

    from agentloop.activity_io import (
        CallModelInput,
        CallModelResult,
        CompactionRef,
        ExecuteToolInput,
        ExecuteToolResult,
        ModelRequest,
        ResolveToolsInput,
        ResolveToolsResult,
        ToolDefinition,
        TranscriptRef,
    )
    from agentloop.approvals import (
        MAX_CALL_ID_CHARS,
        MAX_REASON_CHARS,
        MAX_REQUEST_BYTES,
        ApprovalDecision,
        DecisionAccepted,
        PendingAction,
        PendingApproval,
        PendingWork,
        StopRequest,
        SubmitToolOutputs,
        ToolGate,
        ToolOutput,
        check_permission,
        cut_oversize_fields,
        cut_text,
        oversize_fields,
        request_bytes,
    )
    from agentloop.context import (
        TokenAnchor,
        estimate_tokens,
        make_anchor,
        needs_management,
        prune_target_tokens,
        prune_tool_outputs,
        split_for_compaction,
    )
    from agentloop.errors import (
        INVALID_DECISION_ERROR_TYPE,
        INVALID_INPUT_ERROR_TYPE,
        INVALID_REQUEST_ERROR_TYPE,
        REQUEST_TOO_LARGE_ERROR_TYPE,
        RUN_FAILED_ERROR_TYPE,
        describe_validation_error,
        preview,
    )
    from agentloop.events import (
        EVENTS_TOPIC,
        ApprovalRequested,
        ApprovalResolved,
        ContextManaged,
        MessageCompleted,
        MessageCreated,
        RequiresAction,
        RunCancelled,
        RunCompleted,
        RunContinued,
        RunCreated,
        RunFailed,
        RunStatusChanged,
        StepCreated,
        ToolCallCompletedByLLM,
        ToolExecutionCompleted,
        ToolExecutionStarted,
        message_id,
    )
    from agentloop.messages import Message, ToolCallPart, ToolResultPart
    from agentloop.pricing import check_budget, run_cost
    from agentloop.report import (
        AgentRunReport,
        RunReason,
        StepReport,
        ToolCallReport,
        Usage,
    )
    from agentloop.run import (
        MAX_ERROR_CHARS,
        RESULT_MESSAGES_LIMIT,
        AgentRunInput,
        AgentRunResult,
        MessagesResult,
        PendingStep,
        RunCarry,
        RunState,
        RunStatus,
        parse_run_input,
    )
    from agentloop.search_attributes import (
        AGENT_MODEL,
        AGENT_NAME,
        AGENT_PENDING_TOOLS,
        AGENT_STATUS,
    )
    from agentloop.spec import AgentSpec
    from agentloop.transcript import (
        EMPTY_HASH,
        ModelContext,
        TranscriptPage,
        TranscriptRange,
        as_range,
        chain_hash,
        context_hash,
        page,
    )
    from agentloop.workflows.loop_logic import (
        FailRun,
        FinalAnswer,
        RequireAction,
        RunTools,
        bad_arguments_message,
        clip_output,
        decide_next_step,
        denied_message,
        max_steps_message,
        skipped_message,
        stopped_message,
        unknown_tool_message,
    )

#: Extra time a tool activity gets beyond the tool's own limit, so the tool's
#: timeout (a clean error result) fires before Temporal's.
TOOL_TIMEOUT_GRACE = timedelta(seconds=30)


#: Patch marker of runs started with permissions, approvals, requires_action,
#: stop and search attributes. Runs recorded before it replay without them.
HITL_PATCH = "agentloop-hitl-1"

#: Patch marker of runs whose LLM steps take the transcript by reference
#: (and that may continue as new). Older runs replay passing it by value.
LONG_RUNS_PATCH = "agentloop-long-runs-1"

#: Patch marker of runs that send their tool activities (resolve_tools,
#: execute_tool) to the tools queue, ``<the run's task queue>-tools``, served by
#: workers that hold no provider keys. Older runs send them to the run's queue.
TOOL_QUEUE_PATCH = "agentloop-tool-queue-1"
#: The tools queue's name is the run's task queue plus this.
TOOL_QUEUE_SUFFIX = "-tools"

#: The ApplicationError type providers' adapters give a request longer
#: than the model's context window.
CONTEXT_LENGTH_ERROR_TYPE = "ModelContextLengthExceeded"

#: The system prompt of the summariser call that compacts older history.
SUMMARISER_PROMPT = "You summarise conversations between a user and an AI agent, faithfully and briefly."

#: Events a run keeps in its stream when it continues as new.
CARRIED_EVENTS = 1000

#: Largest conversation a run hands to its next Temporal run (Temporal's
#: payload limit is 2 MB; the report and event log travel too).
CARRY_LIMIT_BYTES = 1_000_000

#: Decided call ids a run remembers across continue-as-new (for "already
#: decided" answers).
CARRIED_ANSWERED = 1000

#: How many rejected-signal notes the ``state`` query keeps.
REJECTED_SIGNALS_KEPT = 20

#: Patch marker of runs that take an ``approve`` or ``submit_tool_outputs``
#: signal with text over its limit cut (and noted); older runs ignored such a
#: signal. Recorded only when such a signal arrives.
BOUNDED_SIGNALS_PATCH = "agentloop-bounded-signals-1"

#: Most bytes of messages one ``transcript`` query answers (one larger
#: message comes alone): an answer rides in a workflow task's completion.
TRANSCRIPT_PAGE_BYTES = 1_000_000


def _ms(delta: timedelta) -> float:
    return delta.total_seconds() * 1000


@workflow.defn(name="AgentRunWorkflow")
class AgentRunWorkflow:
    """The agent loop of DESIGN.md: step, decide, run tools, repeat."""

    @workflow.init
    def __init__(self, *args: Any) -> None:
        # The arguments arrive raw (JSON decoded, no type): input an operator
        # typed into `temporal workflow start` that is not one AgentRunInput
        # (a string, a binary payload, none, two) fails the run once, in
        # `run`, instead of failing workflow tasks forever on a decode error.
        input: AgentRunInput | None = None
        self._input_error: str | None = None
        try:
            input = parse_run_input(args)
        except ValueError as exc:
            self._input_error = str(exc)
        self._input = input
        # The event stream (Temporal Workflow Streams): subscribers poll it
        # by offset; the LLM activity publishes deltas into it.
        carry = input.carry if input is not None else None
        self._stream = WorkflowStream(prior_state=carry.stream if carry else None)
        self._events = self._stream.topic(EVENTS_TOPIC)
        self._run_id = workflow.info().workflow_id
        self._spec: AgentRunInput | None = None
        self._status: RunStatus = "running"
        self._reason: RunReason | None = None
        self._error: str | None = None
        self._messages: list[Message] = []
        self._input_count = 0
        self._step = 0
        self._usage = Usage()
        self._running_calls: dict[str, ToolCallPart] = {}
        self._report: AgentRunReport | None = None
        self._hitl = False
        self._approvals: dict[str, PendingApproval] = {}
        self._decisions: dict[str, ApprovalDecision] = {}
        self._actions: dict[str, PendingAction] = {}
        self._outputs: dict[str, ToolOutput] = {}
        self._answered: set[str] = set()
        self._stop: StopRequest | None = None
        self._rejected: list[str] = []
        self._indexed: tuple[str, tuple[str, ...]] | None = None
        self._announced: RunStatus | None = None
        self._by_reference = False
        self._hashes: list[str] = []
        self._model_context = ModelContext()
        self._continuations = 0
        self._failed_tool_steps = 0
        self._anchor: TokenAnchor | None = None
        self._verified = False
        self._runs = 0
        self._steps_this_run = 0
        self._pending_step: PendingStep | None = None
        self._carry_warned = False
        if carry is not None and input is not None:
            # Restored here, before any handler runs: a decision delivered in
            # the new run's first activation must find its pending call.
            self._spec = input
            self._messages = list(input.messages)
            self._restore(carry)

    # Queries -----------------------------------------------------------------

    @workflow.query(name="state")
    def state(self) -> RunState:
        """Status, step, tool calls running now, what the run waits for, usage."""
        spec = self._spec.spec if self._spec else None
        return RunState(
            run_id=self._run_id,
            status=self._status,
            step=self._step,
            reason=self._reason,
            error=self._error,
            running_tool_calls=list(self._running_calls.values()),
            message_count=len(self._messages),
            usage=self._usage,
            pending_approvals=list(self._approvals.values()),
            pending_actions=list(self._actions.values()),
            stop_requested=self._stop is not None,
            rejected_signals=list(self._rejected),
            agent_name=spec.name if spec else "",
            model=spec.model if spec else "",
        )

    @workflow.query(name="messages")
    def messages(self) -> MessagesResult:
        """The conversation so far, input included."""
        return MessagesResult(messages=list(self._messages))

    @workflow.query(name="report")
    def report(self) -> AgentRunReport:
        """The run report (seed 004), complete up to now."""
        assert self._report is not None
        report = self._report.model_copy()
        if report.completed_at is None:
            report.total_ms = _ms(workflow.now() - report.started_at)
        return report

    @workflow.query(name="transcript")
    def transcript(self, *args: Any) -> TranscriptPage:
        """Messages from an offset, with the transcript's hash: how a worker
        fills its cache for an LLM step that names the transcript by reference."""
        return page(self._messages, self._transcript_hashes(), _transcript_range(args))

    @workflow.query(name="model_context")
    def model_context(self) -> ModelContext:
        """The system prompt and tools every LLM step of this run uses."""
        return self._model_context

    @workflow.query(name="pending")
    def pending(self) -> PendingWork:
        """Calls waiting for an operator's decision or the client's outputs."""
        return PendingWork(approvals=list(self._approvals.values()), actions=list(self._actions.values()))

    # Signals and updates -----------------------------------------------------
    #
    # Each decision arrives as a signal (fire and forget: what ops tools and
    # `temporal workflow signal` send) or as an update of the same name, whose
    # validator rejects bad input before it reaches history. Payloads are
    # taken raw (any number of arguments, plain JSON) and validated here, so
    # no payload can fail a workflow task. What a request brings in is bounded
    # (agentloop.approvals, MAX_*): an update's validator refuses a request
    # over MAX_REQUEST_BYTES before reading it, and a field over its limit;
    # a signal cannot answer, so its oversize text is cut and the cut noted in
    # `rejected_signals`. Messages quote values through `preview`, never whole.

    @workflow.signal(name="approve")
    def approve_signal(self, *args: Any) -> None:
        """Decide a pending call: approve, deny, skip, or approve with a result."""
        try:
            self._apply_decision(self._check_decision(self._signal_payload("approve", args)))
        except ValueError as exc:
            self._reject("approve", exc)

    @workflow.update(name="approve")
    def approve_update(self, *args: Any) -> DecisionAccepted:
        """Like the ``approve`` signal, but answers, and rejects bad input."""
        # The validator weighed the request; replayed updates were accepted
        # by the validator of their day, so only the run's state is checked again.
        decision = _as_update_error(lambda: self._check_decision(_one_payload("approve", args)))
        self._apply_decision(decision)
        return DecisionAccepted(call_ids=[decision.call_id], still_pending=self._still_pending())

    @approve_update.validator
    def _validate_approve(self, *args: Any) -> None:
        _as_update_error(lambda: self._check_decision(_update_payload("approve", args)))

    @workflow.signal(name="submit_tool_outputs")
    def submit_signal(self, *args: Any) -> None:
        """Outputs of the calls the client ran (``requires_action``)."""
        try:
            self._apply_outputs(self._check_outputs(self._signal_payload("submit_tool_outputs", args)))
        except ValueError as exc:
            self._reject("submit_tool_outputs", exc)

    @workflow.update(name="submit_tool_outputs")
    def submit_update(self, *args: Any) -> DecisionAccepted:
        """Like the ``submit_tool_outputs`` signal, but answers, and rejects bad input."""
        submission = _as_update_error(lambda: self._check_outputs(_one_payload("submit_tool_outputs", args)))
        self._apply_outputs(submission)
        return DecisionAccepted(
            call_ids=[o.call_id for o in submission.tool_outputs], still_pending=self._still_pending()
        )

    @submit_update.validator
    def _validate_submit(self, *args: Any) -> None:
        _as_update_error(lambda: self._check_outputs(_update_payload("submit_tool_outputs", args)))

    @workflow.signal(name="stop")
    def stop_signal(self, *args: Any) -> None:
        """End the run ``stopped`` once the current step is done."""
        try:
            payload = self._signal_payload("stop", args)
            request = _parse(StopRequest, {} if payload is None else payload, "stop")
        except ValueError as exc:
            self._reject("stop", exc)
            request = StopRequest()
        if self._stop is None:
            self._stop = request

    def _signal_payload(self, name: str, args: tuple[Any, ...]) -> Any:
        """A signal's one payload, its free text cut to the limits (each cut noted)."""
        payload = _one_payload(name, args)
        # A stop is taken whatever its reason, so cutting it changes no
        # command; approve and submit_tool_outputs signals with oversize text
        # were ignored before, and still are in runs that started then.
        if oversize_fields(name, payload) and (name == "stop" or workflow.patched(BOUNDED_SIGNALS_PATCH)):
            payload, notes = cut_oversize_fields(name, payload)
            for note in notes:
                self._note(note)
        return payload

    def _check_decision(self, payload: Any) -> ApprovalDecision:
        decision = _parse(ApprovalDecision, payload, "approve")
        call_id = decision.call_id
        if call_id not in self._approvals:
            if len(call_id) > MAX_CALL_ID_CHARS:
                raise _Refusal(
                    f"call_id {preview(call_id)!r} is longer than a call id can be (at most "
                    f"{MAX_CALL_ID_CHARS:,} characters); waiting now: {_listing(self._approvals)}",
                    INVALID_REQUEST_ERROR_TYPE,
                )
            if call_id in self._answered:
                raise _Refusal(f"call {preview(call_id)} was already decided; nothing is waiting for it")
            hint = ""
            if call_id in self._actions:
                hint = " (it waits for the client's output: use submit_tool_outputs)"
            raise _Refusal(
                f"no call {preview(call_id)!r} waits for approval in run {self._run_id}{hint}; "
                f"waiting now: {_listing(self._approvals)}"
            )
        if decision.decision == "deny" and decision.result is not None:
            raise _Refusal("a denial takes a reason, not a result; use decision 'skip' to answer with a result")
        return decision

    def _apply_decision(self, decision: ApprovalDecision) -> None:
        self._decisions[decision.call_id] = decision
        self._approvals.pop(decision.call_id, None)
        self._answered.add(decision.call_id)

    def _check_outputs(self, payload: Any) -> SubmitToolOutputs:
        if isinstance(payload, list):  # a bare list of outputs is accepted too
            payload = {"tool_outputs": payload}
        submission = _parse(SubmitToolOutputs, payload, "submit_tool_outputs")
        ids = [o.call_id for o in submission.tool_outputs]
        seen: set[str] = set()
        duplicates: set[str] = set()
        for i in ids:
            (duplicates if i in seen else seen).add(i)
        if duplicates:
            raise _Refusal(f"outputs name {_listing(sorted(duplicates))} more than once; send one output per call")
        unknown = [i for i in ids if i not in self._actions]
        if unknown:
            done = [i for i in unknown if i in self._answered]
            if done:
                raise _Refusal(f"call(s) {_listing(done)} already have their output")
            raise _Refusal(
                f"no call {_listing(unknown, quote=True)} waits for a client output in run "
                f"{self._run_id}; waiting now: {_listing(self._actions)}"
            )
        missing = [i for i in self._actions if i not in seen]
        if missing:
            raise _Refusal(
                f"outputs are missing for {_listing(missing)}; submit an output for every pending "
                "call in one submission (query 'pending' lists them)"
            )
        return submission

    def _apply_outputs(self, submission: SubmitToolOutputs) -> None:
        for output in submission.tool_outputs:
            self._outputs[output.call_id] = output
            self._actions.pop(output.call_id, None)
            self._answered.add(output.call_id)

    def _still_pending(self) -> list[str]:
        return [*self._approvals, *self._actions]

    def _reject(self, name: str, exc: ValueError) -> None:
        self._note(f"{name} signal ignored: {exc}")

    def _note(self, note: str) -> None:
        """Say in the ``state`` query's ``rejected_signals`` what became of a signal."""
        workflow.logger.warning(note)
        self._rejected = [*self._rejected, note][-REJECTED_SIGNALS_KEPT:]

    # The loop ----------------------------------------------------------------

    @workflow.run
    async def run(self, *args: Any) -> AgentRunResult:
        # `__init__` validated the same arguments.
        input = self._input
        if input is None:
            message = self._input_error or "invalid run input"
            self._status, self._reason, self._error = "failed", "error", message
            self._emit(RunFailed, reason="error", error=message)
            raise ApplicationError(message, type=INVALID_INPUT_ERROR_TYPE, non_retryable=True)
        self._run_id = workflow.info().workflow_id
        self._spec = input
        self._hitl = workflow.patched(HITL_PATCH)
        self._by_reference = workflow.patched(LONG_RUNS_PATCH)
        self._tool_queue = (
            workflow.info().task_queue + TOOL_QUEUE_SUFFIX if workflow.patched(TOOL_QUEUE_PATCH) else None
        )
        if input.carry is None:
            self._messages = list(input.messages)
            self._input_count = len(self._messages)
            self._report = AgentRunReport(
                id=self._run_id,
                model=input.spec.model,
                started_at=workflow.now(),
                user_message=next((m.text for m in reversed(self._messages) if m.role == "user"), ""),
            )
            self._emit(RunCreated, agent_name=input.spec.name, model=input.spec.model, input=list(input.messages))
        self._index()
        try:
            return await self._loop(input)
        except asyncio.CancelledError:
            self._approvals.clear()
            self._actions.clear()
            self._finish("cancelled", "cancelled", None)
            self._emit(RunCancelled, usage=self._usage)
            raise

    async def _loop(self, input: AgentRunInput) -> AgentRunResult:
        spec = input.spec
        tools = await self._resolve_tools(spec.tools)
        if isinstance(tools, FailRun):
            return self._fail(tools.reason, tools.message)
        model_tools = tools + (spec.client_tools if self._hitl else [])
        system_prompt = spec.composed_system_prompt
        self._model_context = ModelContext(
            system_prompt=system_prompt,
            tools=model_tools,
            context_hash=context_hash(system_prompt, model_tools),
        )

        while True:
            if self._pending_step is not None:
                # Resumed after continue-as-new: the step's calls wait for people.
                gates, step_report = self._pending_step.gates, self._pending_step.report
                self._pending_step = None
                self._report_step(step_report)
            else:
                if self._stop is not None:
                    return self._stopped()
                if self._should_continue_as_new():
                    await self._continue_as_new(input, None)
                step = await self._take_step(input, tools, model_tools)
                if isinstance(step, AgentRunResult):
                    return step
                if step is None:
                    continue  # the verification prompt was added: one more step
                gates, step_report = step
                waiting = any(g.approval is not None or g.action is not None for g in gates)
                if waiting and self._should_continue_as_new(in_step=True):
                    # Waiting for people may take days: hand over a short history first.
                    await self._continue_as_new(input, PendingStep(gates=gates, report=step_report))

            outcomes = await self._run_tools(input, gates, step_report)
            self._messages.append(Message(role="tool", content=[r for r, _ in outcomes]))
            if all(failed for _, failed in outcomes):
                self._failed_tool_steps += 1
                if self._failed_tool_steps >= spec.max_consecutive_failed_tool_steps:
                    errors = "; ".join(f"{r.name}: {r.content}" for r, _ in outcomes)
                    return self._fail(
                        "tool_error",
                        f"every tool call of step {self._step + 1} failed ({errors})",
                    )
            else:
                self._failed_tool_steps = 0
            self._step += 1
            self._steps_this_run += 1
            if self._stop is not None:
                return self._stopped()
            if self._step >= spec.max_steps:
                return self._fail("max_steps", max_steps_message(spec))

    async def _take_step(
        self, input: AgentRunInput, tools: list[ToolDefinition], model_tools: list[ToolDefinition]
    ) -> tuple[list[ToolGate], StepReport] | AgentRunResult | None:
        """One LLM step and its decision: the gated tool calls to run, the
        run's end, or None when the loop should take another step at once."""
        spec = input.spec
        # Seam for input guardrails.
        managed = await self._manage_context(input, trigger="threshold")
        if isinstance(managed, FailRun):
            return self._fail(managed.reason, managed.message)
        step_report = StepReport(index=self._step, type="initial" if self._step == 0 else "tool_followup")
        self._report_step(step_report)
        msg_id = message_id(self._run_id, self._step)
        self._emit(StepCreated)
        self._emit(MessageCreated, message_id=msg_id)
        sent = list(self._messages)
        llm = await self._call_model(input, model_tools, step_report)
        for _ in range(2):
            if not (isinstance(llm, FailRun) and llm.reason == "context_length"):
                break
            # The provider refused the request as too long: compact, then retry the step.
            managed = await self._manage_context(input, trigger="context_length_error")
            if isinstance(managed, FailRun):
                return self._fail(managed.reason, managed.message)
            sent = list(self._messages)
            llm = await self._call_model(input, model_tools, step_report)
        if isinstance(llm, FailRun):
            reason = "error" if llm.reason == "context_length" else llm.reason
            return self._fail(reason, llm.message)
        response = llm.response
        self._anchor = make_anchor(sent, response.usage.input_tokens) if response.usage.input_tokens else None
        self._messages.append(response.message)
        self._report_final_text(response.message.text)
        self._emit(MessageCompleted, message_id=msg_id, message=response.message,
                   usage=response.usage, finish_reason=response.finish_reason)
        for tool_call in response.message.tool_calls:
            self._emit(ToolCallCompletedByLLM, call=tool_call)
        over_budget = self._check_budget(spec)
        if over_budget is not None:
            return self._fail("cost_limit", over_budget)

        decision = decide_next_step(
            response, spec=spec, continuations=self._continuations, limit_requires_action=self._hitl
        )
        if isinstance(decision, FinalAnswer):
            last_step = self._step + 1 >= spec.max_steps
            if spec.verify_before_completing and not self._verified and self._by_reference and not last_step:
                self._verified = True
                self._messages.append(Message.user(spec.verification_prompt))
                self._step += 1
                self._steps_this_run += 1
                return None
            return self._complete()
        if isinstance(decision, FailRun):
            return self._fail(decision.reason, decision.message)
        if isinstance(decision, RequireAction):
            gates = [self._require_action(c, "max_tool_call_continuations") for c in decision.calls]
            self._continuations = 0
        else:
            assert isinstance(decision, RunTools)
            gates = [self._gate(spec, tools, c) for c in decision.calls]
            self._continuations += 1
        for gate in gates:
            if gate.approval is not None:
                self._emit(ApprovalRequested, approval=gate.approval)
        actions = [g.action for g in gates if g.action is not None]
        if actions:
            self._emit(RequiresAction, actions=actions)
        self._index()
        return gates, step_report

    # Long runs: context, budget, continue-as-new ------------------------------

    def _check_budget(self, spec: AgentSpec) -> str | None:
        if not self._by_reference:
            return None
        cost = run_cost(self._usage, spec.model, spec.budget)
        assert self._report is not None
        self._report.total_cost_usd = cost
        return check_budget(self._usage, cost, spec.budget)

    def _estimate(self, messages: list[Message]) -> int:
        tools_chars = sum(len(t.model_dump_json()) for t in self._model_context.tools)
        return estimate_tokens(messages, system_prompt=self._model_context.system_prompt,
                               tools_json_chars=tools_chars, anchor=self._anchor)

    async def _manage_context(self, input: AgentRunInput, *, trigger: str) -> FailRun | None:
        """Prune old tool outputs, then summarise older history, when the
        estimate passes the policy's threshold (seeds 001 and 004), or
        always when the provider said the request was too long."""
        policy = input.spec.context
        forced = trigger == "context_length_error"
        if not self._by_reference or (policy.context_window_tokens is None and not forced):
            return None
        before = self._estimate(self._messages)
        if not forced and not needs_management(before, policy):
            return None
        target = prune_target_tokens(policy)
        if target is not None:
            pruned, count = prune_tool_outputs(self._messages, policy, target_tokens=target, estimate=self._estimate)
            if count:
                self._replace_messages(pruned)
                after = self._estimate(self._messages)
                self._emit(ContextManaged, kind="prune", tokens_before=before, tokens_after=after,
                           messages_affected=count, trigger=trigger)
                if not forced and not needs_management(after, policy):
                    return None
                before = after
        split = split_for_compaction(self._messages, policy)
        if split is None:
            if forced:
                return FailRun(
                    "error",
                    "the provider refused the request as longer than the model's context window, and "
                    "there is no older history left to summarise; use a model with a larger window, "
                    "lower tool_output_limit, or start with a shorter input",
                )
            return None
        summary = await self._summarise(input, len(split.head), len(split.head) + len(split.to_summarise))
        if isinstance(summary, FailRun):
            return summary
        compacted = split.with_summary(summary)
        self._input_count = min(self._input_count, len(split.head))
        self._replace_messages(compacted)
        self._anchor = None
        self._emit(ContextManaged, kind="summary", tokens_before=before, tokens_after=self._estimate(compacted),
                   messages_affected=len(split.to_summarise), trigger=trigger)
        return None

    async def _summarise(self, input: AgentRunInput, start: int, end: int) -> str | FailRun:
        """Ask the model for a summary of messages[start:end] (by reference)."""
        spec = input.spec
        policy = spec.context
        request = ModelRequest(
            model=spec.model_name,
            system_prompt=SUMMARISER_PROMPT,
            messages=[],
            max_tokens=policy.reserve_output_tokens,
        )
        # By reference: the worker builds the summariser's request from the
        # transcript it caches, so older messages do not enter history again.
        transcript = TranscriptRef(
            message_count=len(self._messages),
            transcript_hash=self._transcript_hashes()[-1],
            context_hash=self._model_context.context_hash,
        )
        try:
            result = await workflow.execute_activity(
                "call_model",
                CallModelInput(run_id=self._run_id, step=self._step, model=spec.model, request=request,
                               stream_deltas=False, transcript=transcript,
                               compaction=CompactionRef(head=start, end=end, policy=policy.model_dump(mode="json"))),
                result_type=CallModelResult,
                start_to_close_timeout=timedelta(seconds=spec.llm_timeout_seconds),
                heartbeat_timeout=timedelta(seconds=spec.heartbeat_timeout_seconds),
                retry_policy=RetryPolicy(maximum_attempts=spec.llm_max_attempts, maximum_interval=timedelta(seconds=60)),
                cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                summary="compact context",
            )
        except ActivityError as err:
            _reraise_cancel(err)
            cause = err.cause
            detail = cause.message if isinstance(cause, ApplicationError) else str(cause or err)
            return FailRun("error", f"summarising older history to fit the context window failed: {detail}")
        self._add_usage(result.response.usage + result.failed_attempts_usage, result.attempt)
        text = result.response.message.text.strip()
        if not text:
            return FailRun("error", "summarising older history returned no text; the context could not be compacted")
        return text

    def _should_continue_as_new(self, *, in_step: bool = False) -> bool:
        """Whether to hand over now: Temporal suggests it, or this run has
        taken ``continue_as_new_every_steps`` steps (counting the step under
        way when it waits for people)."""
        steps = self._steps_this_run + (1 if in_step else 0)
        if not self._by_reference or steps == 0:
            return False
        spec = self._spec.spec if self._spec else None
        every = spec.continue_as_new_every_steps if spec else None
        if not (workflow.info().is_continue_as_new_suggested() or (every is not None and steps >= every)):
            return False
        size = sum(len(m.model_dump_json()) for m in self._messages)
        if size > CARRY_LIMIT_BYTES:
            # The next run's input would pass Temporal's payload limit: go on in
            # this run (set AgentSpec.context so the conversation stays small).
            if not self._carry_warned:
                workflow.logger.warning(
                    "run %s: not continuing as new: its conversation is %d bytes, over %d; set "
                    "AgentSpec.context.context_window_tokens so it is compacted", self._run_id, size, CARRY_LIMIT_BYTES)
                self._carry_warned = True
            return False
        return True

    async def _continue_as_new(self, input: AgentRunInput, pending: PendingStep | None) -> None:
        """Hand the run to a new Temporal run with a fresh, short history."""
        assert self._report is not None
        self._runs += 1
        self._emit(RunContinued, runs=self._runs)
        if pending is not None:
            # Its report goes back in with the step when the next run resumes it.
            self._report.steps = [s for s in self._report.steps if s is not pending.report]
        # Keep the recent events: subscribers resume from their offset.
        offset = self._stream._on_offset()
        self._stream.truncate(max(0, offset - CARRIED_EVENTS))
        pending_ids = {g.call.id for g in pending.gates} if pending else set()
        carry = RunCarry(
            input_count=self._input_count,
            step=self._step,
            usage=self._usage,
            report=self._report,
            continuations=self._continuations,
            failed_tool_steps=self._failed_tool_steps,
            stop=self._stop,
            answered=sorted(self._answered)[-CARRIED_ANSWERED:],
            decisions={k: v for k, v in self._decisions.items() if k in pending_ids},
            outputs={k: v for k, v in self._outputs.items() if k in pending_ids},
            announced=self._announced,
            anchor=self._anchor,
            verified=self._verified,
            pending_step=pending,
            runs=self._runs,
        )
        await self._stream.continue_as_new(
            lambda state: [AgentRunInput(spec=input.spec, messages=self._messages,
                                         carry=carry.model_copy(update={"stream": state}))]
        )

    def _restore(self, carry: RunCarry) -> None:
        self._input_count = carry.input_count
        self._step = carry.step
        self._usage = carry.usage
        self._report = carry.report
        self._continuations = carry.continuations
        self._failed_tool_steps = carry.failed_tool_steps
        self._stop = carry.stop
        self._answered = set(carry.answered)
        self._decisions = dict(carry.decisions)
        self._outputs = dict(carry.outputs)
        self._announced = carry.announced  # type: ignore[assignment]
        self._anchor = carry.anchor
        self._verified = carry.verified
        self._runs = carry.runs
        self._pending_step = carry.pending_step
        if carry.pending_step is not None:
            for gate in carry.pending_step.gates:
                if gate.approval is not None and gate.call.id not in self._decisions:
                    self._approvals[gate.call.id] = gate.approval
                if gate.action is not None and gate.call.id not in self._outputs:
                    self._actions[gate.call.id] = gate.action

    # Before a call runs: policy, approvals, client-side calls ----------------

    def _gate(self, spec: AgentSpec, tools: list[ToolDefinition], call: ToolCallPart) -> ToolGate:
        gate = ToolGate(call=call)
        if any(t.name == call.name for t in spec.client_tools) and self._hitl:
            if call.arguments_error is not None and self._by_reference:
                gate.result = _error(call, bad_arguments_message(call))
                return gate
            return self._require_action(call, "client_tool")
        tool = next((t for t in tools if t.name == call.name), None)
        if tool is None:
            gate.result = _error(call, unknown_tool_message(call.name, tools))
            return gate
        if call.arguments_error is not None:
            gate.result = _error(call, bad_arguments_message(call))
            return gate
        if not self._hitl:
            return gate
        check = check_permission(
            call, rules=spec.permissions, default=spec.default_permission, read_only=tool.read_only
        )
        gate.permission = check
        if check.action == "deny":
            gate.result = _error(call, denied_message(call, check.reason))
        elif check.action == "ask":
            now = workflow.now()
            timeout = spec.approval_timeout_seconds
            gate.approval = PendingApproval(
                call_id=call.id,
                tool_name=call.name,
                arguments=call.arguments,
                step=self._step + 1,
                asked_at=now,
                reason=check.reason,
                expires_at=now + timedelta(seconds=timeout) if timeout else None,
            )
            self._approvals[call.id] = gate.approval
        return gate

    def _require_action(self, call: ToolCallPart, reason: Any) -> ToolGate:
        action = PendingAction(
            call_id=call.id,
            tool_name=call.name,
            arguments=call.arguments,
            step=self._step + 1,
            asked_at=workflow.now(),
            reason=reason,
        )
        self._actions[call.id] = action
        return ToolGate(call=call, action=action)

    async def _await_approval(self, gate: ToolGate, report: ToolCallReport) -> ToolResultPart | None:
        """Wait for the operator; None means run the call."""
        assert gate.approval is not None
        call = gate.call
        spec = self._spec.spec if self._spec else None
        timeout = spec.approval_timeout_seconds if spec else None
        started = workflow.now()
        if timeout and gate.approval.expires_at is not None and self._by_reference:
            # The clock started when the call was asked about (as `pending`
            # shows), not when its turn came in a sequential step.
            timeout = max(0.0, (gate.approval.expires_at - started).total_seconds())
        try:
            await workflow.wait_condition(
                lambda: call.id in self._decisions or self._stop is not None,
                timeout=timeout,
                timeout_summary=f"approval timeout {call.name}" if timeout else None,
            )
        except asyncio.TimeoutError:
            self._approvals.pop(call.id, None)
            self._answered.add(call.id)
            self._emit(ApprovalResolved, call_id=call.id, decision="timeout")
            self._index()
            report.decision = "timeout"
            report.waited_ms = _ms(workflow.now() - started)
            limit = spec.approval_timeout_seconds if spec else timeout
            return _error(call, denied_message(call, f"no decision within {limit:g}s (approval timeout)"))
        report.waited_ms = _ms(workflow.now() - started)
        decision = self._decisions.get(call.id)
        if decision is None:  # stopped while waiting
            self._approvals.pop(call.id, None)
            self._emit(ApprovalResolved, call_id=call.id, decision="stopped")
            self._index()
            report.decision = "stopped"
            return _error(call, stopped_message(call))
        self._emit(ApprovalResolved, call_id=call.id, decision=decision.decision, by=decision.by,
                   reason=decision.reason)
        self._index()
        report.decided_by = decision.by
        if decision.decision == "deny":
            report.decision = "deny"
            reason = decision.reason or "an operator denied it"
            return _error(call, denied_message(call, reason))
        if decision.decision == "skip":
            report.decision = "skip"
            content = clip_output(decision.result, spec.tool_output_limit) if decision.result and spec else None
            return ToolResultPart(id=call.id, name=call.name, content=content or skipped_message(call))
        if decision.result is not None:
            report.decision = "override"
            limit = spec.tool_output_limit if spec else len(decision.result)
            return ToolResultPart(id=call.id, name=call.name, content=clip_output(decision.result, limit))
        report.decision = "approve"
        return None

    async def _await_output(self, gate: ToolGate, report: ToolCallReport) -> ToolResultPart:
        call = gate.call
        started = workflow.now()
        await workflow.wait_condition(lambda: call.id in self._outputs or self._stop is not None)
        report.waited_ms = _ms(workflow.now() - started)
        output = self._outputs.get(call.id)
        self._index()
        if output is None:
            self._actions.pop(call.id, None)
            report.decision = "stopped"
            return _error(call, stopped_message(call))
        report.decision = "client"
        limit = self._spec.spec.tool_output_limit if self._spec else len(output.output)
        return ToolResultPart(id=call.id, name=call.name, content=clip_output(output.output, limit),
                              is_error=output.is_error)

    # Activities --------------------------------------------------------------

    async def _resolve_tools(self, names: list[str]) -> list[ToolDefinition] | FailRun:
        if not names:
            return []
        resolved = await workflow.execute_activity(
            "resolve_tools",
            ResolveToolsInput(names=names),
            result_type=ResolveToolsResult,
            start_to_close_timeout=timedelta(seconds=30),
            summary="resolve tools",
            task_queue=self._tool_queue,
        )
        if resolved.missing:
            return FailRun(
                "error",
                f"AgentSpec.tools names tools this worker does not have: "
                f"{', '.join(resolved.missing)}. Available: {', '.join(resolved.available) or 'none'}. "
                "Register them in a module the worker imports (agentloop worker --import MODULE).",
            )
        return resolved.tools

    async def _call_model(
        self, input: AgentRunInput, tools: list[ToolDefinition], step_report: StepReport
    ) -> CallModelResult | FailRun:
        spec = input.spec
        started = workflow.now()
        transcript = None
        if self._by_reference:
            # The worker fills in messages, system prompt and tools from its
            # cache and this run's queries: history holds each message once.
            request = ModelRequest(
                model=spec.model_name,
                messages=[],
                temperature=spec.temperature,
                max_tokens=spec.max_tokens,
                parallel_tool_calls=spec.parallel_tool_calls,
            )
            transcript = TranscriptRef(
                message_count=len(self._messages),
                transcript_hash=self._transcript_hashes()[-1],
                context_hash=self._model_context.context_hash,
            )
        else:
            request = ModelRequest(
                model=spec.model_name,
                system_prompt=spec.system_prompt,
                messages=list(self._messages),
                tools=tools,
                temperature=spec.temperature,
                max_tokens=spec.max_tokens,
                parallel_tool_calls=spec.parallel_tool_calls,
            )
        try:
            result = await workflow.execute_activity(
                "call_model",
                CallModelInput(
                    run_id=self._run_id,
                    step=self._step,
                    model=spec.model,
                    request=request,
                    stream_deltas=spec.stream_deltas,
                    stream_batch_seconds=spec.stream_batch_seconds,
                    transcript=transcript,
                ),
                result_type=CallModelResult,
                start_to_close_timeout=timedelta(seconds=spec.llm_timeout_seconds),
                heartbeat_timeout=timedelta(seconds=spec.heartbeat_timeout_seconds),
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(seconds=1),
                    backoff_coefficient=2.0,
                    maximum_interval=timedelta(seconds=60),
                    maximum_attempts=spec.llm_max_attempts,
                ),
                cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                summary=f"LLM step {self._step + 1}",
            )
        except ActivityError as err:
            _reraise_cancel(err)
            step_report.llm_latency_ms = _ms(workflow.now() - started)
            cause = err.cause
            detail = cause.message if isinstance(cause, ApplicationError) else str(cause or err)
            if isinstance(cause, ApplicationError) and cause.type == CONTEXT_LENGTH_ERROR_TYPE and self._by_reference:
                return FailRun("context_length", f"LLM step {self._step + 1} failed: {detail}")  # type: ignore[arg-type]
            from temporalio.exceptions import RetryState

            after = ""
            if err.retry_state == RetryState.MAXIMUM_ATTEMPTS_REACHED:
                attempts = spec.llm_max_attempts
                after = f" after {attempts} attempt{'' if attempts == 1 else 's'}"
            return FailRun("error", f"LLM step {self._step + 1} failed{after}: {detail}")
        response = result.response
        step_report.llm_latency_ms = _ms(workflow.now() - started)
        step_report.finish_reason = response.finish_reason
        usage = response.usage + result.failed_attempts_usage if self._by_reference else response.usage
        step_report.usage = self._add_usage(usage, result.attempt if self._by_reference else 1)
        assert self._report is not None
        self._report.total_llm_time_ms += step_report.llm_latency_ms
        return result

    def _add_usage(self, usage: Usage, attempts: int) -> Usage:
        """Count an LLM call's usage; every attempt Temporal made is a request."""
        if attempts > usage.requests:
            usage = usage.model_copy(update={"requests": attempts})
        self._usage = self._usage + usage
        assert self._report is not None
        self._report.total_usage = self._usage
        return usage

    async def _run_tools(
        self, input: AgentRunInput, gates: list[ToolGate], step_report: StepReport
    ) -> list[tuple[ToolResultPart, bool]]:
        """Run (or answer) every call of a step; results in call order, each
        with whether it counts as a failed call."""
        started = workflow.now()
        if input.spec.parallel_tool_calls and len(gates) > 1:
            outcomes = list(await asyncio.gather(*(self._run_tool(input, g, step_report) for g in gates)))
        else:
            outcomes = [await self._run_tool(input, g, step_report) for g in gates]
        # Reports are appended as calls finish; keep them in call order like the results.
        order = {g.call.id: i for i, g in enumerate(gates)}
        step_report.tool_calls.sort(key=lambda r: order.get(r.call_id, len(order)))
        step_report.tool_total_ms = _ms(workflow.now() - started)
        assert self._report is not None
        self._report.total_tool_time_ms += step_report.tool_total_ms
        self._report.tool_call_count += len(gates)
        return outcomes

    async def _run_tool(
        self, input: AgentRunInput, gate: ToolGate, step_report: StepReport
    ) -> tuple[ToolResultPart, bool]:
        spec = input.spec
        call = gate.call
        report = ToolCallReport(call_id=call.id, tool_name=call.name, arguments=call.arguments)
        report.permission = gate.permission.action if gate.permission else None
        started = workflow.now()
        announced = False

        def announce() -> None:
            # After any wait for a decision or an output: "started" means the
            # call is being run or answered now.
            nonlocal announced
            if not announced:
                self._emit(ToolExecutionStarted, call=call)
                announced = True

        def finish(result: ToolResultPart, *, failed: bool, skipped: bool = False) -> tuple[ToolResultPart, bool]:
            announce()
            report.latency_ms = _ms(workflow.now() - started)
            report.result_size_bytes = len(result.content.encode())
            report.error = result.content if result.is_error else None
            report.skipped = skipped
            step_report.tool_calls.append(report)
            self._emit(ToolExecutionCompleted, result=result, ran=not skipped, latency_ms=report.latency_ms)
            return result, failed

        if gate.result is not None:
            # Unknown tool and bad arguments count as failures; a policy denial
            # is an answer the model can work with.
            return finish(gate.result, failed=gate.permission is None, skipped=True)
        if gate.action is not None:
            return finish(await self._await_output(gate, report), failed=False, skipped=True)
        if gate.approval is not None:
            answer = await self._await_approval(gate, report)
            if answer is not None:
                return finish(answer, failed=False, skipped=True)

        timeout = spec.timeout_for(call.name)
        announce()
        self._running_calls[call.id] = call
        try:
            result = await workflow.execute_activity(
                "execute_tool",
                ExecuteToolInput(
                    run_id=self._run_id,
                    step=self._step,
                    call_id=call.id,
                    tool_name=call.name,
                    arguments=call.arguments,
                    workspace=spec.workspace,
                    timeout_seconds=timeout,
                    output_limit=spec.tool_output_limit,
                ),
                result_type=ExecuteToolResult,
                start_to_close_timeout=timedelta(seconds=timeout) + TOOL_TIMEOUT_GRACE,
                heartbeat_timeout=timedelta(seconds=spec.heartbeat_timeout_seconds),
                # Tool failures come back as results; only lost workers and
                # infrastructure errors reach here, and those are worth a retry.
                retry_policy=RetryPolicy(maximum_attempts=spec.tool_max_attempts),
                # A cancelled run ends only once the tool has stopped (its
                # process group killed), so nothing outlives the run.
                cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                summary=f"tool {call.name}",
                task_queue=self._tool_queue,
            )
        except ActivityError as err:
            _reraise_cancel(err)
            cause = err.cause
            detail = cause.message if isinstance(cause, ApplicationError) else str(cause or err)
            return finish(_error(call, f"Tool '{call.name}' could not complete: {detail}"), failed=True)
        finally:
            self._running_calls.pop(call.id, None)
        report.truncated = result.truncated
        report.metrics = result.metrics
        content = ToolResultPart(id=call.id, name=call.name, content=result.content, is_error=result.is_error)
        return finish(content, failed=result.is_error)

    # Bookkeeping -------------------------------------------------------------

    def _transcript_hashes(self) -> list[str]:
        """Chained hashes of the messages (see :mod:`agentloop.transcript`),
        extended for messages appended since the last call."""
        hashes = self._hashes
        if len(hashes) > len(self._messages):
            del hashes[len(self._messages):]
        for message in self._messages[len(hashes):]:
            hashes.append(chain_hash(hashes[-1] if hashes else EMPTY_HASH, message))
        return hashes

    def _replace_messages(self, messages: list[Message]) -> None:
        """Rewrite the transcript (pruning, compaction): hashes start over."""
        self._messages = messages
        self._hashes = []

    def _emit(self, event_type: Any, **fields: Any) -> None:
        """Publish one event on the run's stream."""
        fields.setdefault("step", self._step)
        self._events.publish(event_type(run_id=self._run_id, time=workflow.now(), **fields))

    def _index(self) -> None:
        """Bring status and search attributes up to date with what the run
        waits for, and announce a status change on the event stream."""
        if self._status in ("running", "awaiting_approval", "requires_action"):
            if self._approvals:
                self._status = "awaiting_approval"
            elif self._actions:
                self._status = "requires_action"
            else:
                self._status = "running"
        if self._status != self._announced:
            self._emit(RunStatusChanged, status=self._status, previous=self._announced)
            self._announced = self._status
        if not self._hitl:
            return
        pending = tuple(sorted({a.tool_name for a in self._approvals.values()}
                               | {a.tool_name for a in self._actions.values()}))
        indexed = (self._status, pending)
        if indexed == self._indexed:
            return
        updates = [AGENT_STATUS.value_set(self._status), AGENT_PENDING_TOOLS.value_set(list(pending))]
        if self._indexed is None and self._spec is not None:
            updates += [AGENT_NAME.value_set(self._spec.spec.name), AGENT_MODEL.value_set(self._spec.spec.model)]
        workflow.upsert_search_attributes(updates)
        self._indexed = indexed

    def _report_step(self, step_report: StepReport) -> None:
        assert self._report is not None
        self._report.steps.append(step_report)
        self._report.step_count = len(self._report.steps)

    def _report_final_text(self, text: str) -> None:
        assert self._report is not None
        if text:
            self._report.final_text = text

    def _finish(self, status: RunStatus, reason: RunReason, error: str | None) -> AgentRunResult:
        assert self._report is not None
        # The error travels three times (result, report, a failure's message):
        # bounded, whatever it quotes (a stop reason, every failed call's output).
        error = cut_text(error, MAX_ERROR_CHARS) if error is not None else None
        self._status, self._reason, self._error = status, reason, error
        self._index()
        now = workflow.now()
        self._report.completed_at = now
        self._report.total_ms = _ms(now - self._report.started_at)
        self._report.reason = reason
        self._report.error = error
        added = self._messages[self._input_count :]
        omitted = 0
        report = self._report
        if self._by_reference and sum(len(m.model_dump_json()) for m in added) > RESULT_MESSAGES_LIMIT:
            # They are in history once already; the client fetches them (and
            # the per-step report) by query.
            added, omitted = [], len(added)
            report = report.model_copy(update={"steps": []})
        return AgentRunResult(
            run_id=self._run_id,
            status=status,
            reason=reason,
            final_text=self._report.final_text,
            error=error,
            messages=added,
            messages_omitted=omitted,
            report_steps_omitted=bool(omitted),
            usage=self._usage,
            report=report,
        )

    def _complete(self) -> AgentRunResult:
        result = self._finish("completed", "done", None)
        self._emit(RunCompleted, final_text=result.final_text, usage=self._usage)
        return result

    def _stopped(self) -> AgentRunResult:
        assert self._stop is not None
        # Bounded again: a stop carried from a run of an older version may hold any reason.
        reason = cut_text(self._stop.reason, MAX_REASON_CHARS) if self._stop.reason else None
        note = f"stopped: {reason}" if reason else "stopped by request"
        result = self._finish("stopped", "stopped", note)
        self._emit(RunCompleted, status="stopped", reason="stopped", final_text=result.final_text, usage=self._usage,
                   note=note)
        return result

    def _fail(self, reason: RunReason, message: str) -> AgentRunResult:
        result = self._finish("failed", reason, message)
        message = result.error or message
        self._emit(RunFailed, reason=reason, error=message, usage=self._usage)
        # The run fails in Temporal (so it shows as Failed in the UI and CLI);
        # the full result rides along in the error's details.
        raise ApplicationError(
            f"agent run failed ({reason}): {message}",
            result,
            type=RUN_FAILED_ERROR_TYPE,
            non_retryable=True,
        )


def _error(call: ToolCallPart, content: str) -> ToolResultPart:
    return ToolResultPart(id=call.id, name=call.name, content=content, is_error=True)


def _reraise_cancel(err: ActivityError) -> None:
    """An activity that ended because the run was cancelled ends the run too."""
    if isinstance(err.cause, CancelledError):
        raise asyncio.CancelledError() from err


class _Refusal(ValueError):
    """Why a signal or update payload was refused; ``error_type`` names the
    kind for Temporal (an update's failure type)."""

    def __init__(self, message: str, error_type: str = INVALID_DECISION_ERROR_TYPE) -> None:
        super().__init__(message)
        self.error_type = error_type


def _as_update_error(check: Callable[[], Any]) -> Any:
    """Run a payload check in an update's validator or handler: a refusal
    becomes a non-retryable ApplicationError of its type, so the update fails
    (and `temporal workflow update` says it is not worth retrying), never the
    workflow task."""
    try:
        return check()
    except ValueError as exc:
        raise ApplicationError(
            str(exc), type=getattr(exc, "error_type", INVALID_REQUEST_ERROR_TYPE), non_retryable=True
        ) from None


_EXAMPLES = {
    "approve": '{"call_id": "call_0_0", "decision": "approve"}',
    "submit_tool_outputs": '{"tool_outputs": [{"call_id": "call_0_0", "output": "..."}]}',
    "stop": '{"reason": "..."}',
}

_TOO_LARGE_HINTS = {
    "approve": "send a shorter result (the model sees it cut to the spec's tool_output_limit anyway)",
    "submit_tool_outputs": "send shorter outputs (the model sees each cut to the spec's tool_output_limit anyway)",
}


def _one_payload(name: str, args: tuple[Any, ...]) -> Any:
    """A signal's or update's one argument (None when it has none)."""
    if len(args) > 1:
        raise _Refusal(
            f"{name} takes one JSON object, not {len(args)} inputs; expected e.g. {_EXAMPLES[name]}",
            INVALID_REQUEST_ERROR_TYPE,
        )
    return args[0] if args else None


def _update_payload(name: str, args: tuple[Any, ...]) -> Any:
    """An update's one argument, weighed first: a request over
    MAX_REQUEST_BYTES is refused before anything else is read."""
    size = request_bytes(args[0] if len(args) == 1 else list(args))
    if size > MAX_REQUEST_BYTES:
        raise _Refusal(
            f"the {name} request is {size:,} bytes; a run takes requests of at most {MAX_REQUEST_BYTES:,} "
            f"bytes: {_TOO_LARGE_HINTS[name]}",
            REQUEST_TOO_LARGE_ERROR_TYPE,
        )
    return _one_payload(name, args)


def _listing(ids: Iterable[str], *, quote: bool = False, most: int = 10) -> str:
    """Call ids for a message: each cut to a preview, at most ``most`` of them."""
    ids = list(ids)
    shown = [repr(preview(i)) if quote else preview(i) for i in ids[:most]]
    if len(ids) > most:
        shown.append(f"and {len(ids) - most} more")
    return ", ".join(shown) or "none"


def _parse(model: Any, payload: Any, name: str) -> Any:
    """Validate a signal or update payload, with a message an operator can act on."""
    if isinstance(payload, model):
        return payload
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        raise _Refusal(
            f"malformed {name} payload: {describe_validation_error(exc)}; expected e.g. {_EXAMPLES[name]}",
            INVALID_REQUEST_ERROR_TYPE,
        ) from None


def _transcript_range(args: tuple[Any, ...]) -> TranscriptRange:
    """The ``transcript`` query's argument, bounded: a page is at most
    TRANSCRIPT_PAGE_BYTES (one larger message comes alone)."""
    if len(args) > 1:
        raise ValueError(f"transcript takes one argument, not {len(args)}; expected e.g. {_TRANSCRIPT_EXAMPLE}")
    try:
        wanted = as_range(args[0] if args else None)
    except ValidationError as exc:
        raise ValueError(
            f"malformed transcript request: {describe_validation_error(exc)}; expected e.g. {_TRANSCRIPT_EXAMPLE}"
        ) from None
    return TranscriptRange(start=max(0, wanted.start), max_bytes=min(max(1, wanted.max_bytes), TRANSCRIPT_PAGE_BYTES))


_TRANSCRIPT_EXAMPLE = '{"start": 0, "max_bytes": 1000000}'
