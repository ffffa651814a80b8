"""Streaming over A2A against the SSE API: time to first token and the
latency each door adds per streamed token, in the same run.

What is measured, on the embedded Temporal dev server with a worker, the
server (``agentloop serve``'s app on uvicorn) and both readers in this
process: ``benchmarks.streaming.stream_latency``'s paced provider streams
``--chunks`` chunks ``--interval`` seconds apart, each holding ``<t=SECONDS>``
(the wall time it was written). Each run is read through one door:

* SSE API: ``POST /v1/runs`` (the registered agent), then
  ``GET /v1/runs/{id}/events``; a marker is received when its
  ``thread.message.delta`` event is parsed.
* A2A: ``a2a-sdk``'s client, ``SendStreamingMessage`` to ``/a2a/{agent}``;
  a marker is received when the artifact update carrying it is yielded.

Per door: time to first token (from the request that starts the run to the
first marker received) and the per-marker latency (receipt minus marker
time), p50/p95; ``added`` is A2A minus SSE at the same percentile. Runs
alternate between the doors, after one warm-up each. Usage::

    python -m benchmarks.streaming.doors_a2a [--runs 3] [--chunks 30] [--interval 0.05]

Speed is printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import threading
import time
import uuid
from typing import Any

import httpx
import uvicorn
from a2a.client import ClientConfig, create_client
from a2a.types import a2a_pb2 as pb
from openai import AsyncOpenAI

from agentloop import AgentClient, AgentSpec
from agentloop.activities.providers.models import ModelResolver
from agentloop.activities.providers.openai_model import OpenAIChatModel
from agentloop.server import ServerSettings, create_app
from agentloop.tools.registry import ToolRegistry
from agentloop.workers.devserver import DevServer
from agentloop.workers.worker import build_worker, connect
from benchmarks.streaming.stream_latency import Samples, _latencies, _PacedServer, pct

AGENT = "bench"


async def sse_run(http: httpx.AsyncClient) -> tuple[float, list[float]]:
    """One run through the SSE API: time to first token (ms) and marker latencies."""
    began = time.time()
    run_id = (await http.post("/v1/runs", json={"spec": AGENT, "input": "go"})).json()["run_id"]
    first, out = float("nan"), []
    async with http.stream("GET", f"/v1/runs/{run_id}/events") as response:
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            received = time.time()
            event = json.loads(line[5:])
            if event["type"] == "thread.message.delta" and event["delta"]["kind"] == "text":
                found = _latencies(event["delta"]["text"], received)
                if found and not out:
                    first = (received - began) * 1000
                out += found
    return first, out


async def a2a_run(client: Any) -> tuple[float, list[float]]:
    """One run through A2A streaming: time to first token (ms) and marker latencies."""
    began = time.time()
    request = pb.SendMessageRequest(message=pb.Message(message_id=uuid.uuid4().hex, role=pb.ROLE_USER,
                                                       parts=[pb.Part(text="go")]))
    first, out = float("nan"), []
    async for update in client.send_message(request):
        received = time.time()
        if update.HasField("artifact_update") and not update.artifact_update.last_chunk:
            found = _latencies("".join(p.text for p in update.artifact_update.artifact.parts), received)
            if found and not out:
                first = (received - began) * 1000
            out += found
    return first, out


async def _serve(agents: AgentClient, spec: AgentSpec) -> tuple[uvicorn.Server, asyncio.Task[None], str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    app = create_app(agents, ServerSettings(agents={AGENT: spec}, port=sock.getsockname()[1]))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    return server, task, f"http://127.0.0.1:{sock.getsockname()[1]}"


def _row(name: str, s: Samples, firsts: list[float], base: Samples | None) -> str:
    p50, p95 = pct(s.latencies, 50), pct(s.latencies, 95)
    added = f"{p50 - pct(base.latencies, 50):>+10.1f} {p95 - pct(base.latencies, 95):>+10.1f}" if base else \
        f"{'':>10} {'':>10}"
    return (f"{name:<10} {len(s.latencies):>5} {pct(firsts, 50):>10.1f} {p50:>8.1f} {p95:>8.1f} {added}"
            + (f"  ({s.missing} marker(s) missing)" if s.missing else ""))


async def main(args: argparse.Namespace) -> None:
    provider = _PacedServer(args.chunks, args.interval)
    threading.Thread(target=provider.serve_forever, daemon=True).start()
    openai_client = AsyncOpenAI(base_url=provider.base_url, api_key="x", max_retries=0)
    models = ModelResolver({"openai": lambda _provider, _name: OpenAIChatModel(openai_client)})
    spec = AgentSpec(model="openai:gpt-bench", max_steps=1)
    results = {"sse": (Samples(), []), "a2a": (Samples(), [])}  # type: ignore[var-annotated]
    try:
        with DevServer() as dev:
            await dev.wait_ready()
            temporal = await connect(dev.address)
            queue = f"bench-a2a-{uuid.uuid4().hex[:8]}"
            agents = AgentClient(temporal, task_queue=queue)
            async with build_worker(temporal, task_queue=queue, registry=ToolRegistry(), models=models):
                server, task, url = await _serve(agents, spec)
                try:
                    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
                        a2a = await create_client(f"{url}/a2a/{AGENT}", ClientConfig(httpx_client=http))
                        await sse_run(http)
                        await a2a_run(a2a)
                        for _ in range(args.runs):
                            for door, run in (("sse", lambda: sse_run(http)), ("a2a", lambda: a2a_run(a2a))):
                                first, latencies = await run()
                                results[door][0].add_run(latencies, args.chunks)
                                results[door][1].append(first)
                finally:
                    server.should_exit = True
                    await task
    finally:
        provider.shutdown()
        provider.server_close()
        await openai_client.close()
    print(f"provider: {args.chunks} chunks {args.interval * 1000:.0f} ms apart; {args.runs} run(s) a door "
          "(after one warm-up each), alternating; worker, server and readers in this process")
    header = f"{'door':<10} {'n':>5} {'ttft p50':>10} {'p50 ms':>8} {'p95 ms':>8} {'added p50':>10} {'added p95':>10}"
    print(header)
    print("-" * len(header))
    print(_row("SSE API", results["sse"][0], results["sse"][1], None))
    print(_row("A2A", results["a2a"][0], results["a2a"][1], results["sse"][0]))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="measured runs per door")
    parser.add_argument("--chunks", type=int, default=30, help="content chunks the provider streams")
    parser.add_argument("--interval", type=float, default=0.05, help="seconds between chunks")
    asyncio.run(main(parser.parse_args()))
