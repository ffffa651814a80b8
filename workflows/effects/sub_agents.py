"""Sub-agents: a delegation call runs the sub-agent as a child workflow
(docs/sub-agents.md).

The child is an ``AgentRunWorkflow`` like any run: its own history, events,
approvals and ops commands. Its id comes from the parent's run id and the
call id (:func:`~agentloop.workflows.decisions.delegation.child_run_id`), so a replay
or a retried task never starts a second child. ``REQUEST_CANCEL`` makes it
follow its parent: cancelling the parent cancels the child and waits until
it (and its running tools) have stopped; ``stop`` on the parent is passed on
as ``stop`` to the children still running. Their final text, or their
failure, is the call's result; their usage and cost join the parent's.

Reached only by runs whose spec has ``sub_agents`` (no run in flight before
this module had one), so it needs no patch marker. Workflow code: the
decisions come from :mod:`~agentloop.workflows.decisions.delegation`.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.common import Priority, SearchAttributePair
from temporalio.exceptions import CancelledError, ChildWorkflowError
from temporalio.workflow import ChildWorkflowHandle, ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    # Pydantic models and pure helpers (see agent_run.py).
    from agentloop.shared.base.contracts import WORKFLOW_NAME
    from agentloop.shared.base.errors import describe_validation_error
    from agentloop.shared.base.messages import ToolCallPart, ToolResultPart
    from agentloop.shared.definition.approvals import StopRequest
    from agentloop.shared.definition.spec import AgentSpec
    from agentloop.shared.runs.events import SubAgentInvocationCompleted, SubAgentInvocationStarted
    from agentloop.shared.runs.report import RunReason, RunStatus, StepReport, SubRunReport, ToolCallReport
    from agentloop.shared.runs.result import AgentRunResult
    from agentloop.shared.runs.run import AgentRunInput, SubRunLink, run_failed_from
    from agentloop.shared.runs.search_attributes import (
        AGENT_PARENT_RUN,
        AGENT_ROOT_RUN,
        AGENT_TENANT,
        start_search_attributes,
    )
    from agentloop.shared.runs.state import LoopState
    from agentloop.workflows.decisions.budgets import check_run_budget
    from agentloop.workflows.decisions.delegation import (
        BadTask,
        ChildCompleted,
        ChildFailed,
        ChildOutcome,
        child_budget,
        child_messages,
        child_run_id,
        child_workspace,
        delegation_result,
        input_problem,
        task_of,
        waiting_on,
    )
    from agentloop.workflows.decisions.tool_messages import error_result, stopped_message
    from agentloop.workflows.effects.recorder import RunRecorder


class SubAgentRunner:
    """Runs a run's delegation calls as child workflows.

    Args:
        state: The run's state (conversation, usage, stop, report).
        recorder: For the delegation events.
        run_id: The run id.
        input: The run's input (``parent`` says where it sits in its tree).
    """

    def __init__(self, state: LoopState, recorder: RunRecorder, run_id: str, input: AgentRunInput) -> None:
        self.state = state
        self.recorder = recorder
        self.run_id = run_id
        self.link = input.parent
        self.top_spec = input.spec
        self.tenant = input.tenant

    async def delegate(
        self, spec: AgentSpec, call: ToolCallPart, report: ToolCallReport, step_report: StepReport
    ) -> tuple[ToolResultPart, bool]:
        """Run the sub-agent ``call`` names and wait for it: its result, and
        whether it counts as a failed call (only a call without a task does)."""
        task = task_of(call)
        if isinstance(task, BadTask):
            return error_result(call, task.message), True
        if self.state.stop is not None:
            return error_result(call, stopped_message(call)), False
        sub = spec.sub_agents[call.name]
        try:
            child = self._child_input(spec, call, task.text)
        except ValueError as err:  # e.g. a grandchild's model unpriced under a cost limit
            problem = describe_validation_error(err)
            return error_result(call, f"The sub-agent '{call.name}' cannot start: {problem}"), False
        if (too_large := input_problem(call.name, child)) is not None:
            return error_result(call, too_large), False
        child_id = report.sub_run_id = child_run_id(self.run_id, call.id)
        sub_report = SubRunReport(name=call.name, run_id=child_id, call_id=call.id, step=self.state.step)
        self.state.report.sub_runs.append(sub_report)
        self.recorder.emit(SubAgentInvocationStarted, call_id=call.id, name=call.name, child_run_id=child_id,
                           task=task.text, history=sub.history)
        self._running(call.id, (call.name, child_id))
        try:
            outcome, result = await self._run_child(child_id, child, f"{call.name} for {self.run_id}")
        finally:
            self._running(call.id, None)
        self._account(sub_report, step_report, outcome, result)
        self.recorder.emit(SubAgentInvocationCompleted, call_id=call.id, name=call.name, child_run_id=child_id,
                           status=sub_report.status, reason=sub_report.reason, usage=sub_report.usage,
                           cost_usd=sub_report.cost_usd, error=sub_report.error,
                           final_text=result.final_text if result else "")
        return delegation_result(call, child_id, outcome), False

    def _child_input(self, spec: AgentSpec, call: ToolCallPart, task: str) -> AgentRunInput:
        """The child's spec (budget cut to what remains of the tree's), its
        messages and its place in the tree."""
        sub, state = spec.sub_agents[call.name], self.state
        cost = check_run_budget(state.usage, spec, sub_usage=state.sub_usage, sub_cost_usd=state.sub_cost_usd).cost_usd
        budget = child_budget(spec, state.usage, cost, sub.spec)
        link = SubRunLink(
            parent_run_id=self.run_id,
            root_run_id=self.link.root_run_id if self.link else self.run_id,
            name=call.name, call_id=call.id,
            depth=self.link.depth + 1 if self.link else 1,
            max_depth=self.link.max_depth if self.link else self.top_spec.max_depth,
        )
        workspace = child_workspace(spec.workspace, sub.spec.workspace)
        return AgentRunInput(spec=sub.spec.model_copy(update={"budget": budget, "workspace": workspace}),
                             messages=child_messages(sub, state.messages, task), parent=link, tenant=self.tenant)

    async def _run_child(
        self, child_id: str, child: AgentRunInput, summary: str
    ) -> tuple[ChildOutcome, AgentRunResult | None]:
        """Start the child, pass a stop on, wait for its end."""
        attributes = start_search_attributes(child.spec)
        assert child.parent is not None
        attributes = attributes.updated(SearchAttributePair(AGENT_PARENT_RUN, child.parent.parent_run_id),
                                        SearchAttributePair(AGENT_ROOT_RUN, child.parent.root_run_id))
        if child.tenant is not None:
            attributes = attributes.updated(SearchAttributePair(AGENT_TENANT, child.tenant))
        # The child inherits the run's Priority (tenant as fairness key);
        # a sub-agent whose spec sets a priority of its own runs at that one.
        priority = Priority(priority_key=child.spec.priority) if child.spec.priority else Priority.default
        try:
            handle = await workflow.start_child_workflow(
                WORKFLOW_NAME, child, id=child_id, result_type=AgentRunResult,
                parent_close_policy=ParentClosePolicy.REQUEST_CANCEL, search_attributes=attributes,
                static_summary=summary, priority=priority)
        except Exception as err:  # e.g. the id is taken by a run still open
            return ChildFailed("failed", "error", f"the sub-agent's run could not start: {err}"), None
        watcher = asyncio.create_task(self._pass_stop_on(handle))
        try:
            result = await handle
            return ChildCompleted(result.status, result.final_text, result.error), result
        except ChildWorkflowError as err:
            if isinstance(err.cause, CancelledError) and workflow.cancellation_reason() is not None:
                raise asyncio.CancelledError("the run was cancelled") from err
            failed = run_failed_from(child_id, err.cause or err)
            status: RunStatus = "cancelled" if failed.reason == "cancelled" else "failed"
            # run_failed_from's reason: the run's result's, else "cancelled" or "error".
            reason: RunReason = (failed.result.reason if failed.result
                                 else "cancelled" if failed.reason == "cancelled" else "error")
            message = failed.result.error if failed.result and failed.result.error else str(failed)
            return ChildFailed(status, reason, message), failed.result
        finally:
            if not watcher.done():
                watcher.cancel()

    async def _pass_stop_on(self, handle: ChildWorkflowHandle) -> None:
        """Once the run is asked to stop, ask the child too (it stops after its current step)."""
        await workflow.wait_condition(lambda: self.state.stop is not None)
        reason = self.state.stop.reason if self.state.stop else None
        try:
            await handle.signal("stop", StopRequest(reason=f"the parent run {self.run_id} was stopped"
                                                    + (f": {reason}" if reason else "")))
        except Exception as err:  # the child ended meanwhile
            workflow.logger.info("stop not passed on to %s: %s", handle.id, err)

    def _account(self, sub_report: SubRunReport, step_report: StepReport, outcome: ChildOutcome,
                 result: AgentRunResult | None) -> None:
        """The child's end, usage and cost join the run's report and totals."""
        sub_report.status = outcome.status
        sub_report.reason = result.reason if result else getattr(outcome, "reason", None)
        if isinstance(outcome, ChildFailed):
            sub_report.error = outcome.message
        if result is None:
            return
        sub_report.usage = result.usage
        sub_report.cost_usd = result.report.total_cost_usd
        self.state.add_sub_usage(result.usage, sub_report.cost_usd)
        step_report.sub_agent_usage = step_report.sub_agent_usage + result.usage
        step_report.sub_agent_cost_usd += sub_report.cost_usd or 0.0

    def _running(self, call_id: str, entry: tuple[str, str] | None) -> None:
        """Keep the list of children under way, and the run's current details, current."""
        if entry is None:
            self.state.running_subs.pop(call_id, None)
        else:
            self.state.running_subs[call_id] = entry
        workflow.set_current_details(waiting_on(self.state.running_subs) if self.state.running_subs else "")
