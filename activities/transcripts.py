"""The worker's cache of run transcripts, filled from the run's queries.

A step's input names its transcript by length and hash
(:class:`~agentloop.shared.runs.transcripts.TranscriptRef`); this cache holds what the
worker has already seen of each recent run and asks the run for the rest.
A worker that never saw the run, or restarted, fetches the whole transcript
once. A hash that does not match (the run pruned or compacted its history)
refetches from the start.

Most steps need no query at all: the messages a step adds are the assistant
message this worker's ``call_model`` produced and the results its
``execute_tool`` calls produced, so the worker records them as it produces
them (:meth:`TranscriptCache.record_response`,
:meth:`TranscriptCache.record_result`) and the next step checks the
prediction against the step's chained hash. Only a step whose transcript
differs from the prediction (a call answered by policy or an operator, a
verification prompt, a summary, another worker's step) queries the run.

Queries go where the run's workflow lives. After the worker that last ran
it died, the server first offers a query to that worker's sticky queue, and
hands it to the run's task queue only when the sticky queue's
schedule-to-start timeout (10 s, the Python SDK's default) has passed since
the query arrived; so a transcript query takes ~10 s right after a crash
(measured: 10.0 s on the dev server), and gets no answer at all when no
worker for the run's workflow is running.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from pydantic import TypeAdapter
from temporalio.client import (
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from agentloop.activities.attempts import retry_note
from agentloop.shared.base.errors import TRANSCRIPT_MISMATCH_ERROR_TYPE, TRANSCRIPT_UNAVAILABLE_ERROR_TYPE
from agentloop.shared.base.messages import Message, ToolResultPart
from agentloop.shared.definition.activity_io import ToolDefinition, TranscriptSeed
from agentloop.shared.runs.transcripts import (
    EMPTY_HASH,
    ModelContext,
    TranscriptPage,
    TranscriptRange,
    TranscriptRef,
    chain_hash_and_size,
    context_hash,
)

FetchContext = Callable[[], Awaitable[ModelContext]]
FetchPage = Callable[[TranscriptRange], Awaitable[TranscriptPage]]


@dataclass(frozen=True)
class QueryTimeouts:
    """How long the worker waits for a run to answer a transcript query.

    Right after a worker crash a query waits on the dead worker's sticky
    queue (see the module docstring) until the server hands it on: 10 s after
    the query arrived, or at once for a query that arrives after the server
    has noticed that the dead worker stopped polling (~10 s after the
    crash). So the worker asks once with the whole budget, and asks again
    every ``reask`` while no answer came; the first answer wins. Measured
    (worker SIGKILLed mid-step, heartbeat timeout 3 s, `tests/process/workers/test_durability.py`
    scenario): the step's second attempt finished 15.1 s after the kill with
    a single query, 11.2 s with re-asks every 2 s. A slow answer (a worker
    replaying a long history to answer) is still taken, from the first ask.

    ``total`` bounds how long an attempt waits when no worker can answer at
    all (none runs the run's workflow): then the attempt fails with a
    retryable ``TranscriptUnavailable`` and Temporal retries it, instead of
    the attempt sitting on one 30 s query. The attempt heartbeats while it
    waits, so the heartbeat timeout does not bound these numbers.

    Attributes:
        reask: How often a query with no answer is asked again.
        total: Longest wait for one query; 15 s outlasts the server's 10 s
            sticky fallback with room for a worker to replay a long history.
    """

    reask: timedelta = timedelta(seconds=2)
    total: timedelta = timedelta(seconds=15)


_NO_ANSWER = (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED)


async def query_run(
    handle: WorkflowHandle[Any, Any],
    name: str,
    *args: Any,
    result_type: type[Any],
    timeouts: QueryTimeouts,
) -> Any:
    """The answer to the run's query ``name``, asked again every
    ``timeouts.reask`` while none came, for up to ``timeouts.total``.

    Raises:
        ApplicationError: Retryable ``TranscriptUnavailable``, when no ask got
            an answer in time, or the query failed.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeouts.total.total_seconds()
    reask = timeouts.reask.total_seconds()

    async def ask() -> Any:
        rpc_timeout = timedelta(seconds=max(deadline - loop.time(), 0.05))
        return await handle.query(name, *args, result_type=result_type, rpc_timeout=rpc_timeout)

    asks: set[asyncio.Task[Any]] = set()
    next_ask = loop.time()
    no_answer: BaseException | None = None
    try:
        while True:
            now = loop.time()
            if now >= next_ask and now < deadline:
                asks.add(asyncio.create_task(ask()))
                next_ask = now + reask
            if not asks:
                if now >= deadline:
                    break
                await asyncio.sleep(next_ask - now)
                continue
            wait = next_ask - now if next_ask < deadline else None
            done, asks = await asyncio.wait(asks, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                exc = task.exception()
                if exc is None:
                    return task.result()
                if isinstance(exc, RPCError) and exc.status in _NO_ANSWER:
                    no_answer = exc
                elif isinstance(exc, (RPCError, WorkflowQueryFailedError, WorkflowQueryRejectedError)):
                    raise transcript_unavailable(handle.id, name, timeouts.total, exc) from None
                else:
                    raise exc
    finally:
        for task in asks:
            task.cancel()
        await asyncio.gather(*asks, return_exceptions=True)
    raise transcript_unavailable(handle.id, name, timeouts.total, no_answer)


def transcript_unavailable(
    run_id: str, query: str, waited: timedelta, exc: BaseException | None
) -> ApplicationError:
    """The retryable error for a transcript query that failed or got no answer."""
    if exc is None or (isinstance(exc, RPCError) and exc.status in _NO_ANSWER):
        what = (
            f"its {query!r} query got no answer within {waited.total_seconds():g}s: no worker "
            "running the run's workflow answered (one may have just crashed, or none polls the "
            "run's task queue)"
        )
    else:
        reason = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        what = f"its {query!r} query failed: {reason}"
    return ApplicationError(
        f"could not fetch the transcript of run {run_id}: {what}; {retry_note()}",
        type=TRANSCRIPT_UNAVAILABLE_ERROR_TYPE,
        non_retryable=False,
    )


@dataclass(slots=True)
class _Run:
    context: ModelContext | None = None
    messages: list[Message] = field(default_factory=list)
    hashes: list[str] = field(default_factory=list)
    size: int = 0
    #: What this worker produced since the run's last step: the assistant
    #: message of its last LLM step, and the results of that message's calls.
    produced: Message | None = None
    results: dict[str, ToolResultPart] = field(default_factory=dict)

    def append(self, message: Message) -> None:
        digest, size = chain_hash_and_size(self.hashes[-1] if self.hashes else EMPTY_HASH, message)
        self.messages.append(message)
        self.hashes.append(digest)
        self.size += size

    def clear(self) -> None:
        self.messages, self.hashes, self.size = [], [], 0

    def park(self) -> _Parked:
        """The same transcript, its messages as bytes: see :class:`_Parked`."""
        assert self.context is not None
        produced = self.produced.model_dump_json().encode() if self.produced is not None else b""
        return _Parked(context=self.context, messages=_MESSAGES.dump_json(self.messages), produced=produced,
                       hashes=tuple(self.hashes), messages_size=self.size)


_MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


@dataclass(frozen=True, slots=True)
class _Parked:
    """A run whose last LLM step answered without calling a tool, so it has
    most likely ended: its messages kept as JSON. A worker keeps the runs it
    served long after they end (until the cache's bounds push them out); as
    objects, each would cost the garbage collector dozens of objects to walk
    on every full collection, as bytes none. The system prompt and tools
    stay as they were, one copy for all runs of an agent. A run that goes
    on after all (a new message in its conversation, a rejected answer) is
    turned back into objects by its next step, without asking the run
    anything."""

    context: ModelContext
    messages: bytes
    produced: bytes
    hashes: tuple[str, ...]
    messages_size: int

    @property
    def size(self) -> int:
        """Bytes held (messages as JSON, as a live run counts them)."""
        return len(self.messages) + len(self.produced)

    def unpark(self) -> _Run:
        return _Run(
            context=self.context, messages=_MESSAGES.validate_json(self.messages), hashes=list(self.hashes),
            size=self.messages_size,
            produced=Message.model_validate_json(self.produced) if self.produced else None,
        )


@dataclass
class CacheStats:
    """How the cache has served steps (for tests and logs)."""

    hits: int = 0
    fetched_messages: int = 0
    full_fetches: int = 0
    context_fetches: int = 0
    page_fetches: int = 0
    predicted: int = 0
    seeded: int = 0
    parked: int = 0
    unparked: int = 0

    @property
    def queries(self) -> int:
        """Queries the cache sent to runs (transcript pages and model contexts)."""
        return self.page_fetches + self.context_fetches


#: Default bound of the cache: the messages' size as JSON, all runs together.
DEFAULT_MAX_BYTES = 256 * 1024 * 1024


class TranscriptCache:
    """Transcripts of the most recently used runs, bounded by size.

    Args:
        max_bytes: Most bytes of messages (as JSON) kept over all runs; the
            least recently used runs are dropped first. A worker serving more
            runs than fit fetches the transcripts of the dropped ones again.
        max_runs: Most runs kept, whatever their size.
    """

    def __init__(self, max_runs: int = 100_000, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_runs = max_runs
        self.max_bytes = max_bytes
        self._runs: OrderedDict[str, _Run | _Parked] = OrderedDict()
        #: A lock per run with a step resolving its transcript, and how many wait on it.
        self._locks: dict[str, asyncio.Lock] = {}
        self._waiting: dict[str, int] = {}
        #: Runs of one agent share its system prompt and tools: one copy.
        self._contexts: weakref.WeakValueDictionary[str, ModelContext] = weakref.WeakValueDictionary()
        self._bytes = 0
        self.stats = CacheStats()

    @property
    def size(self) -> int:
        """Bytes of messages held now (as JSON), over all runs."""
        return self._bytes

    def forget(self, key: str) -> None:
        """Drop a run's transcript."""
        run = self._runs.pop(key, None)
        if run is not None:
            self._bytes -= run.size

    def record_response(self, key: str, message: Message) -> None:
        """This worker's LLM step for run ``key`` produced ``message``: the
        run's next step will most likely start with it. A message that calls
        no tool most likely ends the run: the run is parked (:class:`_Parked`)."""
        run = self._runs.get(key)
        if not isinstance(run, _Run):
            return
        run.produced, run.results = message, {}
        if not message.tool_calls and run.context is not None and key not in self._locks:
            parked = run.park()
            self._runs[key] = parked
            self._bytes += parked.size - run.size
            self.stats.parked += 1
            self._evict()

    def record_result(self, key: str, result: ToolResultPart) -> None:
        """This worker ran a call of run ``key``'s last step: its result."""
        run = self._runs.get(key)
        if isinstance(run, _Run) and run.produced is not None:
            run.results[result.id] = result

    def _evict(self) -> None:
        while self._runs and (len(self._runs) > self.max_runs or self._bytes > self.max_bytes):
            _, dropped = self._runs.popitem(last=False)
            self._bytes -= dropped.size

    @contextlib.asynccontextmanager
    async def _locked(self, key: str) -> AsyncIterator[None]:
        """One step of a run at a time resolves its transcript; the lock lives
        while steps use it."""
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        self._waiting[key] = self._waiting.get(key, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self._waiting[key] -= 1
            if not self._waiting[key]:
                del self._waiting[key], self._locks[key]

    async def resolve(
        self, key: str, ref: TranscriptRef, fetch_context: FetchContext, fetch_page: FetchPage,
        seed: TranscriptSeed | None = None,
    ) -> tuple[str, list[ToolDefinition], list[Message]]:
        """System prompt, tools and messages of the transcript ``ref`` names
        (a ``seed``, the same by value, spares a cold cache the queries when
        it matches the reference's hashes).

        Raises:
            ApplicationError: Retryable, when the run's transcript does not
                match ``ref`` even after a full fetch.
        """
        async with self._locked(key):
            held = self._runs.pop(key, None)
            if held is not None:
                self._bytes -= held.size
            if isinstance(held, _Parked):
                held = held.unpark()
                self.stats.unparked += 1
            run = self._runs[key] = held or _Run()
            try:
                if seed is not None:
                    self._plant(run, ref, seed)
                await self._resolve(run, key, ref, fetch_context, fetch_page)
            finally:
                self._bytes += run.size
                self._evict()
            assert run.context is not None
            return run.context.system_prompt, list(run.context.tools), list(run.messages)

    async def _resolve(
        self, run: _Run, key: str, ref: TranscriptRef, fetch_context: FetchContext, fetch_page: FetchPage
    ) -> None:
        if run.context is None or run.context.context_hash != ref.context_hash:
            context = await fetch_context()
            run.context = self._contexts.setdefault(context.context_hash, context)
            self.stats.context_fetches += 1
        if not self._matches_prefix(run, ref):
            run.clear()
            self.stats.full_fetches += 1
        elif len(run.messages) == ref.message_count:
            self.stats.hits += 1
        else:
            self._take_produced(run, ref)
        run.produced, run.results = None, {}
        await self._fill(run, ref, fetch_page)
        if not run.hashes or run.hashes[-1] != ref.transcript_hash:
            if ref.message_count == 0 and ref.transcript_hash == EMPTY_HASH:
                pass
            else:
                # Our copy diverged (e.g. the run rewrote its history): start over once.
                run.clear()
                self.stats.full_fetches += 1
                await self._fill(run, ref, fetch_page)
                if not run.hashes or run.hashes[-1] != ref.transcript_hash:
                    # Forgotten: the next attempt starts cold, context included.
                    run.clear()
                    run.context = None
                    raise ApplicationError(
                        f"the transcript fetched from run {key} does not match the step's "
                        f"reference ({ref.message_count} messages); retrying",
                        type=TRANSCRIPT_MISMATCH_ERROR_TYPE,
                        non_retryable=False,
                    )

    def _plant(self, run: _Run, ref: TranscriptRef, seed: TranscriptSeed) -> None:
        """Take a first step's transcript by value, for what the copy lacks,
        if it is exactly what the reference names (both hashes)."""
        if run.context is None or run.context.context_hash != ref.context_hash:
            if context_hash(seed.system_prompt, seed.tools) == ref.context_hash:
                context = ModelContext(system_prompt=seed.system_prompt, tools=list(seed.tools),
                                       context_hash=ref.context_hash)
                run.context = self._contexts.setdefault(ref.context_hash, context)
        if not run.messages and len(seed.messages) == ref.message_count:
            planted = _Run()
            for message in seed.messages:
                planted.append(message)
            if planted.hashes and planted.hashes[-1] == ref.transcript_hash:
                run.messages, run.hashes, run.size = planted.messages, planted.hashes, planted.size
                self.stats.seeded += 1

    def _take_produced(self, run: _Run, ref: TranscriptRef) -> None:
        """Extend the copy with what this worker produced since the last step
        (the assistant message, then its calls' results in call order), when
        that is exactly the transcript the step names: checked by its hash."""
        if run.produced is None:
            return
        predicted = [run.produced]
        calls = run.produced.tool_calls
        if calls and all(c.id in run.results for c in calls):
            predicted.append(Message(role="tool", content=[run.results[c.id] for c in calls]))
        if len(run.messages) + len(predicted) != ref.message_count:
            return
        extended = _Run(messages=list(run.messages), hashes=list(run.hashes), size=run.size)
        for message in predicted:
            extended.append(message)
        if extended.hashes[-1] == ref.transcript_hash:
            run.messages, run.hashes, run.size = extended.messages, extended.hashes, extended.size
            self.stats.predicted += 1

    @staticmethod
    def _matches_prefix(run: _Run, ref: TranscriptRef) -> bool:
        # What we hold must be a prefix of the transcript asked for; a longer
        # copy means the run shortened its transcript (compaction).
        return len(run.messages) <= ref.message_count

    async def _fill(self, run: _Run, ref: TranscriptRef, fetch_page: FetchPage) -> None:
        while len(run.messages) < ref.message_count:
            page = await fetch_page(TranscriptRange(start=len(run.messages)))
            self.stats.page_fetches += 1
            if not page.messages:
                raise ApplicationError(
                    f"the run has {page.total} messages, the step asked for {ref.message_count}; retrying",
                    type=TRANSCRIPT_MISMATCH_ERROR_TYPE,
                    non_retryable=False,
                )
            for message in page.messages[: ref.message_count - len(run.messages)]:
                run.append(message)
                self.stats.fetched_messages += 1
