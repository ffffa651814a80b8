"""Heartbeats while long work runs, so worker loss and cancellation reach us."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

from temporalio import activity


def heartbeat_interval(default: float = 1.0) -> float:
    """How often to heartbeat: every second, or a third of the activity's
    heartbeat timeout when that is shorter. A cancel arrives on a heartbeat's
    answer, so this (with the worker's 1 s heartbeat throttle) is how soon a
    cancelled LLM call or tool notices."""
    timeout = activity.info().heartbeat_timeout
    if timeout is None:
        return default
    return max(0.2, min(default, timeout.total_seconds() / 3))


@contextlib.asynccontextmanager
async def keep_heartbeating(
    *details: object, current: Callable[[], object] | None = None, beat_now: bool = False
) -> AsyncIterator[None]:
    """Heartbeat in the background for the duration of the block.

    Cancellation from Temporal is delivered on a heartbeat, so any activity
    that may run long must heartbeat for a cancel to reach it. The first
    beat goes out one interval in (:func:`heartbeat_interval`, well inside
    the heartbeat timeout, which runs from the attempt's start): a block
    that ends sooner, as most tool calls and many model calls do, costs the
    server no heartbeat at all (each one is a write of the run's state).

    Args:
        details: Fixed heartbeat details.
        current: Called at each beat for the details instead (what the
            activity knows now; the next attempt reads the last of them).
        beat_now: Send the first beat at once, before the block's first
            instruction: for details the next attempt must find even if
            this one is lost within its first interval.
    """
    if activity.info().is_local:
        yield  # a local activity cannot heartbeat: its workflow task is its lease
        return
    interval = heartbeat_interval()

    def send() -> None:
        if current is not None:
            activity.heartbeat(current())
        else:
            activity.heartbeat(*details)

    # A timer rather than a task: most blocks end before the first beat, and
    # a task to create, cancel and await costs every tool call and LLM step.
    loop = asyncio.get_running_loop()
    failure: list[Exception] = []

    def beat() -> None:
        nonlocal timer
        try:
            send()
        except Exception as exc:  # e.g. details that do not serialise: fail the block, as a bug should
            failure.append(exc)
            return
        timer = loop.call_later(interval, beat)

    if beat_now:
        send()
    timer = loop.call_later(interval, beat)
    try:
        yield
    finally:
        timer.cancel()
    if failure:
        raise failure[0]
