"""The run loop's decisions, as pure functions that return tagged unions.

Each turn of the loop ends in plain data (a tagged union): after a model
response, :func:`decide_next_step` says final / verify / run tools /
require action / fail; before a call runs, :func:`gate_call` says answered /
execute / ask for approval / await the client; after the step's calls,
:func:`decide_after_tools` says continue / stopped / fail. Whether to
continue as new and whether the budget is spent are decided here too. The
workflow matches on the results and does the I/O.

No I/O, clocks or randomness here: this code runs inside workflow replay,
and the tests call it without a server (``tests/unit/test_loop_logic.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Literal, Union

from agentloop.shared.definition.activity_io import ModelResponse, ToolDefinition
from agentloop.shared.definition.approvals import (
    ApprovalDecision,
    PendingAction,
    PendingApproval,
    PermissionCheck,
    ToolGate,
    ToolOutput,
    check_permission,
)
from agentloop.shared.base.messages import ToolCallPart, ToolResultPart
from agentloop.shared.definition.pricing import check_budget, run_cost
from agentloop.shared.runs.report import RunReason, RunStatus
from agentloop.shared.base.usage import Usage
from agentloop.shared.definition.spec import AgentSpec

# After a model response ---------------------------------------------------------


@dataclass(frozen=True)
class FinalAnswer:
    """The model answered: the run completes."""

    text: str


@dataclass(frozen=True)
class Verify:
    """The model answered, and the spec asks it to check its work once
    first: add ``prompt`` as a user message and take one more step."""

    prompt: str


@dataclass(frozen=True)
class RunTools:
    """The model asked for tools: gate and run them, then take another step."""

    calls: list[ToolCallPart]


@dataclass(frozen=True)
class RequireAction:
    """The continuation limit is reached: the client runs the calls and
    submits their outputs (``requires_action``), then the loop goes on."""

    calls: list[ToolCallPart]


@dataclass(frozen=True)
class FailRun:
    """The run cannot go on."""

    reason: RunReason
    message: str


NextStep = Union[FinalAnswer, Verify, RunTools, RequireAction, FailRun]


def decide_next_step(
    response: ModelResponse,
    *,
    spec: AgentSpec,
    continuations: int,
    limit_requires_action: bool = True,
    may_verify: bool = False,
    last_step: bool = False,
) -> NextStep:
    """Decide what follows a step, from its finish reason.

    Args:
        response: The step's model response.
        spec: The agent's spec.
        continuations: LLM steps taken so far after tool results.
        limit_requires_action: Past ``max_tool_call_continuations``, wait for
            the client (``requires_action``) instead of failing. False only
            for runs started before requires_action existed.
        may_verify: The run has not asked the verification question yet (and
            is new enough to ask it).
        last_step: This was the last step ``max_steps`` allows: a final
            answer completes the run without the verification question.
    """
    tool_calls = response.message.tool_calls
    if tool_calls:
        limit = spec.max_tool_call_continuations
        if limit is not None and continuations >= limit:
            if limit_requires_action:
                return RequireAction(tool_calls)
            return FailRun(
                "max_tool_call_continuations",
                f"the model asked for tools after {continuations} tool-call continuations, the "
                f"limit set by AgentSpec.max_tool_call_continuations={limit}; raise the limit "
                "or narrow the task",
            )
        return RunTools(tool_calls)
    reason = response.finish_reason
    if reason == "stop" or reason == "tool_calls":
        # "tool_calls" with no calls happens with some servers; nothing to run, so we are done.
        if spec.verify_before_completing and may_verify and not last_step:
            return Verify(spec.verification_prompt)
        return FinalAnswer(response.message.text)
    if reason == "length":
        return FailRun("length", output_limit_message(response.max_tokens, spec.max_tokens))
    if reason == "content_filter":
        return FailRun("content_filter", "the provider's content filter stopped the model's answer")
    return FailRun(
        "error",
        f"the model stopped for an unexpected reason ({response.raw_finish_reason or reason})",
    )


def output_limit_message(sent: int | None, spec_limit: int | None) -> str:
    """Why a run failed with reason ``length``, naming the limit that applied.

    Args:
        sent: The output limit the provider sent with the request
            (``ModelResponse.max_tokens``; its default when the spec sets
            none), or None when it sent none or does not say.
        spec_limit: ``AgentSpec.max_tokens``.
    """
    cause = "the model stopped because it reached its output token limit"
    if sent is None:
        if spec_limit is not None:
            return f"{cause} (max_tokens={spec_limit}); raise AgentSpec.max_tokens or ask for less"
        return (
            f"{cause} (the server's own: no max_tokens was sent); set AgentSpec.max_tokens "
            "(agentloop run --max-tokens) or ask for less"
        )
    if spec_limit is None:
        limit = f"max_tokens={sent}, the provider's default while AgentSpec.max_tokens is unset"
    elif spec_limit == sent:
        limit = f"max_tokens={sent}, from AgentSpec.max_tokens"
    else:
        limit = f"max_tokens={sent} was sent; AgentSpec.max_tokens={spec_limit}"
    return f"{cause} ({limit}); raise AgentSpec.max_tokens (agentloop run --max-tokens) or ask for less"


# Budget ------------------------------------------------------------------------------


@dataclass(frozen=True)
class WithinBudget:
    """The run may go on. ``cost_usd`` is what it has cost so far (None when
    the model's price is unknown)."""

    cost_usd: float | None


@dataclass(frozen=True)
class OverBudget:
    """A limit of ``AgentSpec.budget`` is passed: the run fails (``cost_limit``)."""

    cost_usd: float | None
    message: str


BudgetVerdict = Union[WithinBudget, OverBudget]


def check_run_budget(
    usage: Usage, spec: AgentSpec, *, sub_usage: Usage | None = None, sub_cost_usd: float | None = 0.0
) -> BudgetVerdict:
    """The run's totals against ``spec.budget`` (checked after each LLM step,
    and after each step that delegated to sub-agents, so a run may overshoot
    by one step's usage).

    Args:
        usage: The run's usage, its sub-agents' included.
        spec: The agent.
        sub_usage: The part of ``usage`` its sub-agents used.
        sub_cost_usd: What they cost, each at its own model's price (None
            when one's price is unknown: the cost is then unknown too).
    """
    cost = run_cost(usage - sub_usage if sub_usage is not None else usage, spec.model, spec.budget)
    if sub_usage is not None and cost is not None:
        cost = None if sub_cost_usd is None else cost + sub_cost_usd
    over = check_budget(usage, cost, spec.budget)
    return OverBudget(cost, over) if over is not None else WithinBudget(cost)


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


CallDecision = Union[Answered, Execute, AskApproval, AwaitClient]


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


# After the step's tool calls ---------------------------------------------------------------


@dataclass(frozen=True)
class Continue:
    """Take the next step."""


@dataclass(frozen=True)
class Stopped:
    """A stop was requested: the run ends ``stopped`` now."""


AfterTools = Union[Continue, Stopped, FailRun]


def count_failed_steps(failed: list[bool], previous: int) -> int:
    """Consecutive steps whose every call failed, counting this one."""
    return previous + 1 if failed and all(failed) else 0


def decide_after_tools(
    results: list[ToolResultPart],
    *,
    spec: AgentSpec,
    step: int,
    failed_tool_steps: int,
    stop_requested: bool,
) -> AfterTools:
    """What follows a step whose calls all have results.

    Args:
        results: The step's results, in call order.
        spec: The agent's spec (limits).
        step: Steps finished, this one included.
        failed_tool_steps: Consecutive all-failed steps, this one included
            (:func:`count_failed_steps`).
        stop_requested: A ``stop`` signal arrived.
    """
    if failed_tool_steps >= spec.max_consecutive_failed_tool_steps:
        errors = "; ".join(f"{r.name}: {r.content}" for r in results)
        return FailRun("tool_error", f"every tool call of step {step} failed ({errors})")
    if stop_requested:
        return Stopped()
    if step >= spec.max_steps:
        return FailRun("max_steps", max_steps_message(spec))
    return Continue()


# Continue-as-new --------------------------------------------------------------------------


@dataclass(frozen=True)
class ContinueAsNew:
    """Hand the run over to a new Temporal run now."""


@dataclass(frozen=True)
class NotDue:
    """Go on in this Temporal run."""


@dataclass(frozen=True)
class TooLargeToCarry:
    """Due, but what the next run's input must carry (the conversation, and
    the report) would pass Temporal's payload limit: go on in this run (and
    warn, once)."""

    size: int
    limit: int


CarryVerdict = Union[ContinueAsNew, NotDue, TooLargeToCarry]


def continue_as_new_due(
    *,
    steps_this_run: int,
    suggested: bool,
    every: int | None,
    carry_bytes: Callable[[], int],
    limit_bytes: int,
) -> CarryVerdict:
    """Whether to hand over now: Temporal suggests it, or this Temporal run
    has taken ``every`` steps (count the step under way when it waits for
    people). A run hands over at most once per step taken.

    Args:
        steps_this_run: Steps taken in this Temporal run.
        suggested: Temporal suggests continuing as new (history is large).
        every: ``AgentSpec.continue_as_new_every_steps``.
        carry_bytes: The size as JSON of what the next run's input must
            carry (the conversation, and the report), asked only when a
            hand-over is due.
        limit_bytes: The most the next run's input may carry of them.
    """
    if steps_this_run == 0:
        return NotDue()
    if not (suggested or (every is not None and steps_this_run >= every)):
        return NotDue()
    size = carry_bytes()
    if size > limit_bytes:
        return TooLargeToCarry(size, limit_bytes)
    return ContinueAsNew()


def newest_within(sizes: Sequence[int], *, most: int, budget: int) -> int:
    """How many of the newest items (the event stream's events, the
    report's steps) a hand-over carries to the next Temporal run: at most
    ``most``, and no more than fit in ``budget`` bytes (an event may hold a
    whole tool output or message, and the next run's input must stay under
    Temporal's payload limit).

    Args:
        sizes: Each item's size as carried, oldest first.
        most: The most items carried.
        budget: The most bytes they may take together.
    """
    kept, total = 0, 0
    for size in reversed(sizes[-most:] if most > 0 else []):
        if total + size > budget:
            break
        kept, total = kept + 1, total + size
    return kept


# What the model sees -----------------------------------------------------------------------


def error_result(call: ToolCallPart, content: str) -> ToolResultPart:
    """An error result for ``call``."""
    return ToolResultPart(id=call.id, name=call.name, content=content, is_error=True)


def missing_tools_message(missing: list[str], available: list[str]) -> str:
    """Why a run whose spec names tools the worker lacks fails at once."""
    return (
        f"AgentSpec.tools names tools this worker does not have: {', '.join(missing)}. "
        f"Available: {', '.join(available) or 'none'}. "
        "Register them in a module the worker imports (agentloop worker --import MODULE)."
    )


def unknown_tool_message(name: str, available: list[ToolDefinition]) -> str:
    """What the model sees when it calls a tool the run does not have."""
    names = ", ".join(t.name for t in available) or "none"
    return f"Unknown tool '{name}'. Available tools: {names}. Call one of these by its exact name."


def bad_arguments_message(call: ToolCallPart) -> str:
    """What the model sees when its tool arguments were not a JSON object."""
    raw = call.raw_arguments if call.raw_arguments is not None else ""
    shown = raw if len(raw) <= 500 else raw[:500] + "..."
    return (
        f"Invalid arguments for tool '{call.name}': {call.arguments_error}. "
        f"Received: {shown!r}. Send the arguments as one JSON object matching the tool's schema."
    )


def denied_message(call: ToolCallPart, reason: str) -> str:
    """What the model sees when a call was denied (by policy or operator)."""
    return (
        f"The call to '{call.name}' was denied: {reason}. It did not run. Do not retry it "
        "as is; choose another way or explain what you need."
    )


def skipped_message(call: ToolCallPart) -> str:
    """What the model sees when an operator skipped a call without an answer."""
    return f"The call to '{call.name}' was skipped by the operator and did not run."


def stopped_message(call: ToolCallPart) -> str:
    """The result of a call still waiting when the run was stopped."""
    return f"The call to '{call.name}' did not run: the run was stopped."


def max_steps_message(spec: AgentSpec) -> str:
    """Why a run that used all its steps failed."""
    return (
        f"the run used all {spec.max_steps} steps (AgentSpec.max_steps) without a final "
        "answer; raise max_steps or narrow the task"
    )


def clip_output(text: str, limit: int) -> str:
    """An operator's or client's answer cut to the spec's tool output limit,
    head and tail kept, with a visible note (as tool outputs are)."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    omitted = len(text) - head - tail
    note = f"[... {omitted:,} characters cut: the answer exceeded tool_output_limit ...]"
    return f"{text[:head]}\n{note}\n{text[len(text) - tail:]}"



def live_status(*, approvals: bool, actions: bool, idle: bool) -> RunStatus:
    """The status of a run that goes on: waiting for a decision, for the
    client's outputs, for a thread's next message (``idle``), else running."""
    if approvals:
        return "awaiting_approval"
    if actions:
        return "requires_action"
    return "idle" if idle else "running"
