"""Fan-out: one reader per run, however many clients follow it.

A run's events are read from its workflow (the Workflow Streams poll query)
by one :class:`RunFeed`; every subscriber of the run reads the feed's
buffer. So the worker that holds the run answers the same queries for one
client or for a thousand. A subscriber that asks for events older than the
feed's first reads that gap directly, once, then joins the feed. A feed
outlives its last subscriber by ``linger`` seconds, so a client that
reconnects (``Last-Event-ID``) is served from memory.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Final

from agentloop.server.streams.live import LIVE_KINDS, LiveRecord, LiveView, key
from agentloop.shared.runs.events import MessageCompleted, MessageDelta, is_terminal

if TYPE_CHECKING:
    from agentloop.client.agent_client import AgentClient

#: Yielded by :meth:`RunHub.subscribe` when nothing happened for ``idle`` seconds.
IDLE: Final = object()
#: Rendered frames :meth:`RunHub.rendered` keeps, across runs.
RENDERED_KEPT = 4096
#: Live deltas of a run nobody follows yet are kept this long (a client that
#: starts a run, then asks for its events, is shown its first delta live),
#: for at most EARLY_RUNS runs and EARLY_PIECES pieces each.
EARLY_SECONDS, EARLY_RUNS, EARLY_PIECES = 5.0, 1000, 1000


class RunFeed:
    """The one reader of run ``run_id``, from offset ``start`` on, and the
    events it has read."""

    def __init__(self, client: AgentClient, run_id: str, start: int, poll_interval: float,
                 wait: bool = False, live: bool = False) -> None:
        self.run_id, self.start = run_id, start
        self.events: list[Any] = []
        self.seqs: list[int] = []
        # With live deltas (docs/events.md): the history's events and the live
        # ones in the order they came, as (event, position, live), and a sort
        # key each (a history event's offset; a live one's, that of the history
        # event before it plus a half), the live record, and the text positions.
        self.record = LiveRecord() if live else None
        self.items: list[tuple[Any, int | None, bool]] = []
        self.keys: list[float] = []
        self._at: dict[tuple[str, int, str], int] = {}
        self.done = False
        self.error: BaseException | None = None
        self.subscribers = 0
        self.reads = 0  # events read from the run (for the benchmark's count)
        self._wake = asyncio.Event()
        self._client, self._poll_interval, self._wait = client, poll_interval, wait
        self._task = asyncio.create_task(self._read(), name=f"agentloop-feed-{run_id}")
        self.idle_since: float | None = None

    async def _read(self) -> None:
        try:
            async for event in self._client.events(self.run_id, self.start, poll_interval=self._poll_interval,
                                                   wait=self._wait):
                self.events.append(event)
                self.seqs.append(event.seq if event.seq is not None else len(self.seqs) + self.start)
                if self.record is not None:
                    self._merge(event, self.seqs[-1])
                self.reads += 1
                self._notify()
        except asyncio.CancelledError:
            raise
        except Exception as err:  # handed to every subscriber
            self.error = err
        finally:
            self.done = True
            self._notify()

    def _merge(self, event: Any, seq: int) -> None:
        at = None
        if isinstance(event, MessageDelta) and event.delta.kind in LIVE_KINDS:
            at = self._at.get(key(event), 0)
            self._at[key(event)] = at + len(event.delta.text)
        elif isinstance(event, MessageCompleted) and self.record is not None:
            self.record.completed(event)
        self.items.append((event, at, False))
        self.keys.append(seq)

    def add_live(self, events: list[tuple[Any, int]]) -> None:
        """Live deltas (and resets) with their positions, for the subscribers
        that merge them (:meth:`RunHub.subscribe` with ``live``)."""
        assert self.record is not None
        for event, at in events:
            self.record.add(event, at)
            self.items.append((event, at, True))
            self.keys.append((self.keys[-1] if self.keys else self.start - 1) + 0.5)
        self._notify()

    def _notify(self) -> None:
        wake, self._wake = self._wake, asyncio.Event()
        wake.set()

    def index_of(self, offset: int) -> int:
        """The buffer index of the first event at or after ``offset``."""
        return bisect.bisect_left(self.seqs, offset)

    async def wait(self, idle: float | None) -> bool:
        """Wait for more events (or the end); False after ``idle`` seconds of nothing."""
        wake = self._wake
        try:
            await asyncio.wait_for(wake.wait(), idle)
            return True
        except TimeoutError:
            return False

    async def more(self, idle: float | None) -> Any:
        """After the events read so far: None when the feed has ended (it
        raises what reading the run failed with, if it did), :data:`IDLE`
        after ``idle`` seconds of nothing, else True (more came)."""
        if self.done:
            if self.error is not None:
                raise self.error
            return None
        return True if await self.wait(idle) else IDLE

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task


class RunHub:
    """The feeds of the runs being followed, by run id.

    Args:
        client: Reads the runs.
        poll_interval: A feed's wait between reads once caught up.
        linger: How long a feed with no subscriber is kept.
        wait: Whether a feed caught up waits in the workflow (the long-poll
            update, one in flight per run) instead of polling.
        live: Whether workers post live deltas to this gateway: a feed then
            reads its run from offset 0 (so it knows where each delta's text
            starts) and keeps the live deltas with the history's.
    """

    def __init__(self, client: AgentClient, *, poll_interval: float = 0.05, linger: float = 30.0,
                 wait: bool = False, live: bool = False) -> None:
        self.client, self.poll_interval, self.linger, self.wait = client, poll_interval, linger, wait
        self.live = live
        self._early: OrderedDict[str, tuple[float, list[tuple[Any, int]]]] = OrderedDict()
        self.feeds: dict[str, RunFeed] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._rendered: OrderedDict[tuple[str, int, Any, str, int], str] = OrderedDict()

    def rendered(self, event: Any, kind: str, render: Callable[[Any], str]) -> str:
        """``render(event)``, computed once for all the subscribers of a run
        (the most recent :data:`RENDERED_KEPT` events are kept): a frame is
        serialized once, not once per client."""
        if event.seq is None:
            return render(event)
        # The time tells a run from an earlier one that had its id; a delta's
        # length, a history delta from its part not shown live (live deltas).
        delta = getattr(event, "delta", None)
        key = (event.run_id, event.seq, event.time, kind, len(delta.text) if delta is not None else -1)
        text = self._rendered.get(key)
        if text is None:
            text = self._rendered[key] = render(event)
            if len(self._rendered) > RENDERED_KEPT:
                self._rendered.popitem(last=False)
        return text

    def _feed(self, run_id: str, offset: int) -> RunFeed:
        feed = self.feeds.get(run_id)
        if feed is None or (feed.done and feed.error is not None) or (feed.done and offset < feed.start):
            start = 0 if self.live else offset
            feed = self.feeds[run_id] = RunFeed(self.client, run_id, start, self.poll_interval, self.wait, self.live)
            early = self._early.pop(run_id, None)
            if early is not None and asyncio.get_running_loop().time() - early[0] < EARLY_SECONDS:
                feed.add_live(early[1])
            if self._sweeper is None or self._sweeper.done():
                self._sweeper = asyncio.create_task(self._sweep())
        return feed

    def follow(self, run_id: str) -> None:
        """Begin reading ``run_id`` now, before anyone subscribes (a run
        just started whose client is about to: its first deltas are kept)."""
        self._feed(run_id, 0)

    def post_live(self, run_id: str, events: list[tuple[Any, int]]) -> bool:
        """Hand live deltas of ``run_id`` to its feed; False when no feed
        reads the run here (nobody follows it: the worker may stop sending)."""
        feed = self.feeds.get(run_id)
        if feed is None and self.live:
            self._keep_early(run_id, events)
        if feed is None or feed.record is None or feed.done:
            return False
        feed.add_live(events)
        return True

    def _keep_early(self, run_id: str, events: list[tuple[Any, int]]) -> None:
        now = asyncio.get_running_loop().time()
        since, kept = self._early.pop(run_id, (now, []))
        if now - since >= EARLY_SECONDS:
            since, kept = now, []
        self._early[run_id] = (since, (kept + events)[:EARLY_PIECES])
        while len(self._early) > EARLY_RUNS:
            self._early.popitem(last=False)

    async def subscribe(self, run_id: str, from_offset: int = 0, *, idle: float | None = None,
                        live: bool = False, catch_up: bool = True,
                        accept: Callable[[Any], bool] | None = None) -> AsyncIterator[Any]:
        """The events of ``run_id`` from ``from_offset`` on, live, ending
        after its terminal event; :data:`IDLE` after each ``idle`` seconds
        without one. Raises what reading the run raised (e.g. ``UserError``
        for an unknown run). With ``live`` (on a hub with ``live``), the
        live deltas too, merged (:class:`~agentloop.server.streams.live.LiveView`):
        deltas without a ``seq``, and :class:`~agentloop.server.streams.live.Seen`
        for a history event shown live already; with ``catch_up``, a
        subscriber from an offset past 0 first gets each message it may
        have been shown live in part reset and again whole (as soon as it
        has read what the feed holds). ``accept`` (asked as each live item
        is due) says whether the subscriber shows it now: text it would drop
        (a protocol door that does not follow that part of the run yet) never
        counts as shown; with ``catch_up`` its message is caught up the same
        way once the subscriber takes it, unless it completed before."""
        feed = self._feed(run_id, from_offset)
        feed.subscribers += 1
        feed.idle_since = None
        try:
            if live and feed.record is not None:
                async for item in self._merged(feed, from_offset, idle, catch_up, accept):
                    yield item
                return
            if from_offset < feed.start:
                async for event in self._gap(run_id, from_offset, feed.start):
                    yield event
                    if is_terminal(event):
                        return
            index = feed.index_of(from_offset)
            while True:
                while index < len(feed.events):
                    event = feed.events[index]
                    index += 1
                    yield event
                    if is_terminal(event):
                        return
                waited = await feed.more(idle)
                if waited is None:
                    return
                if waited is IDLE:
                    yield IDLE
        finally:
            feed.subscribers -= 1
            if feed.subscribers == 0:
                feed.idle_since = asyncio.get_running_loop().time()

    async def _merged(self, feed: RunFeed, from_offset: int, idle: float | None, catch_up: bool,
                      accept: Callable[[Any], bool] | None = None) -> AsyncIterator[Any]:
        assert feed.record is not None
        view, index = LiveView(), bisect.bisect_left(feed.keys, from_offset) if from_offset else 0
        behind = feed.record.unfinished(from_offset) if from_offset > 0 and catch_up else set()
        while True:
            while index < len(feed.items):
                event, at, live = feed.items[index]
                index += 1
                mid = getattr(event, "message_id", None)
                takes = accept is None or not (live or mid in behind) or accept(event)
                if not takes:  # not shown now: caught up when the subscriber takes it (or left to the history)
                    if catch_up and live:
                        behind.add(event.message_id)
                    elif isinstance(event, MessageCompleted):
                        behind.discard(mid)
                elif mid in behind and event.type != "thread.message.created":
                    behind.discard(mid)  # a client resuming mid-message: it again, whole, first
                    for item in feed.record.catch_up(view, mid):
                        yield item
                if live and not takes:
                    continue
                for item in view.live(event, at or 0) if live else view.history(event, at):
                    yield item
                if not live and is_terminal(event):
                    return
            for item in self._caught_up(feed, view, behind, accept):
                yield item
            waited = await feed.more(idle)
            if waited is None:
                return
            if waited is IDLE:
                yield IDLE

    @staticmethod
    def _caught_up(feed: RunFeed, view: LiveView, behind: set[str],
                   accept: Callable[[Any], bool] | None) -> list[Any]:
        """At the end of what the feed has: each message still behind that is
        streaming, as far as it reached the gateway, now (not at its next
        delta, which a slow provider may be long in sending)."""
        assert feed.record is not None
        out: list[Any] = []
        for mid in sorted(behind):
            message = feed.record.messages.get(mid)
            if message is not None and message.pieces and message.completed_seq is None and \
                    (accept is None or accept(message.pieces[0])):
                behind.discard(mid)
                out += feed.record.catch_up(view, mid)
        return out

    async def _gap(self, run_id: str, start: int, end: int) -> AsyncIterator[Any]:
        async for event in self.client.events(run_id, start, poll_interval=self.poll_interval):
            if event.seq is not None and event.seq >= end:
                return
            yield event

    async def _sweep(self) -> None:
        """Close feeds nobody followed for ``linger`` seconds."""
        loop = asyncio.get_running_loop()
        while self.feeds:
            await asyncio.sleep(min(self.linger, 5.0))
            now = loop.time()
            for run_id, feed in list(self.feeds.items()):
                if feed.subscribers == 0 and feed.idle_since is not None and now - feed.idle_since >= self.linger:
                    del self.feeds[run_id]
                    await feed.close()

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        for feed in self.feeds.values():
            await feed.close()
        self.feeds.clear()
