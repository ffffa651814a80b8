"""Server-Sent Events: frames, heartbeats, and where a stream resumes."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any, cast

from fastapi import Request
from fastapi.responses import StreamingResponse

from agentloop.server.problems import Problem
from agentloop.server.streams.hub import IDLE, RunHub
from agentloop.server.streams.live import Seen

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no", "Connection": "keep-alive"}
#: A comment line sent while a stream is idle: keeps proxies from closing it.
HEARTBEAT = ": keep-alive\n\n"


def frame(data: Any, *, event_id: int | None = None) -> str:
    """One SSE event: ``id:`` (the stream offset) and one ``data:`` line of JSON."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"), default=str)
    return head + "".join(f"data: {line}\n" for line in text.splitlines() or [""]) + "\n"


def resume_offset(request: Request, from_: int | None) -> int:
    """Where a stream starts: just after ``Last-Event-ID`` when the client
    reconnects, else at ``?from=`` (an offset, inclusive), else at 0.

    Raises:
        Problem: 422 for a ``Last-Event-ID`` that is not an offset.
    """
    last = request.headers.get("last-event-id")
    if last not in (None, ""):
        try:
            value = int(last)
        except ValueError:
            raise Problem(422, "Invalid Last-Event-ID",
                          f"Last-Event-ID {last[:40]!r} is not an event id of this stream "
                          "(ids are offsets: 0, 1, 2...)") from None
        if value < 0:
            raise Problem(422, "Invalid Last-Event-ID", "Last-Event-ID must be 0 or more")
        return value + 1
    return from_ or 0


class StreamSlots:
    """How many SSE streams are open, in all and per caller, under caps:
    past one, a new stream is 429 with ``Retry-After``."""

    #: Seconds a refused client is asked to wait.
    RETRY_AFTER = 5

    def __init__(self, total: int, per_caller: int) -> None:
        self.total, self.per_caller = total, per_caller
        self.open: dict[str, int] = {}

    def take(self, caller: str) -> Callable[[], None]:
        """A slot for ``caller``'s new stream, and the function that gives it back.

        Raises:
            Problem: 429 when the total or the caller's cap is reached.
        """
        mine, everyone = self.open.get(caller, 0), sum(self.open.values())
        if everyone >= self.total or mine >= self.per_caller:
            whose = (f"this server's {self.total} streams" if everyone >= self.total
                     else f"the {self.per_caller} streams a caller may hold ({caller!r})")
            raise Problem(429, "Too many streams", f"{whose} are open; close one or retry later "
                          "(--max-streams, --max-streams-per-token)", headers={"Retry-After": str(self.RETRY_AFTER)})
        self.open[caller] = mine + 1
        released = False

        def give_back() -> None:
            nonlocal released
            if not released:
                released = True
                self.open[caller] -= 1
                if not self.open[caller]:
                    del self.open[caller]

        return give_back


def event_stream(frames: AsyncIterator[Any], release: Callable[[], None] | None = None) -> StreamingResponse:
    """A ``text/event-stream`` response of ``frames`` (strings), with a
    heartbeat comment for each :data:`IDLE`; ``release`` is called when it ends."""

    async def body() -> AsyncIterator[str]:
        try:
            yield "retry: 1000\n\n"
            async for item in frames:
                yield HEARTBEAT if item is IDLE else item
        finally:
            if release is not None:
                release()

    return StreamingResponse(body(), media_type="text/event-stream", headers=SSE_HEADERS)


#: The header of a streaming start (``POST /v1/runs/stream``, a thread's
#: ``.../messages/stream``) that names the run it started (docs/http-api.md).
RUN_ID_HEADER = "X-Agentloop-Run-Id"
#: The OpenAPI answer of a route that streams a run's events.
SSE_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {"description": "Server-Sent Events: `id:` the event's offset, `data:` the event as JSON; "
                         "heartbeat comments while idle; the stream ends after the run's terminal event",
          "content": {"text/event-stream": {"schema": {"type": "string"}}}}}


async def native_frames(hub: RunHub, run_id: str, offset: int, idle: float | None,
                        until: Callable[[Any], bool] | None = None) -> AsyncIterator[Any]:
    """The frames of run ``run_id``'s events from ``offset`` on, live deltas
    merged (docs/events.md), :data:`IDLE` after each ``idle`` seconds of
    nothing; ending after the run's terminal event, or after the first event
    ``until`` is true of (a thread's turn's end)."""
    subscribed = cast(AsyncGenerator[Any, None], hub.subscribe(run_id, offset, idle=idle, live=hub.live))
    async with contextlib.aclosing(subscribed) as events:
        async for event in events:
            if event is IDLE:
                yield event
            elif isinstance(event, Seen):  # shown live already: its id alone (docs/events.md)
                yield f"id: {event.seq}\n\n"
            else:
                yield hub.rendered(event, "native", _native_frame)
                if until is not None and until(event):
                    return


def _native_frame(event: Any) -> str:
    return frame(event.model_dump(mode="json"), event_id=event.seq)
