"""One LLM step of an agent run: context, guardrails, the model call, and
what the decisions say to do next (:class:`LlmSteps`, a base of
:class:`~agentloop.workflows.agent_run.AgentRunWorkflow`). Deterministic,
like all of ``agentloop.workflows``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    # Pydantic models and pure helpers: no side effects at import, and passing
    # them through keeps one class identity for the data converter.
    from agentloop.shared.base.errors import MODEL_CONTEXT_LENGTH_ERROR_TYPE
    from agentloop.shared.base.messages import Message
    from agentloop.shared.definition.activity_io import (
        CallModelResult,
        ModelResponse,
        ResolveToolsInput,
        ResolveToolsResult,
        ToolDefinition,
    )
    from agentloop.shared.definition.approvals import ToolGate
    from agentloop.shared.definition.context_window import make_anchor
    from agentloop.shared.definition.guardrails import GuardrailStage, messages_to_check
    from agentloop.shared.definition.lanes import lane_of, lane_wait
    from agentloop.shared.definition.spec import AgentSpec
    from agentloop.shared.runs.eval_tools import gates_that_wait
    from agentloop.shared.runs.events import (
        ApprovalRequested,
        MessageCompleted,
        MessageCreated,
        RequiresAction,
        ToolCallCompletedByLLM,
        message_id,
    )
    from agentloop.shared.runs.report import StepReport
    from agentloop.shared.runs.state import PendingStep
    from agentloop.shared.runs.transcripts import ModelContext, context_hash
    from agentloop.workflows.decisions.budgets import OverBudget, check_run_budget
    from agentloop.workflows.decisions.next_step import (
        FailRun,
        FinalAnswer,
        NextStep,
        RequireAction,
        RunTools,
        decide_next_step,
    )
    from agentloop.workflows.decisions.output import (
        RetryOutput,
        TypedAnswer,
        decide_output,
    )
    from agentloop.workflows.decisions.tool_gates import gate_calls
    from agentloop.workflows.effects import activity_calls as calls
    from agentloop.workflows.effects.recorder import ms
    from agentloop.workflows.effects.tool_calls import StepGates
    from agentloop.workflows.run_handlers import RunHandlers

if TYPE_CHECKING:
    from agentloop.workflows.effects.context_window import ContextKeeper, RunContext
    from agentloop.workflows.effects.guardrails import GuardrailRunner


@dataclass(frozen=True)
class ContextTooLong:
    """The provider refused the step's request as longer than the model's window."""

    message: str


class LlmSteps(RunHandlers):
    """One LLM step and what follows it; the loop that calls it is in
    :class:`~agentloop.workflows.agent_run.AgentRunWorkflow`."""

    # Set by AgentRunWorkflow.run before the first step.
    _keeper: ContextKeeper
    _context: RunContext | None
    _guards: GuardrailRunner | None
    #: An eval's case run whose approvals are answered before they wait (patch agentloop-eval-approval-1).
    _eval_approvals = False

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
        self._take_response(result.response, msg_id, report)
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
        (:func:`~agentloop.workflows.decisions.output.decide_output`); None when
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
        self._state.wait_for(gates_that_wait(gates, eval_run=self._eval_approvals))
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
                                       by_reference=self._features.by_reference, seed=self._features.lean,
                                       tenant=self._input.tenant if self._input is not None else None)
        try:
            result = await calls.call_model(input, calls.model_call_options(spec, self._features.model_queue(spec)),
                                          f"LLM step {step}")
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
        self._note_lane_wait(spec, report, result)
        return result

    def _note_lane_wait(self, spec: AgentSpec, report: StepReport, result: CallModelResult) -> None:
        """How long the call waited in its provider lane, in the step's and the run's report."""
        lane = lane_of(spec.model, spec.lane) if self._features.lanes else None
        if lane is None or result.queue_wait_ms is None:
            return
        report.lane, report.lane_wait_ms = lane, round(result.queue_wait_ms, 0)
        self._state.report.total_lane_wait_ms += report.lane_wait_ms
        if lane_wait(lane, result.queue_wait_ms) is not None:
            self._state.report.lane_waits += 1

    def _take_response(self, response: ModelResponse, msg_id: str, report: StepReport) -> None:
        """The assistant message joins the conversation and is announced
        (with the wait in its lane, when it waited there)."""
        state = self._state
        tokens = response.usage.input_tokens
        state.anchor = make_anchor(state.messages, tokens) if tokens else None
        state.messages.append(response.message)
        if response.message.text:
            state.report.final_text = response.message.text
        if not response.message.tool_calls:
            state.end_step_here()  # a step without tool calls ends with its answer
        waited = lane_wait(report.lane, report.lane_wait_ms)
        self._recorder.emit(MessageCompleted, message_id=msg_id, message=response.message, usage=response.usage,
                            finish_reason=response.finish_reason, lane=report.lane if waited else None,
                            lane_wait_ms=waited)
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
