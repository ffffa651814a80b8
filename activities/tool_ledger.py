"""The worker's ledger of tool calls it completed, so a retry does not run them again.

A tool call is one ``execute_tool`` activity. When its worker cannot report
the result (the Temporal server is unreachable for longer than the run's
heartbeat timeout), Temporal retries the activity, with the same activity id,
though the tool already ran. The ledger remembers each result this worker
produced, keyed by the call's :func:`idempotency_key`; a retried attempt that
lands on the same worker returns the recorded result instead of running the
tool again.

The ledger lives in the worker's memory only: a retry on another worker, or
after this worker restarted, runs the tool again. Entries are bounded in
number, in bytes and in age; the oldest go first.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from agentloop.shared.definition.activity_io import ExecuteToolResult


def idempotency_key(workflow_id: str, workflow_run_id: str, activity_id: str) -> str:
    """The key of one tool call, the same on every attempt of its activity.

    The workflow's run id is part of it because activity ids restart at 1
    after continue-as-new: without it, calls of a run's next segment would
    share keys with the calls of the one before.
    """
    return f"{workflow_id}/{workflow_run_id}/{activity_id}"


@dataclass(frozen=True, slots=True)
class _Entry:
    #: The result as JSON: a worker keeps thousands of entries, and bytes
    #: give the garbage collector nothing to walk (objects would, several each).
    result: bytes
    attempt: int
    recorded_at: float

    @property
    def size(self) -> int:
        return len(self.result)


@dataclass
class LedgerStats:
    """How the ledger has served calls (for tests and logs)."""

    recorded: int = 0
    replayed: int = 0
    evicted: int = 0


class ToolLedger:
    """Results of completed tool calls by idempotency key, in memory.

    Args:
        max_entries: Most results kept.
        max_bytes: Most bytes of results kept (their JSON size); a result
            larger than this is not kept at all.
        ttl_seconds: How long a result is kept. A retry comes after the
            server is back and the attempt's heartbeat timeout has passed, so
            this bounds the outage (plus heartbeat timeout) the ledger covers.
        clock: Seconds, monotonic (for tests).
    """

    def __init__(
        self,
        *,
        max_entries: int = 2048,
        max_bytes: int = 32 * 1024 * 1024,
        ttl_seconds: float = 3600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.ttl_seconds = ttl_seconds
        self._clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._bytes = 0
        self.stats = LedgerStats()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size_bytes(self) -> int:
        """Bytes of results held."""
        return self._bytes

    def record(self, key: str, result: ExecuteToolResult, *, attempt: int) -> None:
        """Remember the result of the call ``key``, produced by ``attempt``."""
        data = result.model_dump_json().encode()
        self._drop(key)
        if len(data) > self.max_bytes or self.max_entries <= 0:
            return
        self._entries[key] = _Entry(data, attempt, self._clock())
        self._bytes += len(data)
        self.stats.recorded += 1
        self._trim()

    def lookup(self, key: str) -> tuple[ExecuteToolResult, int] | None:
        """The recorded result of ``key`` and the attempt that produced it,
        or None when there is none (or it expired)."""
        self._trim()
        entry = self._entries.get(key)
        if entry is None:
            return None
        return ExecuteToolResult.model_validate_json(entry.result), entry.attempt

    def _drop(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._bytes -= entry.size

    def _trim(self) -> None:
        expired_before = self._clock() - self.ttl_seconds
        while self._entries:
            key, oldest = next(iter(self._entries.items()))
            if (
                oldest.recorded_at >= expired_before
                and len(self._entries) <= self.max_entries
                and self._bytes <= self.max_bytes
            ):
                break
            self._drop(key)
            self.stats.evicted += 1
