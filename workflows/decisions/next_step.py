"""The run loop's step decisions, as pure functions that return tagged unions.

After a model response, :func:`decide_next_step` says final / verify / run
tools / require action / fail; after the step's calls,
:func:`decide_after_tools` says continue / stopped / fail. The workflow
matches on the results and does the I/O.

No I/O, clocks or randomness here: this code runs inside workflow replay,
and the tests call it without a server (``tests/unit/workflows/test_loop_logic.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from agentloop.shared.base.messages import ToolCallPart, ToolResultPart
from agentloop.shared.definition.activity_io import ModelResponse
from agentloop.shared.definition.spec import AgentSpec
from agentloop.shared.runs.report import RunReason, RunStatus
from agentloop.workflows.decisions.tool_messages import max_steps_message

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


NextStep = FinalAnswer | Verify | RunTools | RequireAction | FailRun


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


# After the step's tool calls ---------------------------------------------------------------


@dataclass(frozen=True)
class Continue:
    """Take the next step."""


@dataclass(frozen=True)
class Stopped:
    """A stop was requested: the run ends ``stopped`` now."""


AfterTools = Continue | Stopped | FailRun


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



def live_status(*, approvals: bool, actions: bool, idle: bool, quota: bool = False) -> RunStatus:
    """The status of a run that goes on: waiting for its tenant's quota, for
    a decision, for the client's outputs, for a thread's next message
    (``idle``), else running."""
    if quota:
        return "waiting_for_quota"
    if approvals:
        return "awaiting_approval"
    if actions:
        return "requires_action"
    return "idle" if idle else "running"
