"""Pure helpers of the run loop: what to do after a step, and the error
results for calls that cannot run. No I/O, clocks or randomness here: this
code runs inside workflow replay.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from agentloop.activity_io import ModelResponse, ToolDefinition
from agentloop.messages import ToolCallPart
from agentloop.report import RunReason
from agentloop.spec import AgentSpec


@dataclass(frozen=True)
class FinalAnswer:
    """The model answered: the run completes."""

    text: str


@dataclass(frozen=True)
class RunTools:
    """The model asked for tools: run them, then take another step."""

    calls: list[ToolCallPart]


@dataclass(frozen=True)
class FailRun:
    """The run cannot go on."""

    reason: RunReason
    message: str


@dataclass(frozen=True)
class RequireAction:
    """The continuation limit is reached: the client runs the calls and
    submits their outputs (``requires_action``), then the loop goes on."""

    calls: list[ToolCallPart]


NextStep = Union[FinalAnswer, RunTools, RequireAction, FailRun]


def decide_next_step(
    response: ModelResponse, *, spec: AgentSpec, continuations: int, limit_requires_action: bool = True
) -> NextStep:
    """Decide what follows a step, from its finish reason (seed 000).

    Args:
        response: The step's model response.
        spec: The agent's spec.
        continuations: LLM steps taken so far after tool results.
        limit_requires_action: Past ``max_tool_call_continuations``, wait for
            the client (``requires_action``) instead of failing. False only
            for runs started before requires_action existed.
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
        return FinalAnswer(response.message.text)
    if reason == "length":
        return FailRun(
            "length",
            "the model stopped because it reached its output token limit "
            f"(max_tokens={spec.max_tokens}); raise AgentSpec.max_tokens or ask for less",
        )
    if reason == "content_filter":
        return FailRun("content_filter", "the provider's content filter stopped the model's answer")
    return FailRun(
        "error",
        f"the model stopped for an unexpected reason ({response.raw_finish_reason or reason})",
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
    return f"{text[:head]}\n[... {omitted:,} characters cut: the answer exceeded tool_output_limit ...]\n{text[len(text) - tail:]}"
