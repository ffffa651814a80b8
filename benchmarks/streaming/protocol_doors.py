"""The protocol doors (MCP, A2A) against the SSE API: time to first token
and the latency each door adds per streamed chunk, in the same run.

What is measured: ``benchmarks.streaming.stream_latency``'s paced
OpenAI-compatible server streams one answer of ``--chunks`` chunks,
``--interval`` seconds apart, each a marker ``<t=SECONDS>`` holding the wall
time it was written. One registered agent (``openai:`` model pointed at that
server, one step) runs on the embedded Temporal dev server with a worker,
and the app of ``agentloop serve`` runs on uvicorn, all in this process and
event loop (worker, server and readers share one core's worth of loop:
absolute figures include that; the ratio is the figure to read). Each run
is read through one reader, alternating, after one warm-up each:

* SSE API (the baseline): ``POST /v1/runs`` then ``GET /v1/runs/{id}/events``;
  a marker is received when its ``thread.message.delta`` line is parsed;
* MCP (``--door mcp``): the ``mcp`` package's client calls the agent's tool
  on ``/mcp`` (streamable HTTP, answered inline) with a progress callback; a
  delta reaches an MCP client as a ``notifications/progress`` whose
  ``message`` is the delta's text (MCP has no text-delta notification, and
  the Tasks extension carries no progress at all: SEP-2663 leaves
  ``notifications/progress`` out of tasks, whose client polls ``tasks/get``);
* A2A (``--door a2a``): ``a2a-sdk``'s client, ``SendStreamingMessage`` to
  ``/a2a/{agent}``; a marker is received when the artifact update carrying
  it is yielded.

With ``--live on`` the worker posts its deltas to the app at once (live
deltas, docs/live-deltas.md: ``AGENTLOOP_LIVE_URL`` and a live token) and
every door reads them through the app's hub; with ``--live both`` a second
app, with live deltas, stands beside the first, and each reader runs
against both in turn (the worker pointed at the live app for its runs),
so the figures with live off and on come from the same run.

For each marker a reader computes ``receipt time - marker time`` (one
clock). Time to first token: from the request that starts the run to the
first marker received. ``added`` is the door minus SSE (of the same app)
at the same percentile, ``ratio`` the door / SSE at p50. Usage::

    python -m benchmarks.streaming.protocol_doors [--door mcp|a2a|both] [--live off|on|both] [--runs 3]
        [--chunks 30] [--interval 0.05]

Speed is printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import socket
import statistics
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import httpx
import uvicorn
from a2a.client import ClientConfig, create_client
from a2a.types import a2a_pb2 as pb
from mcp import Client
from openai import AsyncOpenAI

from agentloop import AgentClient, AgentSpec
from agentloop.activities.providers.models import ModelResolver
from agentloop.activities.providers.openai_model import OpenAIChatModel
from agentloop.server import ServerSettings, create_app
from agentloop.shared.base.contracts import LIVE_TOKEN_ENV, LIVE_URL_ENV
from agentloop.tools.registry import ToolRegistry
from agentloop.workers.devserver import DevServer
from agentloop.workers.worker import build_worker, connect
from benchmarks.streaming.stream_latency import Samples, _latencies, _PacedServer, pct

AGENT = "bench"
DOORS = ("mcp", "a2a")
NAMES = {"sse": "SSE API", "mcp": "MCP", "a2a": "A2A"}
#: The live deltas' secret of the app that takes them (``--live on|both``).
LIVE_TOKEN = secrets.token_urlsafe(24)
TERMINAL = ("thread.run.completed", "thread.run.failed", "thread.run.cancelled")


@dataclass
class Timing:
    """What one reader saw of one run: when its first marker came, and each marker's latency."""

    began: float = field(default_factory=time.time)
    first_ms: float = float("nan")
    latencies: list[float] = field(default_factory=list)

    def received(self, text: str) -> None:
        """Note the markers in ``text``, received now."""
        now = time.time()
        found = _latencies(text, now)
        if found and not self.latencies:
            self.first_ms = (now - self.began) * 1000
        self.latencies += found


