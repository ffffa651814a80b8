"""The error hierarchy.

``UserError`` is misconfiguration, raised eagerly with a message that says
what to change. ``AgentRunFailed``, what a client sees for a run that ended
``failed``, is beside the result it carries, in :mod:`agentloop.shared.runs.result`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from agentloop.shared.base.text import cut

_V = TypeVar("_V")


class AgentLoopError(Exception):
    """Base class of agentloop's errors."""


class UserError(AgentLoopError):
    """Misconfiguration: the message says what to fix."""


class ToolError(AgentLoopError):
    """A tool failed in a way the model should hear about.

    Raise it from a tool with a message addressed to the model; the call
    becomes an error result with that message.
    """


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
    """``text`` as a message may quote it: cut to ``limit`` characters, the
    cut marked (:func:`~agentloop.shared.base.text.cut`)."""
    return cut(text, limit)


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


# Failure types of the run's activities ------------------------------------------------
#
# The ApplicationError ``type=`` strings the providers and the transcript
# cache raise, and the workflow reads: one name each, imported by both sides
# (runs in flight and ops dashboards match on the strings; never rename one).

#: A request longer than the model's context window: the run compacts its
#: history and takes the step again (non-retryable as an activity failure).
MODEL_CONTEXT_LENGTH_ERROR_TYPE = "ModelContextLengthExceeded"
#: The provider refused the credentials (401/403).
MODEL_AUTHENTICATION_ERROR_TYPE = "ModelAuthenticationError"
#: Any other 4xx: the request is wrong and will not get better by retrying.
MODEL_BAD_REQUEST_ERROR_TYPE = "ModelBadRequest"
#: 429: retried, with the server's retry-after as the next delay.
MODEL_RATE_LIMITED_ERROR_TYPE = "ModelRateLimited"
#: 5xx, 408 and 409: retried.
MODEL_SERVER_ERROR_TYPE = "ModelServerError"
#: The provider could not be reached, or the connection dropped: retried.
MODEL_CONNECTION_ERROR_TYPE = "ModelConnectionError"
#: A stream broke off, sent an error event, or ended without a finish reason: retried.
MODEL_STREAM_BROKEN_ERROR_TYPE = "ModelStreamBroken"
#: A provider error that fits none of the above.
MODEL_ERROR_TYPE = "ModelError"
#: The worker cannot serve the model string (malformed, unknown provider,
#: missing key): non-retryable.
MODEL_CONFIGURATION_ERROR_TYPE = "ModelConfigurationError"
#: A scripted model has no entry for the step asked of it.
SCRIPT_EXHAUSTED_ERROR_TYPE = "ScriptExhausted"
#: The worker's transcript does not match the run's after a refetch: retried.
TRANSCRIPT_MISMATCH_ERROR_TYPE = "TranscriptMismatch"
#: No worker answered the run's transcript queries in time: retried.
TRANSCRIPT_UNAVAILABLE_ERROR_TYPE = "TranscriptUnavailable"
#: A tool of the run's spec cannot give its definition on the worker (its
#: ``definition()`` raised): non-retryable, the run fails with it.
TOOL_DEFINITION_ERROR_TYPE = "ToolDefinitionError"


def build_request(model: type[Any], **fields: Any) -> Any:
    """Build a request model (an approval, tool outputs, a message) before it
    is sent; a field over its limit raises :class:`DecisionRejected`, and
    nothing is sent."""
    from pydantic import ValidationError

    try:
        return model(**fields)
    except ValidationError as exc:
        raise DecisionRejected(
            f"invalid {model.__name__} request: {describe_validation_error(exc)}; nothing was sent"
        ) from None


def checked(value: _V, problem: Callable[[_V], str | None]) -> _V:
    """``value``, when ``problem`` finds nothing wrong with it (the body of a
    field validator over a ``*_problem`` function: tenant, priority, lane).

    Raises:
        ValueError: With ``problem``'s sentence.
    """
    if found := problem(value):
        raise ValueError(found)
    return value
