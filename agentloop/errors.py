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


def describe_validation_error(exc: Exception) -> str:
    """One line per problem of a pydantic ``ValidationError``: ``field: message``."""
    errors = getattr(exc, "errors", None)
    if errors is None:
        return str(exc)
    return "; ".join(
        f"{'.'.join(map(str, e['loc'])) or '(input)'}: {e['msg'].removeprefix('Value error, ')}"
        for e in errors()
    )


#: ApplicationError type of input that does not match its model.
INVALID_INPUT_ERROR_TYPE = "InvalidInput"
