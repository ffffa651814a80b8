"""The one way tests wait for something that happens on its own time: a
run reaching a state, a process appearing or going, a file being written."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def eventually(
    check: Callable[[], T | Awaitable[T]],
    what: str,
    timeout: float = 30.0,
    *,
    ignoring: tuple[type[BaseException], ...] = (),
    interval: float = 0.05,
) -> T:
    """Call ``check`` (plain or async) until it returns something truthy, and
    return that. Exceptions of the ``ignoring`` types count as "not yet" (a
    run queried before its first workflow task). After ``timeout`` seconds,
    an AssertionError names ``what`` and the last value seen."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            value = check()
            if inspect.isawaitable(value):
                value = await value
        except ignoring as err:
            value, last = None, err
        else:
            if value:
                return value
            last = value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}; last seen: {last!r}")
        await asyncio.sleep(interval)
