"""This process's live sinks: where a worker's live pieces go (docs/live-deltas.md).

A worker's :class:`~agentloop.activities.stream_publisher.DeltaPublisher`
hands every text and thinking delta (and a retried attempt's reset) to
"a live sink" as a dict of ``LivePiece``'s fields: ``run_id``,
``message_id``, ``step``, ``attempt``, ``kind``, ``text``, ``at`` (and
``reason``). Two kinds exist: the HTTP sender that posts to a gateway's
``/internal/live`` door (``agentloop.activities.live_sender``), and a
gateway of this very process (embedded ``agentloop serve``), which
registers itself here with :func:`in_process` and is then given the pieces
in memory: no HTTP, no secret, no door. The worker side reads this
registry; the gateway side writes it; neither imports the other.

``AGENTLOOP_LIVE=off`` turns live deltas off on both sides.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

#: ``off`` (or ``0``, ``false``, ``no``) turns live deltas off, whatever else is set.
LIVE_ENV = "AGENTLOOP_LIVE"


class LiveSink(Protocol):
    """Takes one live piece; never blocks, never raises."""

    def offer(self, piece: dict[str, Any]) -> None: ...


_local: list[LiveSink] = []


def live_off(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``AGENTLOOP_LIVE`` turns live deltas off."""
    env = os.environ if environ is None else environ
    return env.get(LIVE_ENV, "").strip().lower() in ("off", "0", "false", "no")


def local_sink() -> LiveSink | None:
    """The gateway of this process that takes live pieces in memory, if any
    (the one registered last)."""
    return _local[-1] if _local else None


@contextlib.contextmanager
def registered(items: list[T], item: T) -> Iterator[T]:
    """``item`` in ``items`` for the block (the last one registered counts)."""
    items.append(item)
    try:
        yield item
    finally:
        with contextlib.suppress(ValueError):
            items.remove(item)


def in_process(sink: LiveSink) -> contextlib.AbstractContextManager[LiveSink]:
    """Register ``sink`` as this process's gateway for the block."""
    return registered(_local, sink)


#: How long a run nobody follows is left alone: first FIRST_MUTE_SECONDS,
#: doubling while nobody follows, up to MUTE_SECONDS (a client that asks for
#: a run's events just after starting it soon gets them live, and a run
#: nobody follows costs about one try a second).
FIRST_MUTE_SECONDS = 0.05
MUTE_SECONDS = 1.0


class Mutes:
    """The runs a sink leaves alone for now, because nobody followed them
    at the gateway when last tried (both sinks, HTTP and in memory)."""

    def __init__(self) -> None:
        self._until: dict[str, tuple[float, float]] = {}  # run id: (until, for how long)

    def muted(self, run_id: str, now: float) -> bool:
        return self._until.get(run_id, (0.0, 0.0))[0] > now

    def followed(self, run_id: str) -> None:
        self._until.pop(run_id, None)

    def unfollowed(self, run_ids: list[str], now: float) -> None:
        for run_id in run_ids:
            span = min(self._until.get(run_id, (0.0, FIRST_MUTE_SECONDS / 2))[1] * 2, MUTE_SECONDS)
            self._until[run_id] = (now + span, span)
        if len(self._until) > 10_000:
            self._until = {r: m for r, m in self._until.items() if m[0] > now - 60}
