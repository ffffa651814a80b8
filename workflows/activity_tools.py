"""Calling an activity-tool: the activity itself, on its own task queue
(README "Activities as tools"). Workflow code; the pure parts (arguments,
idempotency key, result text) are :mod:`agentloop.activity_tools`.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from agentloop.activities.workspace import truncate_output
    from agentloop.activity_tools import (
        ActivityTool,
        activity_arguments,
        argument_problems,
        call_idempotency_key,
        result_text,
    )
    from agentloop.messages import ToolCallPart, ToolResultPart
    from agentloop.report import ToolCallReport
    from agentloop.spec import AgentSpec
    from agentloop.workflows import activity_calls as calls
    from agentloop.workflows.loop_logic import error_result
    from agentloop.workflows.versions import ACTIVITY_TOOL_ARGUMENTS_PATCH


def activity_tool_named(spec: AgentSpec, name: str) -> ActivityTool | None:
    """The spec's activity-tool called ``name``, or None."""
    return next((t for t in spec.activity_tools if t.name == name), None)


async def run_activity_tool(tool: ActivityTool, spec: AgentSpec, call: ToolCallPart, step: int,
                            report: ToolCallReport) -> tuple[ToolResultPart, bool]:
    """Schedule the tool's activity on its queue and wait: its return value,
    or its failure (after its retries), is the call's result."""
    problem = argument_problems(tool, call.arguments)
    # Runs that started before this check scheduled such calls: they replay so.
    if problem is not None and workflow.patched(ACTIVITY_TOOL_ARGUMENTS_PATCH):
        return error_result(call, problem), True
    info = workflow.info()
    key = call_idempotency_key(info.workflow_id, info.run_id, step, call.id)
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
    text, truncated = truncate_output(result_text(value), spec.tool_output_limit)
    report.truncated = truncated
    return ToolResultPart(id=call.id, name=call.name, content=text), False
