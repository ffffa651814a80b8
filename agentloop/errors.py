"""The error hierarchy.

``UserError`` is misconfiguration, raised eagerly with a message that says
what to change. ``AgentRunFailed`` is what a client sees for a run that ended
``failed``: it carries the run's full result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentloop.run import AgentRunResult


class AgentLoopError(Exception):
    """Base class of agentloop's errors."""


class UserError(AgentLoopError):
    """Misconfiguration: the message says what to fix."""


class ToolError(AgentLoopError):
    """A tool failed in a way the model should hear about.

    Raise it from a tool with a message addressed to the model; the call
    becomes an error result with that message.
    """


class AgentRunFailed(AgentLoopError):
    """A run ended ``failed``.

    Attributes:
        reason: Why (``error``, ``max_steps``, ``length``, ``tool_error``...).
        result: The run's result: messages, usage and report up to the failure.
    """

    def __init__(self, message: str, *, reason: str, result: AgentRunResult | None = None):
        super().__init__(message)
        self.reason = reason
        self.result = result


class DecisionRejected(AgentLoopError):
    """An approval, tool outputs or another request to a run was refused;
    the message says why (unknown or already decided call id, malformed
    payload, run already ended) and nothing changed in the run."""


#: ApplicationError type of a failed run.
RUN_FAILED_ERROR_TYPE = "AgentRunFailed"


#: Most characters of a value a message quotes back (a call id, a field
#: name): messages never echo a large payload.
PREVIEW_CHARS = 60

#: Most problems :func:`describe_validation_error` lists.
MAX_LISTED_ERRORS = 10


def preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    """``text`` as a message may quote it: cut to ``limit`` characters, saying
    how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text):,} characters)"


def describe_validation_error(exc: Exception) -> str:
    """One line per problem of a pydantic ``ValidationError``: ``field: message``.

    Bounded whatever the input: at most ``MAX_LISTED_ERRORS`` problems, field
    names and messages cut short (a field name can be a key the sender chose).
    """
    errors = getattr(exc, "errors", None)
    if errors is None:
        return preview(str(exc), 300)
    found = errors()
    lines = [
        f"{preview('.'.join(map(str, e['loc'])) or '(input)')}: {preview(e['msg'].removeprefix('Value error, '), 300)}"
        for e in found[:MAX_LISTED_ERRORS]
    ]
    if len(found) > MAX_LISTED_ERRORS:
        lines.append(f"and {len(found) - MAX_LISTED_ERRORS} more problems")
    return "; ".join(lines)


#: ApplicationError type of input that does not match its model: a failed
#: run's, when its start input is not an ``AgentRunInput``.
INVALID_INPUT_ERROR_TYPE = "InvalidInput"

#: ApplicationError type of a refused ``approve`` or ``submit_tool_outputs``
#: update whose payload is well formed but does not fit the run: unknown or
#: already decided call id, a denial with a result, missing outputs.
INVALID_DECISION_ERROR_TYPE = "InvalidDecision"

#: ApplicationError type of a refused update whose payload is malformed (not
#: the JSON object the update takes) or has a field over its limit.
INVALID_REQUEST_ERROR_TYPE = "InvalidRequest"

#: ApplicationError type of a refused update whose payload as a whole is over
#: the size a run accepts.
REQUEST_TOO_LARGE_ERROR_TYPE = "RequestTooLarge"
