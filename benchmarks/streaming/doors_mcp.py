"""Time to first token and the latency each streamed event gains over MCP,
against the SSE API of the same ``agentloop serve``, in the same run.

What is measured: ``benchmarks.streaming.stream_latency``'s paced
OpenAI-compatible server streams one answer of ``--chunks`` chunks,
``--interval`` seconds apart, each a marker ``<t=SECONDS>`` holding the wall
time it was written. One registered agent (``openai:`` model pointed at that
server, one step) runs on the embedded Temporal dev server with a worker,
and the app of ``agentloop serve`` runs on uvicorn, all in this process and
event loop (worker, server and readers share one core's worth of loop:
absolute figures include that). The runs alternate between two readers:

* SSE: ``POST /v1/runs`` then ``GET /v1/runs/{id}/events``; an event is
  received when its ``thread.message.delta`` line is parsed;
* MCP: the ``mcp`` package's client calls the agent's tool on ``/mcp``
  (streamable HTTP, answered inline) with a progress callback; a delta
  reaches an MCP client as a ``notifications/progress`` whose ``message`` is
  the delta's text (the choice this server makes: MCP has no text-delta
  notification, and the Tasks extension carries no progress at all: SEP-2663
  leaves ``notifications/progress`` out of tasks, whose client polls
  ``tasks/get``), so an event is received when the callback runs.

For each marker a reader computes ``receipt time - marker time`` (one
clock). Time to first token: from the request that starts the run to the
first text delta (SSE) or the first progress notification carrying text
(MCP). ``added`` is MCP minus SSE at the same percentile, ``ratio`` MCP / SSE.
Usage::

    python -m benchmarks.streaming.doors_mcp [--runs 3] [--chunks 30] [--interval 0.05]

Speed is printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import threading
import time
import uuid
from typing import Any

import httpx
import uvicorn
from mcp import Client
from openai import AsyncOpenAI

from agentloop import AgentClient, AgentSpec
from agentloop.activities.providers.models import ModelResolver
from agentloop.activities.providers.openai_model import OpenAIChatModel
from agentloop.server import ServerSettings, create_app
from agentloop.tools.registry import ToolRegistry
from agentloop.workers.devserver import DevServer
from agentloop.workers.worker import build_worker, connect
from benchmarks.streaming.stream_latency import _latencies, _PacedServer, pct

AGENT = "bench"


async def sse_run(http: httpx.AsyncClient) -> tuple[float, list[float]]:
    """One run read over the SSE API: (time to first token in ms, per-marker latencies)."""
    began = time.perf_counter()
    started = await http.post("/v1/runs", json={"spec": AGENT, "input": "go"})
    run_id = started.json()["run_id"]
    first, out = None, []
    async with http.stream("GET", f"/v1/runs/{run_id}/events") as response:
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            received = time.time()
            event = json.loads(line[5:])
            if event["type"] == "thread.message.delta" and event["delta"]["kind"] == "text":
                first = first if first is not None else time.perf_counter() - began
                out.extend(_latencies(event["delta"]["text"], received))
            if event["type"] in ("thread.run.completed", "thread.run.failed", "thread.run.cancelled"):
                break
    return (first or float("nan")) * 1000, out


async def mcp_run(mcp: Client) -> tuple[float, list[float]]:
    """One run as an MCP tool call answered inline: (time to first text progress in ms, per-marker latencies)."""
    first: list[float] = []
    out: list[float] = []
    began = time.perf_counter()

    async def progress(value: float, total: float | None, message: str | None) -> None:
        received = time.time()
        found = _latencies(message or "", received)
        if found and not first:
            first.append(time.perf_counter() - began)
        out.extend(found)

    result = await mcp.call_tool(AGENT, {"message": "go"}, progress_callback=progress)
    assert not result.is_error, result
    return (first[0] if first else float("nan")) * 1000, out


def line(name: str, ttft: list[float], latencies: list[float], expected: int) -> str:
    return (f"{name:<4} ttft p50 {pct(ttft, 50):7.1f} ms   per event p50 {pct(latencies, 50):7.1f} ms  "
            f"p95 {pct(latencies, 95):7.1f} ms   n {len(latencies)}/{expected}")


def report(sse: tuple[list[float], list[float]], mcp: tuple[list[float], list[float]], args: argparse.Namespace,
           wall: float) -> None:
    expected = args.runs * args.chunks
    print(f"provider: local SSE server, {args.chunks} chunks {args.interval * 1000:.0f} ms apart; {args.runs} runs "
          "per reader, alternated, after one warm-up each; worker, server and readers in one process")
    print(line("SSE", *sse, expected))
    print(line("MCP", *mcp, expected))
    for q in (50, 95):
        added = pct(mcp[1], q) - pct(sse[1], q)
        ratio = pct(mcp[1], q) / pct(sse[1], q) if pct(sse[1], q) else float("nan")
        print(f"per event p{q}: MCP added {added:+.1f} ms, ratio {ratio:.2f}")
    ttft_added = statistics.median(mcp[0]) - statistics.median(sse[0])
    print(f"time to first token p50: MCP added {ttft_added:+.1f} ms, "
          f"ratio {statistics.median(mcp[0]) / statistics.median(sse[0]):.2f}")
    print(f"took {wall:.0f} s")


async def main(args: argparse.Namespace) -> None:
    began = time.perf_counter()
    provider = _PacedServer(args.chunks, args.interval)
    threading.Thread(target=provider.serve_forever, daemon=True).start()
    openai_client = AsyncOpenAI(base_url=provider.base_url, api_key="x", max_retries=0)
    models = ModelResolver({"openai": lambda _provider, _name: OpenAIChatModel(openai_client)})
    sse: tuple[list[float], list[float]] = ([], [])
    mcp: tuple[list[float], list[float]] = ([], [])
    try:
        with DevServer() as dev:
            await dev.wait_ready()
            temporal = await connect(dev.address)
            queue = f"bench-doors-{uuid.uuid4().hex[:8]}"
            agents = AgentClient(temporal, task_queue=queue)
            spec = AgentSpec(model="openai:gpt-bench", name=AGENT, max_steps=1)
            app = create_app(agents, ServerSettings(agents={AGENT: spec}))
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
            serving = asyncio.create_task(server.serve(sockets=[sock]))
            while not server.started:
                await asyncio.sleep(0.01)
            url = f"http://127.0.0.1:{sock.getsockname()[1]}"
            async with build_worker(temporal, task_queue=queue, registry=ToolRegistry(), models=models), \
                    httpx.AsyncClient(base_url=url, timeout=60) as http, Client(f"{url}/mcp") as client:
                await sse_run(http)
                await mcp_run(client)
                for _ in range(args.runs):
                    for reader, into in ((sse_run(http), sse), (mcp_run(client), mcp)):
                        ttft, latencies = await reader
                        into[0].append(ttft)
                        into[1].extend(latencies)
            server.should_exit = True
            await serving
    finally:
        provider.shutdown()
        provider.server_close()
        await openai_client.close()
    report(sse, mcp, args, time.perf_counter() - began)


def cli(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="measured runs per reader")
    parser.add_argument("--chunks", type=int, default=30, help="chunks per answer")
    parser.add_argument("--interval", type=float, default=0.05, help="seconds between chunks")
    return parser.parse_args(argv)


def run(argv: list[str] | None = None) -> Any:
    return asyncio.run(main(cli(argv)))


if __name__ == "__main__":
    run()
