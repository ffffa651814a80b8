"""Which attempt of an activity this is, in the words error messages use.

A retryable error's message ends by saying what happens next: on an attempt
Temporal will retry, that the step is retried; on the last attempt the retry
policy allows, that it was the last one, so that the run's failure does not
promise a retry that never comes.
"""

from __future__ import annotations

from temporalio import activity


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
