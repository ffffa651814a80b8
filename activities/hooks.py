"""Tool hooks inside the ``execute_tool`` activity (see :mod:`agentloop.tools.hooks`):
the spec's hooks around one call, their decision made into the call's result."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from temporalio import activity

from agentloop.activities.tool_calls import ToolCalls, format_tool_output
from agentloop.shared.base.hooks import RunToolHooksInput, ToolHookDecision
from agentloop.shared.base.messages import CUT_HINT, cut_hint
from agentloop.shared.base.text import cut, cut_marked
from agentloop.shared.definition.activity_io import ExecuteToolInput, ExecuteToolResult
from agentloop.tools.hooks import (
    EndRun,
    Fallback,
    Override,
    Skip,
    ToolCallInfo,
    before_hooks,
    error_hooks,
    hooks_of,
    run_hooks,
)
from agentloop.tools.tool_context import ToolContext


async def execute_with_hooks(acts: ToolCalls, input: ExecuteToolInput, key: str) -> ExecuteToolResult:
    """Run ``input``'s call through the hooks it names (``input.hooks``)."""

    started = time.monotonic()

    def result(
        content: str, *, is_error: bool, metrics: dict[str, Any], end_run: str | None = None
    ) -> ExecuteToolResult:
        text, truncated = cut_marked(content, input.output_limit, hint=cut_hint(input.tool_name), tail=True)
        return ExecuteToolResult(call_id=input.call_id, content=text, is_error=is_error, truncated=truncated,
                                 latency_ms=(time.monotonic() - started) * 1000, metrics=metrics, end_run=end_run)

    known = hooks_of(acts.registry)
    missing = [n for n in input.hooks if n not in known]
    if missing:
        return result(f"The tool hooks {', '.join(missing)} are not registered on this worker; the call did not run.",
                      is_error=True, metrics={})
    info = ToolCallInfo(tool_name=input.tool_name, arguments=dict(input.arguments), call_id=input.call_id,
                        run_id=input.run_id, step=input.step, agent_name=input.agent_name, model=input.model)
    ctx = ToolContext(workspace=Path(input.workspace) if input.workspace else acts.workspace, run_id=input.run_id,
                      step=input.step, call_id=input.call_id, output_limit=input.output_limit,
                      heartbeat=activity.heartbeat, idempotency_key=key, agent_name=input.agent_name,
                      model=input.model)
    try:
        decision, ran = await run_hooks([known[n] for n in input.hooks], info, ctx,
                                        lambda: acts._execute_tool(input, key),
                                        lambda r: r.content if r.is_error else None)
    except Exception as exc:  # a hook's bug: the model hears of it, the run goes on
        activity.logger.warning("a tool hook of %s raised %r", input.tool_name, exc)
        return result(f"A tool hook failed for '{input.tool_name}': {type(exc).__name__}: {exc}",
                      is_error=True, metrics={})
    if decision is None:
        return ran
    metrics = dict(ran.metrics) if ran is not None else {}
    match decision:
        case Skip(reason):
            return result(reason, is_error=False, metrics={**metrics, "hook": "skipped"})
        case Override(value):
            return result(format_tool_output(value), is_error=False, metrics={**metrics, "hook": "override"})
        case Fallback(value):
            return result(format_tool_output(value), is_error=False,
                          metrics={**metrics, "hook": "fallback", "error": ran.content if ran else ""})
        case EndRun(reason):
            return result(ran.content if ran else reason, is_error=True, metrics={**metrics, "hook": "end_run"},
                          end_run=reason)
    raise AssertionError(decision)


async def run_tool_hooks(acts: ToolCalls, input: RunToolHooksInput) -> ToolHookDecision:
    """The spec's hooks around an activity-tool's call (which the workflow
    schedules itself): the ``before_tool_call`` hooks, or the
    ``on_tool_error`` hooks with the call's error."""

    def decided(action: str, value: str) -> ToolHookDecision:
        text = cut(value, input.output_limit, hint=CUT_HINT, tail=True)
        return ToolHookDecision(action=action, content=text)  # type: ignore[arg-type]

    known = hooks_of(acts.registry)
    missing = [n for n in input.hooks if n not in known]
    if missing:
        return decided("failed", f"The tool hooks {', '.join(missing)} are not registered on this worker; the call "
                                 "did not run." if input.stage == "before" else
                                 f"The tool hooks {', '.join(missing)} are not registered on this worker.")
    info = ToolCallInfo(tool_name=input.tool_name, arguments=dict(input.arguments), call_id=input.call_id,
                        run_id=input.run_id, step=input.step, agent_name=input.agent_name, model=input.model)
    ctx = ToolContext(workspace=Path(input.workspace) if input.workspace else acts.workspace, run_id=input.run_id,
                      step=input.step, call_id=input.call_id, output_limit=input.output_limit,
                      heartbeat=activity.heartbeat, idempotency_key=input.idempotency_key,
                      agent_name=input.agent_name, model=input.model)
    hooks = [known[n] for n in input.hooks]
    try:
        if input.stage == "before":
            decision: Any = await before_hooks(hooks, info, ctx)
        else:
            decision = await error_hooks(hooks, info, input.error, ctx)
    except Exception as exc:  # a hook's bug: the model hears of it, the run goes on
        activity.logger.warning("a tool hook of %s raised %r", input.tool_name, exc)
        return decided("failed", f"A tool hook failed for '{input.tool_name}': {type(exc).__name__}: {exc}")
    match decision:
        case None:
            return ToolHookDecision()
        case Skip(reason):
            return decided("skip", reason)
        case Override(value):
            return decided("override", format_tool_output(value))
        case Fallback(value):
            return decided("fallback", format_tool_output(value))
        case EndRun(reason):
            return decided("end_run", reason)
    raise AssertionError(decision)
