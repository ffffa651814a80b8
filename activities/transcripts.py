"""The worker's cache of run transcripts, filled from the run's queries.

A step's input names its transcript by length and hash
(:class:`~agentloop.transcript.TranscriptRef`); this cache holds what the
worker has already seen of each recent run and asks the run for the rest.
A worker that never saw the run, or restarted, fetches the whole transcript
once. A hash that does not match (the run pruned or compacted its history)
refetches from the start.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from temporalio.exceptions import ApplicationError

from agentloop.activity_io import ToolDefinition
from agentloop.messages import Message
from agentloop.transcript import (
    EMPTY_HASH,
    ModelContext,
    TranscriptPage,
    TranscriptRange,
    TranscriptRef,
    chain_hash,
)

FetchContext = Callable[[], Awaitable[ModelContext]]
FetchPage = Callable[[TranscriptRange], Awaitable[TranscriptPage]]


@dataclass
class _Run:
    context: ModelContext | None = None
    messages: list[Message] = field(default_factory=list)
    hashes: list[str] = field(default_factory=list)


@dataclass
class CacheStats:
    """How the cache has served steps (for tests and logs)."""

    hits: int = 0
    fetched_messages: int = 0
    full_fetches: int = 0
    context_fetches: int = 0


class TranscriptCache:
    """Transcripts of the ``max_runs`` most recently used runs.

    Args:
        max_runs: Runs kept; the least recently used is dropped first.
    """

    def __init__(self, max_runs: int = 256) -> None:
        self.max_runs = max_runs
        self._runs: OrderedDict[str, _Run] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}
        self.stats = CacheStats()

    def forget(self, key: str) -> None:
        """Drop a run's transcript."""
        self._runs.pop(key, None)

    async def resolve(
        self, key: str, ref: TranscriptRef, fetch_context: FetchContext, fetch_page: FetchPage
    ) -> tuple[str, list[ToolDefinition], list[Message]]:
        """System prompt, tools and messages of the transcript ``ref`` names.

        Raises:
            ApplicationError: Retryable, when the run's transcript does not
                match ``ref`` even after a full fetch.
        """
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            run = self._runs.pop(key, None) or _Run()
            self._runs[key] = run
            while len(self._runs) > self.max_runs:
                old, _ = self._runs.popitem(last=False)
                self._locks.pop(old, None)

            if run.context is None or run.context.context_hash != ref.context_hash:
                run.context = await fetch_context()
                self.stats.context_fetches += 1
            if not self._matches_prefix(run, ref):
                run.messages, run.hashes = [], []
                self.stats.full_fetches += 1
            elif len(run.messages) == ref.message_count:
                self.stats.hits += 1
            await self._fill(run, ref, fetch_page)
            if not run.hashes or run.hashes[-1] != ref.transcript_hash:
                if ref.message_count == 0 and ref.transcript_hash == EMPTY_HASH:
                    pass
                else:
                    # Our copy diverged (e.g. the run rewrote its history): start over once.
                    run.messages, run.hashes = [], []
                    self.stats.full_fetches += 1
                    await self._fill(run, ref, fetch_page)
                    if not run.hashes or run.hashes[-1] != ref.transcript_hash:
                        self.forget(key)
                        raise ApplicationError(
                            f"the transcript fetched from run {key} does not match the step's "
                            f"reference ({ref.message_count} messages); retrying",
                            type="TranscriptMismatch",
                        )
            return run.context.system_prompt, list(run.context.tools), list(run.messages)

    @staticmethod
    def _matches_prefix(run: _Run, ref: TranscriptRef) -> bool:
        # What we hold must be a prefix of the transcript asked for; a longer
        # copy means the run shortened its transcript (compaction).
        return len(run.messages) <= ref.message_count

    async def _fill(self, run: _Run, ref: TranscriptRef, fetch_page: FetchPage) -> None:
        while len(run.messages) < ref.message_count:
            page = await fetch_page(TranscriptRange(start=len(run.messages)))
            if not page.messages:
                raise ApplicationError(
                    f"the run has {page.total} messages, the step asked for {ref.message_count}; retrying",
                    type="TranscriptMismatch",
                )
            previous = run.hashes[-1] if run.hashes else EMPTY_HASH
            for message in page.messages[: ref.message_count - len(run.messages)]:
                previous = chain_hash(previous, message)
                run.messages.append(message)
                run.hashes.append(previous)
                self.stats.fetched_messages += 1
