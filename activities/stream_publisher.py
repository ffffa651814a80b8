"""Publishes an LLM step's deltas on the run's event stream, in batches.

The first delta of a message goes out at once when it is text or thinking
(its time to first token is then a signal, not a batch window; a tool
call's start waits for the window, as an answer of calls alone often ends
within it and then costs no signal), and so does a delta that comes after a
quiet spell of at least ``batch_seconds`` (a slow provider's deltas each go
out as they come); deltas that follow one another closer than that are
gathered for ``batch_seconds`` from the first of them, as before. So the
batching adapts to the pace of the deltas, and a message costs at most one
signal more than the fixed window of earlier releases (``leading = False``,
kept for comparison). Deltas waiting are merged (consecutive text of one
kind, argument fragments of one call), so a batch is one signal with few
items. Each signal is a workflow task of the run, so a step publishes only
what is worth a signal: when the provider's answer is complete, deltas not
published yet are dropped, since ``thread.message.completed`` carries the
whole message and follows at once (a batch already on its way is delivered
first, so deltas never come after their message). An answer that comes
whole (no pause between its deltas) costs no signal at all. Streaming is best
effort: a failure to publish is logged and never fails the LLM step, whose
result the workflow records anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.contrib.workflow_streams import WorkflowStreamClient

from agentloop.activities.live_sender import live_sender
from agentloop.shared.definition.activity_io import StreamDelta
from agentloop.shared.live.sinks import LiveSink
from agentloop.shared.runs.events import EVENTS_TOPIC, MessageDelta, MessageReset, ToolCallCreated, message_id

log = logging.getLogger("agentloop.stream")

#: How long the final flush may retry before the step gives up on it.
FINAL_FLUSH_SECONDS = 10.0


class DeltaPublisher:
    """``async with DeltaPublisher(...) as p: model.complete(req, on_delta=p.add)``.

    Args:
        run_id: The run (workflow id) whose stream receives the deltas.
        step: The step, for the message id.
        attempt: This activity attempt; above 1, a reset is published first
            so subscribers drop the failed attempt's partial message.
        batch_seconds: Most time a delta waits before it is published, and
            the least time between two batches.
        client: The stream client; from the activity context when None.
        reset_reason: Why the attempt before failed, carried by the reset.
    """

    def __init__(
        self,
        run_id: str,
        step: int,
        attempt: int,
        batch_seconds: float,
        client: WorkflowStreamClient | None = None,
        reset_reason: str | None = None,
    ) -> None:
        self.run_id = run_id
        self.reset_reason = reset_reason
        self.step = step
        self.attempt = attempt
        self.message_id = message_id(run_id, step)
        self.batch_seconds = batch_seconds
        # Made at the first batch: an answer streamed within one window never needs one.
        self._client = client
        self._topic: Any = None
        # What waits for the next batch: (arrival time, first delta, texts),
        # consecutive texts of one kind and call gathered in one entry, and
        # a reset as (time, None, []). Events are made only for a batch that
        # is published: the deltas of an answer that completes within one
        # window are dropped without ever becoming events.
        self._pending: list[tuple[datetime, StreamDelta | None, list[str]]] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._broken = False
        self.published = 0
        self._last_arrival: float | None = None  # loop time of the last delta added
        self._started = False  # a batch was sent (or is being sent)
        self._at_once = False  # the batch waiting began after a quiet spell
        # Live deltas (docs/events.md): each text and thinking delta also goes
        # to the gateway at once, with where it starts in this attempt's text.
        self._live: LiveSink | None = live_sender()
        self._live_at: dict[str, int] = {}

    #: Whether a delta after a quiet spell (the first of a message, too) goes
    #: out at once; False waits a whole window for every batch (the batching
    #: of earlier releases, which the benchmarks compare against).
    leading: bool = True

    async def __aenter__(self) -> DeltaPublisher:
        if self.attempt > 1:
            self._send_live("reset", self.reset_reason)
            self._pending.append((_now(), None, []))
            self._at_once = self.leading
            self._start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        # The answer is complete: deltas not handed to the stream yet are
        # dropped (the completed message follows), except a reset, which
        # tells subscribers to drop an earlier attempt's partial message.
        self._pending = [entry for entry in self._pending if entry[1] is None]
        if not self._pending and self._topic is None:
            return  # nothing was ever published: nothing to flush either
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._flush(), FINAL_FLUSH_SECONDS)

    def add(self, delta: StreamDelta) -> None:
        """Queue one delta (the ``on_delta`` of ``ChatModel.complete``)."""
        if delta.kind in ("tool_call_end", "usage"):
            # The workflow announces finished calls with their parsed
            # arguments, and usage with the completed message.
            return
        if self._live is not None and delta.kind in ("text", "thinking") and delta.text:
            self._send_live(delta.kind, delta.text)
        now = asyncio.get_running_loop().time()
        quiet = self._last_arrival is None or now - self._last_arrival >= self.batch_seconds
        self._last_arrival = now
        if delta.kind != "tool_call_start" and self._pending:
            _, last, texts = self._pending[-1]
            if last is not None and last.kind == delta.kind and last.call_id == delta.call_id:
                texts.append(delta.text)
                return
        if not self._pending:
            # The first delta of a message goes at once only when it is text
            # a person watches arrive: a tool call's start waits, as an
            # answer of calls alone (most agent steps) often ends within a
            # window and then costs no signal.
            first = self.published == 0 and not self._started
            self._at_once = self.leading and quiet and (not first or delta.kind in ("text", "thinking"))
        self._pending.append((_now(), delta, [delta.text]))
        self._start()

    def _send_live(self, kind: str, text: str | None) -> None:
        if self._live is None:
            return
        at = self._live_at.get(kind, 0)
        piece = {"run_id": self.run_id, "message_id": self.message_id, "step": self.step,
                 "attempt": self.attempt, "kind": kind, "at": at}
        if kind == "reset":
            piece["reason"] = text
        else:
            piece["text"] = text
            self._live_at[kind] = at + len(text or "")
        self._live.offer(piece)

    def _start(self) -> None:
        self._wake.set()
        if self._task is None:  # the first delta: an answer without any needs no task
            self._task = asyncio.create_task(self._run())

    def _event(self, time: datetime, delta: StreamDelta | None, texts: list[str]) -> Any:
        """The stream event of one pending entry."""
        common: dict[str, Any] = {"run_id": self.run_id, "step": self.step, "time": time,
                                  "message_id": self.message_id, "attempt": self.attempt}
        if delta is None:
            return MessageReset(**common, reason=self.reset_reason)
        if delta.kind == "tool_call_start":
            return ToolCallCreated(**common, call_id=delta.call_id or "", name=delta.name or "")
        return MessageDelta(**common, delta=delta.model_copy(update={"text": "".join(texts)}))

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            # Gather the batch: a delta waits at most batch_seconds; the first
            # after a quiet spell not at all.
            if not self._at_once:
                await asyncio.sleep(self.batch_seconds)
            self._wake.clear()
            self._started = True
            await self._flush()

    async def _flush(self) -> None:
        # A flush cancelled half-way (the step ended) leaves its batch in the
        # stream client's buffer; flushing again sends it, deduplicated.
        if self._broken:
            return
        batch, self._pending = self._pending, []
        if not batch and self._topic is None:
            return  # nothing was ever published: nothing to flush either
        try:
            if self._topic is None:
                self._client = self._client or WorkflowStreamClient.from_within_activity(
                    max_retry_duration=timedelta(seconds=60)
                )
                self._topic = self._client.topic(EVENTS_TOPIC)
            client = self._client
            assert client is not None  # set before the topic, which is set by now
            for entry in batch:
                self._topic.publish(self._event(*entry))
            await client.flush()
            self.published += len(batch)
        except Exception as exc:  # streaming is best effort: the step goes on
            self._broken = True
            log.warning("run %s step %d: could not publish deltas (%s); the step continues without them",
                        self.run_id, self.step, exc)


def _now() -> datetime:
    return datetime.now(UTC)