async def sse_run(http: httpx.AsyncClient) -> Timing:
    """One run through the SSE API."""
    timing = Timing()
    run_id = (await http.post("/v1/runs", json={"spec": AGENT, "input": "go"})).json()["run_id"]
    async with http.stream("GET", f"/v1/runs/{run_id}/events") as response:
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            event = json.loads(line[5:])
            if event["type"] == "thread.message.delta" and event["delta"]["kind"] == "text":
                timing.received(event["delta"]["text"])
            if event["type"] in TERMINAL:
                break
    return timing


async def mcp_run(client: Client) -> Timing:
    """One run as an MCP tool call answered inline, its deltas as progress notifications."""
    timing = Timing()

    async def progress(value: float, total: float | None, message: str | None) -> None:
        timing.received(message or "")

    result = await client.call_tool(AGENT, {"message": "go"}, progress_callback=progress)
    assert not result.is_error, result
    return timing


async def a2a_run(client: Any) -> Timing:
    """One run through A2A streaming."""
    timing = Timing()
    request = pb.SendMessageRequest(message=pb.Message(message_id=uuid.uuid4().hex, role=pb.ROLE_USER,
                                                       parts=[pb.Part(text="go")]))
    async for update in client.send_message(request):
        if update.HasField("artifact_update") and not update.artifact_update.last_chunk:
            timing.received("".join(p.text for p in update.artifact_update.artifact.parts))
    return timing


@asynccontextmanager
async def app_on(agents: AgentClient, spec: AgentSpec, live: bool) -> AsyncIterator[str]:
    """The app of ``agentloop serve`` with the one registered agent, taking
    live deltas with ``live``, on a free port; yields its URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    settings = ServerSettings(agents={AGENT: spec}, port=sock.getsockname()[1],
                              live_token=LIVE_TOKEN if live else None)
    server = uvicorn.Server(uvicorn.Config(create_app(agents, settings), log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await task


def point_worker(url: str | None) -> None:
    """Point this process's worker's live deltas at ``url`` (None: at no gateway)."""
    if url is None:
        os.environ.pop(LIVE_URL_ENV, None)
        os.environ.pop(LIVE_TOKEN_ENV, None)
    else:
        os.environ[LIVE_URL_ENV], os.environ[LIVE_TOKEN_ENV] = url, LIVE_TOKEN


@asynccontextmanager
async def serving(args: argparse.Namespace, lives: tuple[bool, ...] = (False,)) -> AsyncIterator[dict[bool, str]]:
    """The paced provider, a dev server, a worker and an app of ``agentloop
    serve`` per entry of ``lives`` (live deltas off, on) with one registered
    agent; yields the apps' URLs by ``live``."""
    provider = _PacedServer(args.chunks, args.interval)
    threading.Thread(target=provider.serve_forever, daemon=True).start()
    openai_client = AsyncOpenAI(base_url=provider.base_url, api_key="x", max_retries=0)
    models = ModelResolver({"openai": lambda _provider, _name: OpenAIChatModel(openai_client)})
    try:
        with DevServer() as dev:
            await dev.wait_ready()
            temporal = await connect(dev.address)
            queue = f"bench-doors-{uuid.uuid4().hex[:8]}"
            agents = AgentClient(temporal, task_queue=queue)
            spec = AgentSpec(model="openai:gpt-bench", name=AGENT, max_steps=1)
            async with build_worker(temporal, task_queue=queue, registry=ToolRegistry(), models=models), \
                    AsyncExitStack() as apps:
                yield {live: await apps.enter_async_context(app_on(agents, spec, live)) for live in lives}
    finally:
        point_worker(None)
        provider.shutdown()
        provider.server_close()
        await openai_client.close()


async def readers_of(url: str, doors: tuple[str, ...], http: httpx.AsyncClient,
                     stack: AsyncExitStack) -> dict[str, Callable[[], Awaitable[Timing]]]:
    """A reader of the app at ``url`` per door, SSE's first."""
    readers: dict[str, Callable[[], Awaitable[Timing]]] = {"sse": partial(sse_run, http)}
    if "mcp" in doors:
        readers["mcp"] = partial(mcp_run, await stack.enter_async_context(Client(f"{url}/mcp")))
    if "a2a" in doors:
        readers["a2a"] = partial(a2a_run, await create_client(f"{url}/a2a/{AGENT}", ClientConfig(httpx_client=http)))
    return readers


