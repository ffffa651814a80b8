"""What the model sees when a tool call fails, is denied, skipped or stopped,
and how a long output is cut: plain text, decided without I/O."""

from __future__ import annotations

from agentloop.shared.base.messages import ToolCallPart, ToolResultPart
from agentloop.shared.base.text import cut
from agentloop.shared.definition.activity_io import ToolDefinition
from agentloop.shared.definition.spec import AgentSpec

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
    shown = cut(raw, 500)
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
    return cut(text, limit, hint="the answer exceeded tool_output_limit", tail=True)
