"""The in-process live sink: a worker of this process hands its live pieces
straight to this gateway's hub (docs/live-deltas.md), with no HTTP, secret
or door. It is what the ``/internal/live`` door does for a posted batch,
piece by piece: the same :class:`~agentloop.server.streams.live_door.LivePiece`,
the same :meth:`RunHub.post_live`, so the merge and catch-up are the same.

A run nobody follows here is left alone a while, as the HTTP sender does
(50 ms at first, doubling up to 1 s): its pieces then cost a dict lookup.
A piece offered from another thread or event loop is handed to the hub's
loop; the hub is only ever touched there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from agentloop.server.streams.hub import RunHub
from agentloop.server.streams.live_door import LivePiece
from agentloop.shared.live.sinks import Mutes

log = logging.getLogger("agentloop.stream")

class HubSink:
    """Hands live pieces to ``hub`` on ``loop`` (the gateway's)."""

    def __init__(self, hub: RunHub, loop: asyncio.AbstractEventLoop) -> None:
        self.hub, self.loop = hub, loop
        self._mutes = Mutes()
        self.sent = 0
        self._said = False

    def offer(self, piece: dict[str, Any]) -> None:
        """Take one piece (a dict of ``LivePiece``'s fields); never blocks or raises."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            self._post(piece)
        elif not self.loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                self.loop.call_soon_threadsafe(self._post, piece)

    def _post(self, piece: dict[str, Any]) -> None:
        try:
            self._hand(piece)
        except Exception:  # a model call never fails for a live piece: the history brings its text
            if not self._said:
                self._said = True
                log.exception("a live piece could not be handed to this server's streams; the history brings it")

    def _hand(self, piece: dict[str, Any]) -> None:
        now = self.loop.time()
        run_id = piece.get("run_id", "")
        if self._mutes.muted(run_id, now):
            return
        try:
            live = LivePiece.model_validate(piece)
        except ValidationError:
            log.warning("a live piece of run %s was malformed; dropped", str(run_id)[:200])
            return
        if self.hub.post_live(live.run_id, [(live.event(datetime.now(UTC)), live.at)]):
            self.sent += 1
            self._mutes.followed(live.run_id)
        else:
            self._mutes.unfollowed([live.run_id], now)
