"""Running one step's tool calls: each as it was gated (answered, executed,
asked of an operator, or sent to the client), in parallel when the spec
allows, results in call order.

Workflow code: the waits are ``workflow.wait_condition``, the calls
``execute_tool`` activities; what a decision or an output means comes from
:mod:`agentloop.workflows.decisions`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from temporalio import workflow
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    # Pydantic models and pure helpers (see agent_run.py).
    from agentloop.shared.base.messages import ToolCallPart, ToolResultPart
    from agentloop.shared.definition.activity_io import TOOLS_NOT_HERE_ERROR_TYPE, ExecuteToolInput
    from agentloop.shared.definition.approvals import ToolGate
    from agentloop.shared.definition.spec import AgentSpec
    from agentloop.shared.runs.eval_tools import EvalPlan, FromRecording, Refused, eval_approval, eval_tool_answer
    from agentloop.shared.runs.events import ApprovalResolved, ToolExecutionStarted
    from agentloop.shared.runs.report import StepReport, ToolCallReport, cut_strings, wait_within
    from agentloop.shared.runs.state import LoopState
    from agentloop.workflows.decisions.tool_gates import (
        Answered,
        AskApproval,
        AwaitClient,
        Resolution,
        decision_of,
        resolve_approval,
        resolve_output,
    )
    from agentloop.workflows.decisions.tool_messages import error_result
    from agentloop.workflows.effects import activity_calls as calls
    from agentloop.workflows.effects.activity_tools import activity_tool_named, run_activity_tool
    from agentloop.workflows.effects.recorder import RunRecorder, ms
    from agentloop.workflows.patches import Features


@dataclass(frozen=True)
class StepGates:
    """A step whose model asked for tools: its calls, gated, and its report."""

    gates: list[ToolGate]
    report: StepReport


#: Runs one delegation call: (spec, call, its report, the step's report) -> (result, failed).
Delegate = Callable[[AgentSpec, ToolCallPart, ToolCallReport, StepReport], Awaitable[tuple[ToolResultPart, bool]]]


class ToolRunner:
    """Runs the tool calls of a run's steps.

    Args:
        state: The run's state (pending calls, decisions, outputs).
        recorder: For the calls' events and reports.
        run_id: The run id.
        features: What the run does (its tools queue, approval clock).
        delegate: Runs a call to a sub-agent (``SubAgentRunner.delegate``);
            None for a run without sub-agents.
    """

    def __init__(self, state: LoopState, recorder: RunRecorder, run_id: str, features: Features,
                 delegate: Delegate | None = None) -> None:
        self.state = state
        self.recorder = recorder
        self.run_id = run_id
        self.features = features
        self.delegate = delegate
        #: Why an ``on_tool_error`` hook ended the run, once one did.
        self.end_run: str | None = None
        #: ``execute_tool`` calls go to the run's own queue (see :meth:`run_beside`).
        self.beside = False
        #: Tools called as local activities while :attr:`beside` holds.
        self.local: frozenset[str] = frozenset()
        #: An eval's case run: its recorded calls and tool policies (docs/evals.md).
        self.eval: EvalPlan | None = None
        #: The tools the run resolved that are read-only (for ``live-read-only``).
        self.read_only: frozenset[str] = frozenset()
        #: Recorded calls already answered (each is used once).
        self.used_recorded: set[int] = set()

    def run_beside(self, runs_queue: str | None, local_tools: list[str] | None = None) -> None:
        """Send ``execute_tool`` calls to the run's own queue when the worker
        that resolved the tools said it serves them there (``runs_queue``,
        recorded in history with ``resolve_tools``' result), and call its
        ``local_tools`` as local activities there. Decided by history alone:
        a replay's worker may poll a queue of another name."""
        self.beside = self.features.tool_queue is not None and runs_queue is not None
        self.local = frozenset(local_tools or ()) if self.beside else frozenset()

    async def run_step(self, spec: AgentSpec, step: StepGates) -> list[tuple[ToolResultPart, bool]]:
        """Run (or answer) every call of a step: results in call order, each
        with whether it counts as a failed call."""
        started, gates = workflow.now(), step.gates
        if spec.parallel_tool_calls and len(gates) > 1:
            results = list(await asyncio.gather(*(self._run_tool(spec, g, step.report) for g in gates)))
        else:
            results = [await self._run_tool(spec, g, step.report) for g in gates]
        # Reports are appended as calls finish; keep them in call order like the results.
        order = {g.call.id: i for i, g in enumerate(gates)}
        step.report.tool_calls.sort(key=lambda r: order.get(r.call_id, len(order)))
        step.report.tool_total_ms = ms(workflow.now() - started)
        step.report.approval_wait_ms = wait_within(step.report, parallel=spec.parallel_tool_calls and len(gates) > 1)
        # Tool time is the tools' own: the waits for a person (or the client) are counted apart.
        self.state.report.total_tool_time_ms += step.report.tool_total_ms - step.report.approval_wait_ms
        self.state.report.total_approval_wait_ms += step.report.approval_wait_ms
        self.state.report.tool_call_count += len(gates)
        return results

    async def _run_tool(self, spec: AgentSpec, gate: ToolGate, step_report: StepReport) -> tuple[ToolResultPart, bool]:
        call, started = gate.call, workflow.now()
        arguments, cut = cut_strings(call.arguments)
        report = ToolCallReport(call_id=call.id, tool_name=call.name, arguments=arguments, arguments_cut=cut,
                                permission=gate.permission.action if gate.permission else None)
        match decision_of(gate):
            case Answered(result, failed):
                return self._tool_done(call, step_report, report, result, failed=failed, started=started)
            case AwaitClient():
                result = await self._await_output(spec, call, report)
                return self._tool_done(call, step_report, report, result, failed=False, started=started)
            case AskApproval() if self.eval is not None:
                resolution = self._eval_approval(spec, gate, report)
                if resolution is not None and resolution.result is not None:
                    return self._tool_done(call, step_report, report, resolution.result, failed=False, started=started)
            case AskApproval():
                resolution = await self._await_approval(spec, gate, report)
                if resolution.result is not None:
                    return self._tool_done(call, step_report, report, resolution.result, failed=False, started=started)
        if self.eval is not None:
            match eval_tool_answer(call, self.eval, used=self.used_recorded, read_only=call.name in self.read_only):
                case FromRecording(index, result):
                    self.used_recorded.add(index)
                    report.eval_answer = "recorded"
                    return self._tool_done(call, step_report, report, result, failed=result.is_error,
                                           started=started)
                case Refused(result):
                    report.eval_answer = "refused"
                    return self._tool_done(call, step_report, report, result, failed=False, started=started)
            report.eval_answer = "live"
        # After any wait for a decision: "started" means the call runs now.
        self.recorder.emit(ToolExecutionStarted, call=call)
        if self.delegate is not None and call.name in spec.sub_agents:
            result, failed = await self.delegate(spec, call, report, step_report)
        elif (activity_tool := activity_tool_named(spec, call.name)) is not None:
            self.state.running_calls[call.id] = call
            try:
                result, failed = await run_activity_tool(
                    activity_tool, spec, call, self.state.step, report, tools_queue=self.features.tool_queue,
                    end_run=lambda reason: self._hook_ended_run(call.name, reason))
            finally:
                self.state.running_calls.pop(call.id, None)
        else:
            result, failed = await self._execute(spec, call, report)
        self.recorder.tool_finished(step_report, report, result, ran=True, started=started)
        return result, failed

    def _hook_ended_run(self, tool_name: str, reason: str) -> None:
        self.end_run = f"a tool hook ended the run after {tool_name} failed: {reason}"

    def _tool_done(self, call: ToolCallPart, step_report: StepReport, report: ToolCallReport, result: ToolResultPart,
                   *, failed: bool, started: Any) -> tuple[ToolResultPart, bool]:
        """A call answered without running (policy, operator, client)."""
        self.recorder.emit(ToolExecutionStarted, call=call)
        self.recorder.tool_finished(step_report, report, result, ran=False, started=started)
        return result, failed

    async def _execute(
        self, spec: AgentSpec, call: ToolCallPart, report: ToolCallReport
    ) -> tuple[ToolResultPart, bool]:
        input = ExecuteToolInput(run_id=self.run_id, step=self.state.step, call_id=call.id, tool_name=call.name,
                                 arguments=call.arguments, workspace=spec.workspace,
                                 timeout_seconds=spec.timeout_for(call.name), output_limit=spec.tool_output_limit,
                                 hooks=spec.tool_hooks, agent_name=spec.name, model=spec.model)
        beside = self.beside  # parallel calls may change it while this one runs
        here = beside and call.name in self.local
        options = calls.tool_call_options(spec, call.name, None if beside else self.features.tool_queue,
                                          beside=beside)
        self.state.running_calls[call.id] = call
        try:
            if here:
                result = await calls.execute_tool_here(input, options, f"tool {call.name}")
            else:
                result = await calls.execute_tool(input, options, f"tool {call.name}")
        except FailureError as err:  # an ActivityError, or a local activity's failure itself
            calls.reraise_cancel(err)
            if beside and calls.failure_type(err) in (calls.NOT_REGISTERED_ERROR_TYPE, TOOLS_NOT_HERE_ERROR_TYPE):
                # A worker without the tools runs the run now (role models,
                # since the run began): the tools queue from here on.
                self.beside, self.local = False, frozenset()
                return await self._execute(spec, call, report)
            return error_result(call, f"Tool '{call.name}' could not complete: {calls.failure_detail(err)}"), True
        finally:
            self.state.running_calls.pop(call.id, None)
        report.truncated = result.truncated
        report.metrics = cut_strings(result.metrics)[0]
        if result.end_run is not None:
            self.end_run = f"a tool hook ended the run after {call.name} failed: {result.end_run}"
        content = ToolResultPart(id=call.id, name=call.name, content=result.content, is_error=result.is_error,
                                 images=result.images)
        return content, result.is_error

    def _eval_approval(self, spec: AgentSpec, gate: ToolGate, report: ToolCallReport) -> Resolution | None:
        """An eval answers an approval with the recorded decision, when one
        matches; None lets the call go on to its tool policy."""
        assert self.eval is not None
        decision = eval_approval(gate.call, self.eval)
        self.state.approvals.pop(gate.call.id, None)
        if decision is None:
            self.recorder.emit(ApprovalResolved, call_id=gate.call.id, by="eval (tool policy)", reason=None,
                               decision="approve", waited_ms=0.0)
            self.recorder.index()
            return None
        resolution = resolve_approval(gate.call, decision, spec=spec)
        self.recorder.emit(ApprovalResolved, call_id=gate.call.id, by=resolution.by, reason=resolution.reason,
                           decision=decision.decision, waited_ms=0.0)
        self.recorder.index()
        report.decision, report.decided_by = resolution.label, resolution.by
        if resolution.result is not None:
            report.eval_answer = "recorded"
        return resolution

    async def _await_approval(self, spec: AgentSpec, gate: ToolGate, report: ToolCallReport) -> Resolution:
        """Wait for the operator's decision, the approval timeout, or a stop."""
        call, state, started = gate.call, self.state, workflow.now()
        timeout = spec.approval_timeout_seconds
        if timeout and gate.approval and gate.approval.expires_at is not None and self.features.by_reference:
            # The clock started when the call was asked about (as `pending`
            # shows), not when its turn came in a sequential step.
            timeout = max(0.0, (gate.approval.expires_at - started).total_seconds())
        try:
            await workflow.wait_condition(
                lambda: call.id in state.decisions or state.stop is not None or self.features.cancel_requested(),
                timeout=timeout, timeout_summary=f"approval timeout {call.name}" if timeout else None)
            self.features.raise_if_cancelled()
            timed_out = False
        except TimeoutError:
            timed_out = True
        report.waited_ms = ms(workflow.now() - started)
        decision = None if timed_out else state.decisions.get(call.id)
        resolution = resolve_approval(call, decision, spec=spec, timed_out=timed_out)
        state.approvals.pop(call.id, None)
        if timed_out:
            state.mark_answered(call.id)
        self.recorder.emit(ApprovalResolved, call_id=call.id, by=resolution.by, reason=resolution.reason,
                           decision=decision.decision if decision else resolution.label, waited_ms=report.waited_ms)
        self.recorder.index()
        report.decision, report.decided_by = resolution.label, resolution.by
        return resolution

    async def _await_output(self, spec: AgentSpec, call: ToolCallPart, report: ToolCallReport) -> ToolResultPart:
        """Wait for the client's output, or a stop."""
        state, started = self.state, workflow.now()
        await workflow.wait_condition(
            lambda: call.id in state.outputs or state.stop is not None or self.features.cancel_requested())
        self.features.raise_if_cancelled()
        report.waited_ms = ms(workflow.now() - started)
        output = state.outputs.get(call.id)
        self.recorder.index()
        if output is None:
            state.actions.pop(call.id, None)
        report.decision = "client" if output is not None else "stopped"
        return resolve_output(call, output, spec=spec)
