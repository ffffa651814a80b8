"""AgentRunWorkflow: one agent run, durable.

Each LLM step and each tool call is an activity; Temporal's event history is
the checkpoint, so a run survives worker crashes and restarts. The run is an
interpreter over one :class:`~agentloop.shared.runs.state.LoopState`: the pure
functions of :mod:`agentloop.workflows.decisions` decide, this class
matches on their answers and does the I/O (activities, waits, continue-as-new),
and a :class:`~agentloop.workflows.effects.recorder.RunRecorder` publishes what
happened. Deterministic: no I/O, clocks or randomness, only ``workflow.now()``.
"""

from __future__ import annotations

import asyncio
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from agentloop.shared.base import contracts
    from agentloop.shared.base.errors import (
        INVALID_INPUT_ERROR_TYPE,
        RUN_FAILED_ERROR_TYPE,
        TOOL_DEFINITION_ERROR_TYPE,
    )
    from agentloop.shared.base.hooks import missing_hooks_message
    from agentloop.shared.base.model_settings import tool_choice_problem
    from agentloop.shared.base.text import cut

    # Pydantic models and pure helpers: no side effects at import, and passing
    # them through keeps one class identity for the data converter.
    from agentloop.shared.definition.activity_io import ResolveToolsInput, ToolDefinition
    from agentloop.shared.definition.approvals import MAX_REASON_CHARS
    from agentloop.shared.definition.context_providers import agents_md_layer
    from agentloop.shared.definition.fingerprint import DefinitionChange, agent_definition, definition_change
    from agentloop.shared.definition.spec import AgentSpec
    from agentloop.shared.runs.events import RunCreated, RunFailed
    from agentloop.shared.runs.report import RunReason
    from agentloop.shared.runs.result import AgentRunResult
    from agentloop.shared.runs.snapshots import restores_completed
    from agentloop.shared.runs.state import PendingStep
    from agentloop.shared.runs.transcripts import ModelContext, context_hash
    from agentloop.workflows.decisions.delegation import sub_agent_tools
    from agentloop.workflows.decisions.next_step import (
        Continue,
        FailRun,
        FinalAnswer,
        Stopped,
        Verify,
        count_failed_steps,
        decide_after_tools,
    )
    from agentloop.workflows.decisions.output import (
        RetryOutput,
        final_result_tool,
        output_mode,
    )
    from agentloop.workflows.decisions.tool_messages import missing_tools_message
    from agentloop.workflows.effects import activity_calls as calls
    from agentloop.workflows.effects import snapshots
    from agentloop.workflows.effects.context_window import (
        ContextKeeper,
        RunContext,
        system_prompt_with,
        wants_context,
    )
    from agentloop.workflows.effects.guardrails import GuardrailRunner
    from agentloop.workflows.effects.handover import Handover
    from agentloop.workflows.effects.quotas import QuotaKeeper
    from agentloop.workflows.effects.sub_agents import SubAgentRunner
    from agentloop.workflows.effects.threads import apply_steering
    from agentloop.workflows.effects.tool_calls import StepGates, ToolRunner
    from agentloop.workflows.llm_step import LlmSteps
    from agentloop.workflows.patches import (
        EVAL_APPROVAL_PATCH,
        EVAL_PATCH,
        QUOTA_CANCEL_PATCH,
        QUOTA_PATCH,
        RESTORED_COMPLETED_PATCH,
        TYPED_OUTPUT_PATCH,
        Features,
    )
    from agentloop.workflows.workflow_sandbox import workflow_sandbox_from_env


def definition_of(spec: AgentSpec, origin: Any) -> tuple[str, DefinitionChange | None]:
    """The run's fingerprint, and (a run from a snapshot) how its definition
    differs from the snapshot's. Pure: no commands."""
    definition = agent_definition(spec)
    before = origin.definition if origin is not None else None
    return definition.fingerprint, definition_change(before, definition) if before is not None else None


