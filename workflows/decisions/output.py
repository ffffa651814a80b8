"""Typed results: how the model is asked, and what follows its answer, as
pure functions returning tagged unions (``tests/unit/workflows/test_output_logic.py``).

A run with ``AgentSpec.output`` asks the model for the answer in the
provider's native structured output where it has one (:func:`output_mode`
``native``: OpenAI's ``response_format``, Anthropic's ``output_config``),
else with a ``final_result`` tool whose call is the answer (``tool``). After
each response, :func:`decide_output` says: a typed answer, one more try with
what was wrong (a recorded step like any other), the run fails
(``output_invalid``), or nothing to decide (tool calls to run, or a finish
reason :func:`~agentloop.workflows.decisions.next_step.decide_next_step` handles).

No I/O, clocks or randomness: this runs inside workflow replay.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from agentloop.shared.base.messages import ContentPart, Message, ToolCallPart, ToolResultPart
from agentloop.shared.definition.activity_io import ModelResponse, OutputFormat, ToolDefinition
from agentloop.shared.definition.output import (
    FINAL_RESULT_TOOL,
    OutputSpec,
    check_value,
    decode_text,
    dump_value,
    feedback,
    invalid_message,
)
from agentloop.shared.definition.spec import parse_model
from agentloop.workflows.decisions.next_step import FailRun

OutputMode = Literal["native", "tool"]

#: Anthropic models without structured outputs (they answer with the
#: ``final_result`` tool, forced), by name prefix.
ANTHROPIC_WITHOUT_STRUCTURED_OUTPUTS = (
    "claude-2", "claude-instant", "claude-3", "claude-sonnet-4-0", "claude-sonnet-4-2025",
    "claude-opus-4-0", "claude-opus-4-2025",
)


def output_mode(model: str) -> OutputMode:
    """How a run on ``model`` (``provider:model``) asks for a typed answer."""
    provider, name = parse_model(model)
    if provider == "openai":
        return "native"
    if provider == "anthropic" and not name.startswith(ANTHROPIC_WITHOUT_STRUCTURED_OUTPUTS):
        return "native"
    return "tool"


def output_format(output: OutputSpec) -> OutputFormat:
    """What a native structured-output request carries."""
    return OutputFormat(name=output.name, json_schema=output.model_schema(strict=True))


def final_result_tool(output: OutputSpec) -> ToolDefinition:
    """The tool a model without native structured output answers with."""
    return ToolDefinition(
        name=FINAL_RESULT_TOOL,
        description=("Give your final answer by calling this tool, once you are done (after any other tools); "
                     "its arguments are the answer."),
        parameters=output.model_schema(strict=False),
        read_only=True,
    )


def forced_tool_choice(model: str, tool_choice: str, has_thinking: bool) -> str:
    """The tool choice of a ``tool``-mode run: Anthropic models must call a
    tool (their answer is ``final_result``), unless the spec chose otherwise
    or thinks (extended thinking takes ``auto`` only)."""
    if parse_model(model)[0] == "anthropic" and tool_choice == "auto" and not has_thinking:
        return "required"
    return tool_choice


@dataclass(frozen=True)
class TypedAnswer:
    """The answer matches the schema: the run (or turn) completes with
    ``value``. ``results`` answer the step's calls when the answer came as
    a ``final_result`` call (they join the conversation)."""

    value: Any
    text: str
    results: Message | None = None


@dataclass(frozen=True)
class RetryOutput:
    """The answer does not match: ``message`` (the problems, as a user
    message, or as the results of the step's calls) joins the conversation
    and the model tries again."""

    message: Message


OutputDecision = TypedAnswer | RetryOutput | FailRun | None


def decide_output(response: ModelResponse, output: OutputSpec, *, tries: int, retries: int,
                  last_step: bool) -> OutputDecision:
    """What follows a response of a typed run.

    Args:
        response: The step's model response.
        output: ``AgentSpec.output``.
        tries: Answers that did not match so far (this run, or this turn).
        retries: ``AgentSpec.output_retries``.
        last_step: ``max_steps`` allows no further step.

    Returns:
        None when the response is not an answer: tool calls other than
        ``final_result``, or a finish reason other than ``stop``.
    """
    calls = response.message.tool_calls
    final = next((c for c in calls if c.name == FINAL_RESULT_TOOL), None)
    if final is not None:
        if final.arguments_error is not None:
            value, problems = None, [f"the answer is not a JSON object ({final.arguments_error})"]
        else:
            value, problems = check_value(output, final.arguments)
    elif calls or response.finish_reason not in ("stop", "tool_calls"):
        return None
    else:
        decoded, error = decode_text(response.message.text)
        value, problems = (None, [error]) if error is not None else check_value(output, decoded)
        if error is not None and output.wrapped:  # a bare word for a string answer ("refund")
            bare, bare_problems = check_value(output, response.message.text.strip())
            if not bare_problems:
                value, problems = bare, []
    if not problems:
        text = dump_value(value)
        return TypedAnswer(value, text, answered(calls, final, "Final answer accepted.") if final else None)
    if tries >= retries or last_step:
        return FailRun("output_invalid", invalid_message(problems, tries + 1))
    said = feedback(problems, output, tries_left=retries - tries)
    return RetryOutput(answered(calls, final, said, error=True) if final else Message.user(said))


def answered(calls: list[ToolCallPart], final: ToolCallPart, text: str, *, error: bool = False) -> Message:
    """The results of a step whose calls include ``final_result``: ``text``
    for it; the others did not run (the answer ends the turn)."""
    results: list[ContentPart] = [
        ToolResultPart(id=c.id, name=c.name, content=text, is_error=error) if c.id == final.id else
        ToolResultPart(id=c.id, name=c.name, is_error=True,
                       content=f"The call to '{c.name}' did not run: final_result came in the same step. "
                               "Call other tools first, then final_result alone.")
        for c in calls
    ]
    return Message(role="tool", content=results)