async def measure(args: argparse.Namespace, doors: tuple[str, ...],
                  lives: tuple[bool, ...] = (False,)) -> dict[tuple[str, bool], tuple[Samples, list[float]]]:
    """Per reader (``sse`` and each of ``doors``) and live mode: the markers'
    latencies and each run's time to first token."""
    results: dict[tuple[str, bool], tuple[Samples, list[float]]] = {
        (r, live): (Samples(), []) for live in lives for r in ("sse", *doors)}
    async with serving(args, lives) as urls, AsyncExitStack() as stack:
        readers: dict[tuple[str, bool], Callable[[], Awaitable[Timing]]] = {}
        for live, url in urls.items():
            http = await stack.enter_async_context(httpx.AsyncClient(base_url=url, timeout=60))
            readers |= {(r, live): read for r, read in (await readers_of(url, doors, http, stack)).items()}
        for measured in (False, *[True] * args.runs):  # one warm-up each, then the measured runs
            for (reader, live), read in readers.items():
                point_worker(urls[live] if live else None)
                timing = await read()
                if measured:
                    results[reader, live][0].add_run(timing.latencies, args.chunks)
                    results[reader, live][1].append(timing.first_ms)
    return results


def row(name: str, samples: Samples, firsts: list[float], base: tuple[Samples, list[float]] | None,
        expected: int) -> str:
    """One line of the table; ``base`` is the SSE API's samples (None on its own line)."""
    p50, p95, ttft = pct(samples.latencies, 50), pct(samples.latencies, 95), statistics.median(firsts)
    figures = f"{name:<13} {f'{len(samples.latencies)}/{expected}':>9} {ttft:>9.1f} {p50:>8.1f} {p95:>8.1f}"
    if base is None:
        return figures
    b50, b95, bttft = pct(base[0].latencies, 50), pct(base[0].latencies, 95), statistics.median(base[1])
    return (f"{figures} {p50 - b50:>+10.1f} {p95 - b95:>+10.1f} {p50 / b50 if b50 else float('nan'):>6.2f} "
            f"{ttft - bttft:>+11.1f}")


def report(results: dict[tuple[str, bool], tuple[Samples, list[float]]], args: argparse.Namespace,
           wall: float) -> None:
    expected = args.runs * args.chunks
    print(f"provider: local SSE server, {args.chunks} chunks {args.interval * 1000:.0f} ms apart; {args.runs} "
          "run(s) per reader, alternated, after one warm-up each; worker, server(s) and readers in one process")
    header = (f"{'reader':<13} {'markers':>9} {'ttft p50':>9} {'p50 ms':>8} {'p95 ms':>8} {'added p50':>10} "
              f"{'added p95':>10} {'ratio':>6} {'ttft added':>11}")
    print(header)
    print("-" * len(header))
    for (reader, live), (samples, firsts) in results.items():
        name = NAMES[reader] + (" live" if live else "")
        print(row(name, samples, firsts, None if reader == "sse" else results["sse", live], expected))
    print(f"took {wall:.0f} s")


async def main(args: argparse.Namespace) -> None:
    began = time.perf_counter()
    lives = {"off": (False,), "on": (True,), "both": (False, True)}[args.live]
    results = await measure(args, DOORS if args.door == "both" else (args.door,), lives)
    report(results, args, time.perf_counter() - began)


def cli(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--door", choices=(*DOORS, "both"), default="both", help="the door(s) measured against SSE")
    parser.add_argument("--live", choices=("off", "on", "both"), default="off",
                        help="live deltas: off (the history only), on, or both in one run")
    parser.add_argument("--runs", type=int, default=3, help="measured runs per reader")
    parser.add_argument("--chunks", type=int, default=30, help="chunks per answer")
    parser.add_argument("--interval", type=float, default=0.05, help="seconds between chunks")
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(cli()))
