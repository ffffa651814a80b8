"""The event reader: a run's events, live, from its Workflow Streams topic
(:meth:`~agentloop.AgentRunHandle.events` reads through it)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.client import (
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
    WorkflowUpdateStage,
)
from temporalio.contrib.workflow_streams import PollInput, PollResult
from temporalio.service import RPCError, RPCStatusCode

from agentloop.shared.base.errors import UserError
from agentloop.shared.runs.events import (
    EVENT_ADAPTER,
    EVENTS_TOPIC,
    AgentEvent,
    SubAgentInvocationCompleted,
    SubAgentInvocationStarted,
    TurnEnded,
    is_terminal,
)

#: Workflow Streams' rejection of a long-poll while the run hands over.
STREAM_DRAINING_ERROR_TYPE = "StreamDraining"

# The client's one logger, whichever of its modules writes.
_log = logging.getLogger("agentloop.client.agent_client")

#: How long a sub-agent's events are waited for when its parent has announced
#: it but the server has not created its run yet, in seconds.
CHILD_START_WAIT_SECONDS = 10.0

_POLL_QUERY = "__temporal_workflow_stream_poll"
#: The Workflow Streams long-poll update: same name as the query, waits in
#: the workflow until an item past the offset exists.
_POLL_UPDATE = _POLL_QUERY

#: How long one long-poll waits before the reader checks the run is still
#: open and asks again (the same update, by its id), in seconds.
WAIT_BOUND_SECONDS = 20.0


class EventReader:
    """Reads one run's events (a thread's turn's, with ``turn``)."""

    def __init__(self, handle: WorkflowHandle, turn: int | None = None, *, wait: bool = False) -> None:
        self._handle = handle
        self.run_id = handle.id
        self.turn = turn
        #: Once caught up, wait in the workflow (the long-poll update)
        #: instead of polling; off for good after a run that refuses it.
        self.wait = wait
        self.waits = 0  # long-polls that ended with items (for tests and benchmarks)
        self._waited: PollResult | None = None  # the batch the last wait brought

    async def tree_events(self, from_offset: int, poll_interval: float) -> AsyncIterator[AgentEvent]:
        """This run's events and its sub-agents', merged (see ``AgentRunHandle.events``)."""
        queue: asyncio.Queue[Any] = asyncio.Queue()
        followers: dict[str, asyncio.Task[None]] = {}
        done = object()
        client = self._handle._client

        async def settle() -> None:
            # Followers may start more followers (grandchildren) while we wait.
            while pending := [t for t in followers.values() if not t.done()]:
                await asyncio.gather(*pending, return_exceptions=True)

        async def follow(reader: EventReader, offset: int, top: bool) -> None:
            # A child's started event is published as its start is
            # requested: the server creates the child a moment later.
            async for event in reader.own_events(offset, poll_interval, wait_to_exist=not top):
                if isinstance(event, SubAgentInvocationStarted) and event.child_run_id not in followers:
                    child = EventReader(client.get_workflow_handle(event.child_run_id), wait=self.wait)
                    followers[event.child_run_id] = asyncio.create_task(follow(child, 0, False))
                elif isinstance(event, SubAgentInvocationCompleted) and event.child_run_id in followers:
                    await asyncio.gather(followers[event.child_run_id], return_exceptions=True)
                if top and is_terminal(event):
                    await settle()
                await queue.put(event)

        async def top() -> None:
            try:
                await follow(self, from_offset, True)
                await settle()
                await queue.put(done)
            except BaseException as err:  # noqa: BLE001  (handed to the reader)
                await queue.put(err)

        main = asyncio.create_task(top())
        try:
            while (item := await queue.get()) is not done:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            for task in [main, *followers.values()]:
                task.cancel()

    async def own_events(
        self, from_offset: int, poll_interval: float, *, wait_to_exist: bool = False
    ) -> AsyncIterator[AgentEvent]:
        """This run's events only (see ``AgentRunHandle.events``). With ``wait_to_exist``
        (a sub-agent announced by its parent), a run the server does not know
        yet is waited for, up to :data:`CHILD_START_WAIT_SECONDS`."""
        converter = self._handle._client.data_converter.payload_converter
        offset = from_offset
        quiet_polls = 0
        failures = 0
        while True:
            try:
                # What a wait brought is the batch; otherwise ask.
                batch, self._waited = self._waited, None
                if batch is None or batch.more_ready or not batch.items:
                    batch = await self._handle.query(
                        _POLL_QUERY, PollInput(topics=[EVENTS_TOPIC], from_offset=offset), result_type=PollResult,
                    )
            except RPCError as err:
                failures = await self._poll_failed(err, failures, poll_interval, wait_to_exist)
                continue
            failures = 0
            items = batch.items
            if items and items[0].offset > offset:
                # The run continued as new while this reader was behind, and
                # the next Temporal run did not carry these events.
                items = [*await self.earlier_items(offset, items[0].offset), *items]
            for item in items:
                payload = Payload()
                payload.ParseFromString(base64.b64decode(item.data))
                event = EVENT_ADAPTER.validate_python(converter.from_payload(payload))
                event.seq = item.offset
                yield event
                if is_terminal(event) or self._ends_turn(event):
                    return
            offset = batch.next_offset
            if batch.items:
                quiet_polls = 0
                if batch.more_ready:
                    continue
            else:
                quiet_polls += 1
                # A run that closed without a terminal event (terminated, or
                # started before events existed), or an offset past the end
                # of a closed run: stop once it is quiet.
                if quiet_polls % 20 == 1:
                    description = await self._handle.describe()
                    if description.status != WorkflowExecutionStatus.RUNNING:
                        return
            if not (self.wait and await self.wait_past(offset)):
                await asyncio.sleep(poll_interval)

    async def wait_past(self, offset: int, bound: float = WAIT_BOUND_SECONDS) -> bool:
        """Wait, in the workflow, until the run's stream has an item at
        ``offset`` or later (the Workflow Streams long-poll update), at most
        ``bound`` seconds. True when one exists (the batch it brought is
        the reader's next, unless it is partial); False when the bound passed
        or the run refused (then the caller polls).

        Every reader waiting at one offset of one Temporal run shares one
        update (its id is the run and the offset): asking again after the
        bound, or from a second reader, joins it instead of adding one, so
        a run has one long-poll in flight per offset waited on. A run whose
        workflow does not know the update, or a worker that cannot answer,
        turns waiting off for this reader: it polls from then on.
        """
        topics = PollInput(topics=[EVENTS_TOPIC], from_offset=offset)
        try:
            update = await self._handle.start_update(
                _POLL_UPDATE, topics, id=f"agentloop-events-{self.run_id}-{offset}",
                wait_for_stage=WorkflowUpdateStage.ACCEPTED, result_type=PollResult,
            )
            # Not asyncio.wait_for: the SDK turns the cancel of its wait into
            # an error of its own, which must not hide this reader's cancel.
            waiting = asyncio.ensure_future(update.result())
            try:
                done, _ = await asyncio.wait({waiting}, timeout=bound)
            finally:
                if not waiting.done():
                    waiting.cancel()
                    with contextlib.suppress(BaseException):
                        await waiting
            if not done:
                return False  # the bound passed
            self._waited = waiting.result()
        except WorkflowUpdateRPCTimeoutOrCancelledError:
            return False  # the server's own bound on the wait
        except WorkflowUpdateFailedError as err:
            if getattr(err.cause, "type", None) != STREAM_DRAINING_ERROR_TYPE:
                # Rejected (a workflow without the update) or failed: poll.
                _log.info("run %s: waiting for events refused (%s); polling instead", self.run_id, err.cause)
                self.wait = False
            return False  # a hand-over (continue-as-new) drains the waits: read on
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return False  # the run closed: the caller's next read finds out
            _log.info("run %s: waiting for events refused (%s); polling instead", self.run_id, err)
            self.wait = False
            return False
        self.waits += 1
        return True

    async def _poll_failed(self, err: RPCError, failures: int, poll_interval: float, wait_to_exist: bool) -> int:
        """A poll the server refused: wait and say how many failed in a row,
        or raise a sentence when retrying cannot help."""
        if err.status == RPCStatusCode.NOT_FOUND:
            waited = failures * max(poll_interval, 0.2)
            if not wait_to_exist or waited >= CHILD_START_WAIT_SECONDS:
                raise UserError(f"no run {self.run_id}: {err.message}") from None
            await asyncio.sleep(max(poll_interval, 0.2))
            return failures + 1
        failures += 1
        if "no poller" in err.message and failures >= 3:
            raise UserError(
                f"no worker answers for run {self.run_id} (a run's events are read from its "
                f"workflow, even after it ended): start a worker on its task queue ({err.message})"
            ) from None
        # A run whose first task has not run yet, a continue-as-new
        # hand-over, or a worker restarting: retry.
        await asyncio.sleep(max(poll_interval, 0.2))
        return failures

    def _ends_turn(self, event: AgentEvent) -> bool:
        return self.turn is not None and isinstance(event, TurnEnded) and event.turn == self.turn

    async def earlier_items(self, start: int, end: int) -> list[Any]:
        """The stream's items from ``start`` up to ``end`` that the current
        Temporal run no longer holds (a hand-over carries the recent events
        only; each run keeps its own): read from the runs before it."""
        client = self._handle._client
        found: list[Any] = []
        try:
            run_id: str | None = (await self._handle.describe()).run_id
            while end > start and (run_id := await self._continued_from(run_id)):
                earlier = client.get_workflow_handle(self._handle.id, run_id=run_id)
                if items := await _read_items(earlier, start, end):
                    found[:0] = items
                    end = items[0].offset
        except (RPCError, WorkflowQueryFailedError) as err:
            _log.warning("run %s: events %d to %d are gone with the Temporal run that held them (%s); "
                         "going on from event %d", self.run_id, start, end - 1, err, end)
        return found

    async def _continued_from(self, run_id: str | None) -> str | None:
        """The Temporal run that ``run_id`` continued from, if any."""
        handle = self._handle._client.get_workflow_handle(self._handle.id, run_id=run_id)
        async for event in handle.fetch_history_events(page_size=1):
            return event.workflow_execution_started_event_attributes.continued_execution_run_id or None
        return None


async def _read_items(handle: WorkflowHandle, start: int, end: int) -> list[Any]:
    """One Temporal run's stream items from ``start`` (or its oldest)
    up to ``end``."""
    items: list[Any] = []
    offset = start
    while offset < end:
        batch = await handle.query(_POLL_QUERY, PollInput(topics=[EVENTS_TOPIC], from_offset=offset),
                                   result_type=PollResult)
        items += [item for item in batch.items if item.offset < end]
        if not batch.more_ready:
            break
        offset = batch.next_offset
    return items
