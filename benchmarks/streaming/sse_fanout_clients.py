"""The readers of ``benchmarks.streaming.sse_fanout``, each kind in a process of its own,
so that neither the worker's CPU nor the other readers' parsing slows them.

Usage::

    python -m benchmarks.streaming.sse_fanout_clients sse GATEWAY_URL
    python -m benchmarks.streaming.sse_fanout_clients direct TEMPORAL_ADDRESS TASK_QUEUE

``sse`` follows a run with N SSE clients of ``agentloop serve`` (a fifth of
them, every fifth from the fifth, hang up after 5 events and reconnect with
``Last-Event-ID``); ``direct`` follows it with one ``AgentClient.events()``
reader (the baseline). The process prints ``ready`` once set up, then reads
one line ``RUN_ID N`` per run on stdin (``N`` is 1 for ``direct``) and
answers with ``connected`` when every reader has had the run's first event,
then one JSON line: ``{"readings": [{"offsets": [...], "latencies": [...],
"terminal": ...}, ...], "cpu_ms": ..., "seconds": ...}``, a reading per
reader in order, ``latencies`` the receipt time (``time.time()``) minus each
marker's time in ms, ``cpu_ms`` this process's user + system time from the
line to the answer and ``seconds`` the wall time of the same span. It ends
at the end of its input.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

from benchmarks.streaming.stream_latency import MARKER

#: Every this-th SSE client (from the this-th) hangs up after HANG_UP_AFTER events and reconnects.
RECONNECT_EVERY = 5
HANG_UP_AFTER = 5
TERMINAL = ("thread.run.completed", "thread.run.failed", "thread.run.cancelled")


@dataclass
class Reading:
    """What one reader saw: the offsets of its events, in order, and per-marker latencies (ms)."""

    offsets: list[int] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    terminal: bool = False


def reconnects(index: int) -> bool:
    """Whether the SSE client at ``index`` hangs up mid-run and reconnects."""
    return index % RECONNECT_EVERY == RECONNECT_EVERY - 1


def _markers(event: dict[str, Any], received: float, into: list[float]) -> None:
    if event.get("type") == "thread.message.delta" and event["delta"].get("kind") == "text":
        into.extend((received - float(s)) * 1000 for s in MARKER.findall(event["delta"]["text"]))


async def sse_client(http: httpx.AsyncClient, run_id: str, hang_up_after: int | None,
                     first: Callable[[], None]) -> Reading:
    """Follow the run over SSE; with ``hang_up_after``, disconnect after that
    many events and reconnect with ``Last-Event-ID``. ``first`` is called on
    the first event."""
    reading = Reading()
    last: int | None = None
    while True:
        headers = {"Last-Event-ID": str(last)} if last is not None else {}
        async with http.stream("GET", f"/v1/runs/{run_id}/events", headers=headers) as response:
            response.raise_for_status()
            event_id, data, seen = None, "", 0
            async for line in response.aiter_lines():
                if line.startswith("id:"):
                    event_id = int(line[3:])
                elif line.startswith("data:"):
                    data = line[5:].strip()
                elif line == "" and data:
                    event = json.loads(data)
                    _markers(event, time.time(), reading.latencies)
                    if not reading.offsets:
                        first()
                    reading.offsets.append(event_id)
                    last, data, seen = event_id, "", seen + 1
                    if event["type"] in TERMINAL:
                        reading.terminal = True
                        return reading
                    if hang_up_after is not None and seen >= hang_up_after:
                        hang_up_after = None
                        break
            else:
                return reading


async def direct_client(agents: Any, run_id: str, first: Callable[[], None]) -> Reading:
    """Follow the run with ``AgentClient.events()``; ``first`` is called on the first event."""
    reading = Reading()
    async for event in agents.events(run_id):
        _markers(event.model_dump(mode="json"), time.time(), reading.latencies)
        if not reading.offsets:
            first()
        reading.offsets.append(event.seq or 0)
        reading.terminal = event.type in TERMINAL
    return reading


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def _follow(start: Callable[[str, int, Callable[[], None]], list[Any]], run_id: str, n: int) -> None:
    cpu0, began = time.process_time(), time.perf_counter()
    waiting = n

    def first() -> None:
        nonlocal waiting
        waiting -= 1
        if waiting == 0:
            _say("connected")

    readings = await asyncio.gather(*start(run_id, n, first))
    cpu, seconds = time.process_time() - cpu0, time.perf_counter() - began
    _say(json.dumps({"readings": [asdict(r) for r in readings], "cpu_ms": cpu * 1000, "seconds": seconds}))


async def _serve(start: Callable[[str, int, Callable[[], None]], list[Any]]) -> None:
    loop = asyncio.get_running_loop()
    _say("ready")
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        run_id, n = line.split()
        await _follow(start, run_id, int(n))


async def sse_main(url: str) -> None:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as http:
        def start(run_id: str, n: int, first: Callable[[], None]) -> list[Any]:
            return [sse_client(http, run_id, HANG_UP_AFTER if reconnects(i) else None, first) for i in range(n)]

        await _serve(start)


async def direct_main(address: str, queue: str) -> None:
    from agentloop import AgentClient
    from agentloop.workers.worker import connect

    agents = AgentClient(await connect(address), task_queue=queue)

    def start(run_id: str, n: int, first: Callable[[], None]) -> list[Any]:
        return [direct_client(agents, run_id, first) for _ in range(n)]

    await _serve(start)


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "sse":
        asyncio.run(sse_main(argv[1]))
    elif len(argv) == 3 and argv[0] == "direct":
        asyncio.run(direct_main(argv[1], argv[2]))
    else:
        print("usage: python -m benchmarks.streaming.sse_fanout_clients "
              "sse GATEWAY_URL | direct TEMPORAL_ADDRESS TASK_QUEUE",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
