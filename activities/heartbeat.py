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
    *details: object, current: Callable[[], object] | None = None
) -> AsyncIterator[None]:
    """Heartbeat in the background for the duration of the block.

    Cancellation from Temporal is delivered on a heartbeat, so any activity
    that may run long must heartbeat for a cancel to reach it.

    Args:
        details: Fixed heartbeat details.
        current: Called at each beat for the details instead (what the
            activity knows now; the next attempt reads the last of them).
    """
    interval = heartbeat_interval()

    def send() -> None:
        if current is not None:
            activity.heartbeat(current())
        else:
            activity.heartbeat(*details)

    async def beat() -> None:
        while True:
            await asyncio.sleep(interval)
            send()

    # The first beat goes out before the block's first instruction, so even
    # work that never yields to the loop (or waits on a server) is covered.
    send()
    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
