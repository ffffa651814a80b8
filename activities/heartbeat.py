"""Heartbeats while long work runs, so worker loss and cancellation reach us."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

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


def keep_heartbeating(
    *details: object, current: Callable[[], object] | None = None, beat_now: bool = False
) -> Heartbeats:
    """Heartbeat in the background for the duration of an ``async with`` block.

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
    return Heartbeats(details, current, beat_now)


class Heartbeats:
    """The context manager :func:`keep_heartbeating` returns.

    A class with slots and a timer rather than a generator-based context
    manager and a task: every LLM step and tool call holds one for as long
    as it runs, so it is a few objects instead of some twenty for the
    garbage collector to walk (docs/performance.md). A beat that fails
    (details that do not serialise: a bug) stops the beats and fails the
    block when it ends.
    """

    __slots__ = ("_beat_now", "_current", "_details", "_failure", "_interval", "_timer")

    def __init__(self, details: tuple[object, ...], current: Callable[[], object] | None, beat_now: bool) -> None:
        self._details, self._current, self._beat_now = details, current, beat_now
        self._interval = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._failure: Exception | None = None

    async def __aenter__(self) -> None:
        if activity.info().is_local:
            return  # a local activity cannot heartbeat: its workflow task is its lease
        self._interval = heartbeat_interval()
        if self._beat_now:
            self._send()
        self._timer = asyncio.get_running_loop().call_later(self._interval, self._beat)

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if exc_type is None and self._failure is not None:
            raise self._failure

    def _send(self) -> None:
        if self._current is not None:
            activity.heartbeat(self._current())
        else:
            activity.heartbeat(*self._details)

    def _beat(self) -> None:
        try:
            self._send()
        except Exception as exc:  # e.g. details that do not serialise: fail the block, as a bug should
            self._failure = exc
            self._timer = None
            return
        self._timer = asyncio.get_running_loop().call_later(self._interval, self._beat)
