"""Calling an activity-tool: the activity itself, on its own task queue
(docs/tools.md). Workflow code; the pure parts (arguments,
idempotency key, result text) are :mod:`agentloop.shared.definition.activity_tools`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Literal

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from agentloop.shared.base import contracts
    from agentloop.shared.base.hooks import RunToolHooksInput, ToolHookDecision
    from agentloop.shared.base.messages import CUT_HINT, ToolCallPart, ToolResultPart
    from agentloop.shared.base.text import cut_marked
    from agentloop.shared.definition.activity_tools import (
        ActivityTool,
        activity_arguments,
        argument_problems,
        call_idempotency_key,
        result_text,
    )
    from agentloop.shared.definition.spec import AgentSpec
    from agentloop.shared.runs.report import ToolCallReport, cut_strings
    from agentloop.workflows.decisions.tool_messages import error_result
    from agentloop.workflows.effects import activity_calls as calls
    from agentloop.workflows.patches import ACTIVITY_TOOL_ARGUMENTS_PATCH, ACTIVITY_TOOL_HOOKS_PATCH


def activity_tool_named(spec: AgentSpec, name: str) -> ActivityTool | None:
    """The spec's activity-tool called ``name``, or None."""
    return next((t for t in spec.activity_tools if t.name == name), None)


async def run_activity_tool(tool: ActivityTool, spec: AgentSpec, call: ToolCallPart, step: int,
                            report: ToolCallReport, *, tools_queue: str | None = None,
                            end_run: Callable[[str], None] | None = None) -> tuple[ToolResultPart, bool]:
    """Schedule the tool's activity on its queue and wait: its return value,
    or its failure (after its retries), is the call's result. With
    ``spec.tool_hooks``, the hooks run first (in a ``run_tool_hooks``
    activity on ``tools_queue``) and may skip the call or give its result;
    after a failure they may give a fallback or end the run (``end_run``)."""
    info = workflow.info()
    key = call_idempotency_key(info.workflow_id, info.run_id, step, call.id)
    # Runs that started before hooks applied to activity-tools replay without them.
    hooked = bool(spec.tool_hooks) and workflow.patched(ACTIVITY_TOOL_HOOKS_PATCH)
    if hooked:
        decision = await _hooks("before", spec, call, step, key, tools_queue)
        if decision.action in ("skip", "override"):
            report.metrics = {"hook": "skipped" if decision.action == "skip" else "override"}
            return ToolResultPart(id=call.id, name=call.name, content=decision.content), False
        if decision.action == "failed":
            return error_result(call, decision.content), True
    result, failed = await _call(tool, spec, call, key, report)
    if not (hooked and failed):
        return result, failed
    decision = await _hooks("error", spec, call, step, key, tools_queue, error=result.content)
    match decision.action:
        case "fallback":
            report.metrics = cut_strings({**report.metrics, "hook": "fallback", "error": result.content})[0]
            return ToolResultPart(id=call.id, name=call.name, content=decision.content), False
        case "end_run":
            report.metrics = {**report.metrics, "hook": "end_run"}
            if end_run is not None:
                end_run(decision.content)
        case "failed":
            return error_result(call, decision.content), True
    return result, failed


async def _hooks(stage: Literal["before", "error"], spec: AgentSpec, call: ToolCallPart, step: int, key: str,
                 tools_queue: str | None, *, error: str = "") -> ToolHookDecision:
    """The spec's hooks' decision on an activity-tool call (a hooks activity
    that cannot run is a ``failed`` decision: the model hears of it)."""
    input = RunToolHooksInput(stage=stage, hooks=spec.tool_hooks, run_id=workflow.info().workflow_id, step=step,
                              call_id=call.id, tool_name=call.name, arguments=call.arguments, error=error,
                              idempotency_key=key, workspace=spec.workspace, output_limit=spec.tool_output_limit,
                              agent_name=spec.name, model=spec.model)
    try:
        return await workflow.execute_activity(
            contracts.RUN_TOOL_HOOKS, input, result_type=ToolHookDecision,
            **calls.with_summary(calls.tool_call_options(spec, call.name, tools_queue),
                                 f"tool hooks {call.name} ({stage})"))
    except ActivityError as err:
        calls.reraise_cancel(err)
        return ToolHookDecision(action="failed", content=f"The tool hooks of '{call.name}' could not run: "
                                                         f"{calls.failure_detail(err)}")


async def _call(tool: ActivityTool, spec: AgentSpec, call: ToolCallPart, key: str,
                report: ToolCallReport) -> tuple[ToolResultPart, bool]:
    """The activity itself, after the arguments are checked."""
    problem = argument_problems(tool, call.arguments)
    # Runs that started before this check scheduled such calls: they replay so.
    if problem is not None and workflow.patched(ACTIVITY_TOOL_ARGUMENTS_PATCH):
        return error_result(call, problem), True
    args = activity_arguments(tool, call.arguments, key)
    if isinstance(args, str):
        return error_result(call, args), True
    report.metrics = {"activity": tool.activity, "task_queue": tool.task_queue, "idempotency_key": key}
    seconds = tool.start_to_close_seconds or spec.timeout_for(tool.name)
    try:
        value = await workflow.execute_activity(
            tool.activity, args=args, task_queue=tool.task_queue, summary=f"tool {tool.name}",
            start_to_close_timeout=timedelta(seconds=seconds),
            schedule_to_close_timeout=timedelta(seconds=tool.schedule_to_close_seconds)
            if tool.schedule_to_close_seconds else None,
            heartbeat_timeout=timedelta(seconds=tool.heartbeat_seconds) if tool.heartbeat_seconds else None,
            retry_policy=RetryPolicy(**tool.retry()), cancellation_type=ActivityCancellationType.TRY_CANCEL)
    except ActivityError as err:
        calls.reraise_cancel(err)
        after = calls.attempts_note(err, tool.max_attempts)
        return error_result(call, f"Tool '{tool.name}' (activity {tool.activity} on {tool.task_queue}) failed"
                                  f"{after}: {calls.failure_detail(err)}"), True
    text, truncated = cut_marked(result_text(value), spec.tool_output_limit, hint=CUT_HINT, tail=True)
    report.truncated = truncated
    return ToolResultPart(id=call.id, name=call.name, content=text), False