# Deterministic by construction and checked under the sandbox by the test
# suite; run without it unless AGENTLOOP_WORKFLOW_SANDBOX says otherwise.
# Pinned on a versioned worker by the worker's default (agentloop.workers.worker.deployment_config):
# a behaviour named here would be refused by unversioned workers' servers.
@workflow.defn(name=contracts.WORKFLOW_NAME, sandboxed=workflow_sandbox_from_env())
class AgentRunWorkflow(LlmSteps):
    """The agent loop: step, decide, run tools, repeat (docs/how-a-run-works.md)."""

    # The loop --------------------------------------------------------------------------

    @workflow.run
    async def run(self, *args: Any) -> AgentRunResult:
        if self._input is None:
            self._refuse_input()
        self._features = Features.of_this_run()
        spec = self._input.spec
        self._recorder.configure(search_attributes=self._features.hitl, name=spec.name, model=spec.model,
                                 trust_start_attributes=self._features.lean)
        self._keeper = ContextKeeper(self._state, self._recorder, spec, self._features.model_queue(spec))
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
        # Only runs with a tenant reserve from its quota.
        tenant = self._input.tenant
        self._quota = (QuotaKeeper(self._state, self._recorder, self._run_id, tenant, spec)
                       if tenant and workflow.patched(QUOTA_PATCH) else None)
        if self._input.carry is None:
            version, change = definition_of(spec, self._input.origin)
            self._state.report.agent_version, self._state.report.definition_change = version, change
            self._recorder.emit(RunCreated, agent_name=spec.name, model=spec.model, input=list(self._input.messages),
                                agent_version=version, definition_change=change)
        if self._input.origin is not None and self._input.carry is None:
            snapshots.announce_pending(self._state, self._recorder)
        self._recorder.index()
        if spec.output is not None:
            workflow.patched(TYPED_OUTPUT_PATCH)  # typed answers: decided by agentloop.workflows.decisions.output
        if self._input.eval is not None and workflow.patched(EVAL_PATCH):
            self._tools.eval = self._input.eval  # a case of an eval: its tool policies (docs/evals.md)
            self._recorder.tally_eval = True  # its result carries what the eval's checks need, whatever its size
            self._eval_approvals = workflow.patched(EVAL_APPROVAL_PATCH)  # its approvals never wait
        try:
            return await self._loop(spec)
        except asyncio.CancelledError:
            self._recorder.cancelled()
            if self._quota is not None and self._quota.holds() and workflow.patched(QUOTA_CANCEL_PATCH):
                await self._quota.release()  # what the cancelled run reserved goes back to its tenant now
            raise

    async def _loop(self, spec: AgentSpec) -> AgentRunResult:
        run_input = self._input
        assert run_input is not None  # run() refused a run without one before its loop
        if (run_input.carry is None and restores_completed(run_input)
                and workflow.patched(RESTORED_COMPLETED_PATCH)):
            # A completed run, restored without a new message: completed, at
            # once (decided before any activity, so its marker comes first).
            self._state.report.final_text = run_input.messages[-1].text
            return self._recorder.completed(omit_long=self._features.by_reference)
        tools = await self._prepare(spec)
        if self._threads is not None:
            # A thread: turn after turn, waiting for messages in between.
            self._threads.index_thread()
            result = await self._threads.run(lambda turn_spec: self._steps(turn_spec, tools),
                                             ended=self._end_stopped, hand_over=lambda: self._handover.when_due(None),
                                             upgrade=self._handover.upgrade)
            if self._quota is not None:
                await self._quota.release()
            return result
        outcome = await self._steps(spec, tools)
        if self._quota is not None:
            await self._quota.release()  # what the run did not use goes back to its tenant
        match outcome:
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
                if self._quota is not None and (out_of_quota := await self._quota.before_step()) is not None:
                    return out_of_quota
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
            failed_steps = count_failed_steps([f for _, f in results], self._state.failed_tool_steps)
            self._state.finish_step(results, failed_steps=failed_steps)
            if self._tools.end_run is not None:
                return FailRun("tool_error", self._tools.end_run)
            over_budget = self._tree_over_budget(spec) if spec.sub_agents else None
            if over_budget is not None:
                return over_budget
            match decide_after_tools([r for r, _ in results], spec=spec, step=self._state.step,
                                     failed_tool_steps=failed_steps, stop_requested=self._state.stop is not None):
                case Continue():
                    continue
                case Stopped() | FailRun() as end:
                    return end

    async def _prepare(self, spec: AgentSpec) -> list[ToolDefinition]:
        """Resolve the spec's tools (a run naming tools the worker lacks fails)
        and fix what every LLM request of the run carries."""
        run_input = self._input
        assert run_input is not None  # run() refused a run without one before preparing it
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
            missing = snapshots.unexpected_missing(resolved.missing, run_input.origin, self._state)
            if missing:
                self._fail("error", missing_tools_message(missing, resolved.available))
            tools = resolved.tools
            self._tools.read_only = frozenset(t.name for t in tools if t.read_only)
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
            failed = await self._context.at_start(fresh=run_input.carry is None)
            if failed is not None:
                self._fail(failed.reason, failed.message)
            self._context.run_layers = layers = [*layers, *self._context.run_layers]
        if self._context is not None or layers:
            system_prompt = system_prompt_with(spec, layers)
        self._model_context = ModelContext(system_prompt=system_prompt, tools=model_tools,
                                           context_hash=context_hash(system_prompt, model_tools))
        self._keeper.use(self._model_context)
        if run_input.carry is None:
            snapshots.note_tool_changes(run_input.origin, [t.name for t in model_tools], self._state, self._recorder)
        return tools

    # The end ----------------------------------------------------------------------------------

    def _end_stopped(self) -> AgentRunResult:
        assert self._state.stop is not None
        # Bounded again: a stop carried from a run of an older version may hold any reason.
        reason = cut(self._state.stop.reason, MAX_REASON_CHARS) if self._state.stop.reason else None
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
