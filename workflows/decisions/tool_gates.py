"""Per tool call, pure decisions: before a call runs, :func:`gate_call` says
answered / execute / ask for approval / await the client; when a decision or
an output arrives, :func:`resolve_approval` and :func:`resolve_output` turn
it into the call's result. No I/O, clocks or randomness."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from agentloop.shared.base.messages import ToolCallPart, ToolResultPart
from agentloop.shared.definition.activity_io import ToolDefinition
from agentloop.shared.definition.approvals import (
    ApprovalDecision,
    PendingAction,
    PendingApproval,
    PermissionCheck,
    ToolGate,
    ToolOutput,
    check_permission,
)
from agentloop.shared.definition.spec import AgentSpec
from agentloop.workflows.decisions.next_step import RequireAction, RunTools
from agentloop.workflows.decisions.tool_messages import (
    bad_arguments_message,
    clip_output,
    denied_message,
    error_result,
    skipped_message,
    stopped_message,
    unknown_tool_message,
)

# Per tool call -------------------------------------------------------------------------


@dataclass(frozen=True)
class Answered:
    """The call does not run: ``result`` is its answer. ``failed`` counts
    it as a failed call (unknown tool, bad arguments; a policy denial is an
    answer the model can work with, not a failure)."""

    result: ToolResultPart
    failed: bool
    permission: PermissionCheck | None = None


@dataclass(frozen=True)
class Execute:
    """Run the call (``permission`` is the policy's verdict, when it applied)."""

    permission: PermissionCheck | None = None


@dataclass(frozen=True)
class AskApproval:
    """The call waits for an operator's decision."""

    approval: PendingApproval
    permission: PermissionCheck


@dataclass(frozen=True)
class AwaitClient:
    """The client runs the call and submits its output (``requires_action``)."""

    action: PendingAction


CallDecision = Answered | Execute | AskApproval | AwaitClient


def gate_call(
    call: ToolCallPart,
    *,
    spec: AgentSpec,
    tools: list[ToolDefinition],
    step: int,
    now: datetime,
    hitl: bool = True,
    strict_client_arguments: bool = True,
) -> CallDecision:
    """What happens to one tool call before (or instead of) it runs.

    Args:
        call: The model's call.
        spec: The agent's spec (client tools, permissions, approval timeout).
        tools: The worker tools the run resolved.
        step: The step that asked for it, 1-based as shown to people.
        now: The workflow's time (``workflow.now()``), for ``asked_at``.
        hitl: Apply client tools and the permission policy. False only for
            runs started before they existed.
        strict_client_arguments: A client call whose arguments are not a JSON
            object is answered with an error instead of sent to the client.
            False only for runs started before that rule.
    """
    if hitl and any(t.name == call.name for t in spec.client_tools):
        if call.arguments_error is not None and strict_client_arguments:
            return Answered(error_result(call, bad_arguments_message(call)), failed=True)
        return AwaitClient(pending_action(call, step=step, now=now, reason="client_tool"))
    tool = next((t for t in tools if t.name == call.name), None)
    if tool is None:
        return Answered(error_result(call, unknown_tool_message(call.name, tools)), failed=True)
    if call.arguments_error is not None:
        return Answered(error_result(call, bad_arguments_message(call)), failed=True)
    if not hitl:
        return Execute()
    check = check_permission(call, rules=spec.permissions, default=spec.default_permission, read_only=tool.read_only)
    if check.action == "deny":
        return Answered(error_result(call, denied_message(call, check.reason)), failed=False, permission=check)
    if check.action == "ask":
        timeout = spec.approval_timeout_seconds
        approval = PendingApproval(
            call_id=call.id,
            tool_name=call.name,
            arguments=call.arguments,
            step=step,
            asked_at=now,
            reason=check.reason,
            expires_at=now + timedelta(seconds=timeout) if timeout else None,
        )
        return AskApproval(approval, check)
    return Execute(check)


def gate_calls(
    decision: RunTools | RequireAction,
    *,
    spec: AgentSpec,
    tools: list[ToolDefinition],
    step: int,
    now: datetime,
    hitl: bool = True,
    strict_client_arguments: bool = True,
) -> list[ToolGate]:
    """The gates of a step's calls: each through :func:`gate_call`, or, past
    the continuation limit (:class:`RequireAction`), every one to the client.
    Arguments as for :func:`gate_call`."""
    if isinstance(decision, RequireAction):
        return [
            ToolGate(call=c, action=pending_action(c, step=step, now=now, reason="max_tool_call_continuations"))
            for c in decision.calls
        ]
    return [
        gate_of(c, gate_call(c, spec=spec, tools=tools, step=step, now=now, hitl=hitl,
                             strict_client_arguments=strict_client_arguments))
        for c in decision.calls
    ]


def gate_of(call: ToolCallPart, decision: CallDecision) -> ToolGate:
    """A call's decision in the form a step carries across continue-as-new."""
    if isinstance(decision, Answered):
        return ToolGate(call=call, permission=decision.permission, result=decision.result)
    if isinstance(decision, AskApproval):
        return ToolGate(call=call, permission=decision.permission, approval=decision.approval)
    if isinstance(decision, AwaitClient):
        return ToolGate(call=call, action=decision.action)
    return ToolGate(call=call, permission=decision.permission)


def decision_of(gate: ToolGate) -> CallDecision:
    """The decision a carried gate holds (the inverse of :func:`gate_of`)."""
    if gate.result is not None:
        return Answered(gate.result, failed=gate.permission is None, permission=gate.permission)
    if gate.action is not None:
        return AwaitClient(gate.action)
    if gate.approval is not None and gate.permission is not None:
        return AskApproval(gate.approval, gate.permission)
    return Execute(gate.permission)


def pending_action(call: ToolCallPart, *, step: int, now: datetime, reason: str) -> PendingAction:
    """A call the client must run: a client tool, or any call past the
    continuation limit."""
    return PendingAction(
        call_id=call.id,
        tool_name=call.name,
        arguments=call.arguments,
        step=step,
        asked_at=now,
        reason=reason,  # type: ignore[arg-type]
    )


# After a decision or an output arrived -------------------------------------------------

ResolutionLabel = Literal["approve", "deny", "skip", "override", "timeout", "stopped"]


@dataclass(frozen=True)
class Resolution:
    """What became of a call that waited for an operator: ``result`` is the
    answer the model sees, or None when the call is to run."""

    label: ResolutionLabel
    result: ToolResultPart | None = None
    by: str | None = None
    reason: str | None = None


def resolve_approval(
    call: ToolCallPart,
    decision: ApprovalDecision | None,
    *,
    spec: AgentSpec,
    timed_out: bool = False,
) -> Resolution:
    """Turn an operator's decision (or its absence) into the call's fate.

    Args:
        call: The call that waited.
        decision: The decision that arrived, or None (timed out or stopped).
        spec: For the approval timeout and ``tool_output_limit``.
        timed_out: No decision arrived within ``approval_timeout_seconds``.
    """
    if timed_out:
        limit = spec.approval_timeout_seconds or 0
        why = f"no decision within {limit:g}s (approval timeout)"
        return Resolution("timeout", error_result(call, denied_message(call, why)))
    if decision is None:
        return Resolution("stopped", error_result(call, stopped_message(call)))
    by, reason = decision.by, decision.reason
    if decision.decision == "deny":
        denied = error_result(call, denied_message(call, reason or "an operator denied it"))
        return Resolution("deny", denied, by, reason)
    if decision.decision == "skip":
        content = clip_output(decision.result, spec.tool_output_limit) if decision.result else None
        answer = ToolResultPart(id=call.id, name=call.name, content=content or skipped_message(call))
        return Resolution("skip", answer, by, reason)
    if decision.result is not None:
        content = clip_output(decision.result, spec.tool_output_limit)
        return Resolution("override", ToolResultPart(id=call.id, name=call.name, content=content), by, reason)
    return Resolution("approve", None, by, reason)


def resolve_output(call: ToolCallPart, output: ToolOutput | None, *, spec: AgentSpec) -> ToolResultPart:
    """The answer to a client call: the client's output (cut to the spec's
    limit), or "did not run" when the run was stopped first."""
    if output is None:
        return error_result(call, stopped_message(call))
    return ToolResultPart(
        id=call.id, name=call.name, content=clip_output(output.output, spec.tool_output_limit), is_error=output.is_error
    )
