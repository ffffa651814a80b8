"""Which attempt of an activity this is, in the words error messages use.

A retryable error's message ends by saying what happens next: on an attempt
Temporal will retry, that the step is retried; on the last attempt the retry
policy allows, that it was the last one, so that the run's failure does not
promise a retry that never comes. And what earlier attempts of ``call_model``
used and why they failed, carried in its heartbeat details.
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel
from temporalio import activity
from temporalio.exceptions import ApplicationError

from agentloop.shared.base.usage import Usage


def attempt_of() -> tuple[int, int] | None:
    """``(attempt, maximum_attempts)`` of the running activity (maximum 0:
    unlimited), or None outside an activity."""
    try:
        info = activity.info()
    except RuntimeError:  # not in an activity (a model used directly)
        return None
    policy = info.retry_policy
    return info.attempt, (policy.maximum_attempts if policy is not None else 0)


def retry_note(what: str = "the step") -> str:
    """The end of a retryable error's message: what happens next.

    ``"the step is retried (attempt 1 of 5 failed)"``, or on the last attempt
    ``"this was the last attempt (5 of 5), so the step fails"``; outside an
    activity ``"the step can be retried"``.
    """
    known = attempt_of()
    if known is None:
        return f"{what} can be retried"
    attempt, maximum = known
    if maximum and attempt >= maximum:
        return f"this was the last attempt ({attempt} of {maximum}), so {what} fails"
    if maximum:
        return f"{what} is retried (attempt {attempt} of {maximum} failed)"
    return f"{what} is retried (attempt {attempt} failed)"


class AttemptUsage(BaseModel):
    """Heartbeat details of ``call_model``: usage of the failed attempts
    before this one, and of this one so far."""

    failed: Usage = Usage()
    current: Usage = Usage()
    #: Why this attempt failed (sent with the failure), for the next attempt's reset event.
    error: str | None = None


def earlier_attempts() -> tuple[Usage, str | None]:
    """Usage of this call's earlier, failed attempts, and why the last one
    failed (from the last heartbeat the previous attempt sent)."""
    details = activity.info().heartbeat_details
    if not details:
        return Usage(), None
    try:
        last = AttemptUsage.model_validate(details[-1])
    except Exception:  # details from another version: count nothing rather than fail
        return Usage(), None
    return last.failed + last.current, last.error


def failure_reason(exc: BaseException) -> str | None:
    """What a failed attempt's error says, as Temporal's retry shows it."""
    if isinstance(exc, asyncio.CancelledError):
        return None
    return (exc.message if isinstance(exc, ApplicationError) else str(exc)) or type(exc).__name__
