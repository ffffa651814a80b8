"""Fan-out of ``agentloop serve``: many SSE clients on one run, against
reading the run directly with ``AgentClient.events()``.

What is measured, on the embedded Temporal dev server, with four processes:
this one (the worker, its query-counting interceptor, and the provider), the
gateway (``agentloop serve``), the N SSE clients, and the direct reader (the
last two from ``benchmarks.streaming.sse_fanout_clients``), so that neither the
worker's CPU nor the clients' parsing slows the baseline:

* latency added: a local OpenAI-compatible server (``benchmarks.streaming.stream_latency``'s
  paced server) streams ``--chunks`` chunks ``--interval`` seconds apart,
  each holding ``<t=SECONDS>``, the wall time (``time.time()``) it was
  written. For each marker, every reader computes ``receipt time - marker
  time`` in its own process, against the same wall clock. The readers of
  one run: N SSE clients of the gateway, and one ``AgentClient.events()``
  reader (the baseline). The provider holds the run's answer until every
  reader has had the run's first event, so connecting is not counted.
  ``added`` is SSE minus direct at the same percentile.
* lost or duplicated: every SSE client must see each offset once, in order,
  ending with the terminal event. A fifth of the clients hang up after a few
  events and reconnect with ``Last-Event-ID``; their joined streams count too.
* the worker's work for the run: queries it answered (a worker interceptor
  counts ``handle_query``) and workflow tasks (the run's history), which must
  not grow with N (one reader per run in the gateway).
* the gateway's CPU: its process's user + system time during the run, per
  client; and the clients' process's CPU, in ms and as a share of its wall
  time (near 100%, one core, the clients themselves were the bottleneck).
* time to first token: ``POST /v1/runs`` then the run's events over SSE until
  the first text delta, against ``AsyncOpenAI(...).chat.completions.create(stream=True)``
  on the same server until the first content chunk.

Usage::

    python -m benchmarks.streaming.sse_fanout [--clients 1,50,200] [--runs 2] [--chunks 30] [--interval 0.05]

Speed is printed, never asserted; the targets (p50 added at most 15 ms at 200
clients; 0 events lost or duplicated) are printed as met or not.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from openai import AsyncOpenAI
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.worker import Interceptor, WorkflowInboundInterceptor, WorkflowInterceptorClassInput

from agentloop import AgentClient, AgentSpec
from agentloop.activities.providers.models import ModelResolver
from agentloop.activities.providers.openai_model import OpenAIChatModel
from agentloop.tools.registry import ToolRegistry
from agentloop.workers.devserver import DevServer
from agentloop.workers.worker import build_worker, connect
from benchmarks.streaming.sse_fanout_clients import Reading, reconnects
from benchmarks.streaming.stream_latency import _PacedHandler, _PacedServer, pct

#: The issue's target for the p50 latency the gateway adds at 200 clients (information only).
TARGET_ADDED_P50_MS = 15.0
#: The longest an answer waits for its run's readers (a safety net; they connect in far less).
GATE_SECONDS = 60.0
ROOT = Path(__file__).resolve().parents[2]

#: Queries the worker answered, by workflow id.
QUERIES: Counter[str] = Counter()


class _CountQueries(WorkflowInboundInterceptor):
    def handle_query(self, input: Any) -> Any:
        QUERIES[workflow.info().workflow_id] += 1
        return super().handle_query(input)


class CountQueries(Interceptor):
    """A worker interceptor that counts the queries each run answers."""

    def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput) -> type[WorkflowInboundInterceptor]:
        return _CountQueries


# ---------------------------------------------------------------- the provider


class _GatedHandler(_PacedHandler):
    def do_POST(self) -> None:
        self.server.gate.wait(GATE_SECONDS)
        super().do_POST()


class GatedServer(_PacedServer):
    """The paced provider, holding each answer until ``gate`` is set: a run's
    answer starts once all its readers follow it, so no reader's first markers
    wait on its connecting."""

    def __init__(self, chunks: int, interval: float) -> None:
        super().__init__(chunks, interval)
        self.RequestHandlerClass = _GatedHandler
        self.gate = threading.Event()
        self.gate.set()


# ---------------------------------------------------------------- the gateway


@dataclass
class Gateway:
    proc: subprocess.Popen[bytes]
    url: str

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "AGENTLOOP_API_TOKENS"))}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


def start_gateway(address: str, queue: str, home: str) -> Gateway:
    return start_gateway_with(_env(TEMPORAL_ADDRESS=address, AGENTLOOP_TASK_QUEUE=queue, AGENTLOOP_HOME=home))


def start_gateway_with(env: dict[str, str]) -> Gateway:
    """``agentloop serve`` on a free port, in a process of its own, with ``env``."""
    proc = subprocess.Popen([sys.executable, "-m", "agentloop.cli", "serve", "--port", "0"], cwd=ROOT, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    while line := proc.stderr.readline().decode():
        if found := re.match(r"agentloop serve: (http://\S+)/ ", line):
            threading.Thread(target=proc.stderr.read, daemon=True).start()  # drain
            return Gateway(proc, found.group(1))
    raise RuntimeError(f"agentloop serve ended before serving (exit {proc.wait()})")


# ---------------------------------------------------------------- readers


class ReaderProcess:
    """A ``benchmarks.streaming.sse_fanout_clients`` process: the SSE clients, or the direct reader."""

    def __init__(self, proc: asyncio.subprocess.Process, what: str) -> None:
        self.proc, self.what = proc, what

    @classmethod
    async def start(cls, *args: str) -> ReaderProcess:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "benchmarks.streaming.sse_fanout_clients", *args, cwd=ROOT, env=_env(),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=1 << 26)
        reader = cls(proc, f"the {args[0]} reader process")
        await reader.expect("ready")
        return reader

    async def line(self) -> str:
        assert self.proc.stdout is not None
        line = (await self.proc.stdout.readline()).decode()
        if not line:
            raise RuntimeError(f"{self.what} ended (exit {await self.proc.wait()}); its error is above")
        return line.strip()

    async def expect(self, word: str) -> None:
        if (line := await self.line()) != word:
            raise RuntimeError(f"{self.what} said {line[:200]!r} where {word!r} was expected")

    async def follow(self, run_id: str, n: int) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{run_id} {n}\n".encode())
        await self.proc.stdin.drain()

    async def result(self) -> tuple[list[Reading], float, float]:
        """The readings, in order, the process's CPU ms and wall seconds for the run."""
        answer = json.loads(await self.line())
        return [Reading(**r) for r in answer["readings"]], answer["cpu_ms"], answer["seconds"]

    async def close(self) -> None:
        if self.proc.returncode is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                await asyncio.wait_for(self.proc.wait(), 30)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()


# ---------------------------------------------------------------- one fan-out


@dataclass
class Row:
    clients: int
    sse: list[float] = field(default_factory=list)
    direct: list[float] = field(default_factory=list)
    bad_streams: int = 0
    reconnected: int = 0
    queries: list[int] = field(default_factory=list)
    tasks: list[int] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    clients_cpu_ms: list[float] = field(default_factory=list)
    clients_busy: list[float] = field(default_factory=list)  # the clients process's CPU / its wall time


@dataclass
class Readers:
    sse: ReaderProcess
    direct: ReaderProcess


async def workflow_tasks(agents: AgentClient, run_id: str) -> int:
    handle = agents.temporal.get_workflow_handle(run_id)
    return len([e async for e in handle.fetch_history_events()
                if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED])


async def fan_out(agents: AgentClient, gateway: Gateway, provider: GatedServer, readers: Readers, spec: AgentSpec,
                  clients: int, row: Row) -> None:
    provider.gate.clear()
    try:
        handle = await agents.start(spec, "go")
        cpu0, began = gateway.cpu_seconds(), time.perf_counter()
        await readers.sse.follow(handle.run_id, clients)
        await readers.direct.follow(handle.run_id, 1)
        await asyncio.gather(readers.sse.expect("connected"), readers.direct.expect("connected"))
    finally:
        provider.gate.set()
    (readings, clients_cpu, clients_seconds), (direct, _, _) = await asyncio.gather(
        readers.sse.result(), readers.direct.result())
    row.seconds.append(time.perf_counter() - began)
    row.cpu_ms.append((gateway.cpu_seconds() - cpu0) * 1000)
    row.clients_cpu_ms.append(clients_cpu)
    row.clients_busy.append(clients_cpu / 1000 / clients_seconds)
    await handle.result()
    expected = list(range(len(direct[0].offsets)))
    row.direct.extend(direct[0].latencies)
    for i, reading in enumerate(readings):
        row.sse.extend(reading.latencies)
        row.reconnected += reconnects(i)
        if reading.offsets != expected or not reading.terminal:
            row.bad_streams += 1
    row.queries.append(QUERIES[handle.run_id])
    row.tasks.append(await workflow_tasks(agents, handle.run_id))


# ---------------------------------------------------------------- time to first token


async def http_first_token(gateway: Gateway, spec: AgentSpec) -> float:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=60) as http:
        began = time.perf_counter()
        started = await http.post("/v1/runs", json={"spec": spec.model_dump(mode="json", exclude_defaults=True),
                                                    "input": "go"})
        run_id = started.json()["run_id"]
        first = None
        async with http.stream("GET", f"/v1/runs/{run_id}/events") as response:
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    event = json.loads(line[5:])
                    if first is None and event["type"] == "thread.message.delta" and event["delta"]["kind"] == "text":
                        first = time.perf_counter() - began
                    if event["type"].startswith("thread.run.") and event["type"] != "thread.run.requires_action":
                        break
    assert first is not None
    return first * 1000


async def direct_first_token(base_url: str) -> float:
    client = AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
    try:
        began = time.perf_counter()
        first = None
        stream = await client.chat.completions.create(model="gpt-bench", messages=[{"role": "user", "content": "go"}],
                                                      stream=True)
        async with stream:
            async for chunk in stream:
                if first is None and chunk.choices and chunk.choices[0].delta.content:
                    first = time.perf_counter() - began
        assert first is not None
        return first * 1000
    finally:
        await client.close()


# ---------------------------------------------------------------- report


def report(rows: list[Row], ttft_http: list[float], ttft_direct: list[float], args: argparse.Namespace) -> None:
    print(f"provider: local SSE server, {args.chunks} chunks {args.interval * 1000:.0f} ms apart, one marker each; "
          f"{args.runs} run(s) per client count; stream_batch_seconds={args.batch}")
    print("processes: worker and provider in this one; gateway `agentloop serve` (one reader per run, poll 50 ms); "
          "the SSE clients in one of their own; direct, AgentClient.events() on the same run, in one of its own; "
          "each run's answer starts once every reader has its first event")
    print("CPU ms: the gateway's, from the run's start to its end; clients CPU: the SSE clients' process's, "
          "and as a share of its wall time (100% is one core, where the clients would hold the figures back)")
    print()
    header = (f"{'clients':>7} {'direct p50':>10} {'direct p95':>10} {'SSE p50':>8} {'SSE p95':>8} {'added p50':>9} "
              f"{'added p95':>9} {'lost/dup':>8} {'queries':>8} {'WFT':>4} {'CPU ms':>7} {'CPU ms/client':>13} "
              f"{'clients CPU ms':>14} {'clients CPU %':>13}")
    print(header)
    print("-" * len(header))
    for row in rows:
        d50, d95, s50, s95 = pct(row.direct, 50), pct(row.direct, 95), pct(row.sse, 50), pct(row.sse, 95)
        cpu = statistics.median(row.cpu_ms)
        print(f"{row.clients:>7} {d50:>10.1f} {d95:>10.1f} {s50:>8.1f} {s95:>8.1f} {s50 - d50:>+9.1f} "
              f"{s95 - d95:>+9.1f} {row.bad_streams:>8} {statistics.median(row.queries):>8.0f} "
              f"{statistics.median(row.tasks):>4.0f} {cpu:>7.0f} {cpu / row.clients:>13.2f} "
              f"{statistics.median(row.clients_cpu_ms):>14.0f} {statistics.median(row.clients_busy) * 100:>13.1f}")
    print()
    h, d = statistics.median(ttft_http), statistics.median(ttft_direct)
    print(f"time to first token: over HTTP (POST /v1/runs, then SSE) {h:.0f} ms, provider directly {d:.0f} ms "
          f"({h / d:.1f}x, +{h - d:.0f} ms; medians of {len(ttft_http)})")
    last = rows[-1]
    added = pct(last.sse, 50) - pct(last.direct, 50)
    print(f"target p50 added <= {TARGET_ADDED_P50_MS:.0f} ms at {last.clients} clients: "
          f"{'met' if added <= TARGET_ADDED_P50_MS else 'NOT met'} ({added:+.1f} ms)")
    bad = sum(r.bad_streams for r in rows)
    print(f"events lost or duplicated: {'none' if bad == 0 else f'{bad} stream(s) wrong'} "
          f"({sum(r.reconnected for r in rows)} streams reconnected with Last-Event-ID mid-run)")
    queries = [statistics.median(r.queries) for r in rows]
    print(f"worker queries per run at {', '.join(str(r.clients) for r in rows)} clients: "
          f"{', '.join(f'{q:.0f}' for q in queries)} (ratio last/first {queries[-1] / queries[0]:.2f}x)")


async def main(args: argparse.Namespace) -> None:
    provider = GatedServer(args.chunks, args.interval)
    threading.Thread(target=provider.serve_forever, daemon=True).start()
    openai_client = AsyncOpenAI(base_url=provider.base_url, api_key="x", max_retries=0)
    models = ModelResolver({"openai": lambda _provider, _name: OpenAIChatModel(openai_client)})
    spec = AgentSpec(model="openai:gpt-bench", stream_batch_seconds=args.batch, max_steps=1)
    rows = [Row(n) for n in args.clients]
    ttft_http: list[float] = []
    ttft_direct: list[float] = []
    gateway: Gateway | None = None
    processes: list[ReaderProcess] = []
    try:
        with DevServer() as server, tempfile.TemporaryDirectory() as home:
            await server.wait_ready()
            client = await connect(server.address)
            queue = f"bench-fanout-{uuid.uuid4().hex[:8]}"
            agents = AgentClient(client, task_queue=queue)
            gateway = start_gateway(server.address, queue, home)
            processes.append(await ReaderProcess.start("sse", gateway.url))
            processes.append(await ReaderProcess.start("direct", server.address, queue))
            readers = Readers(*processes)
            async with build_worker(client, task_queue=queue, registry=ToolRegistry(), models=models,
                                    interceptors=[CountQueries()]):
                await fan_out(agents, gateway, provider, readers, spec, 1, Row(1))  # warm-up
                await direct_first_token(provider.base_url)
                for _ in range(args.runs):
                    for row in rows:
                        await fan_out(agents, gateway, provider, readers, spec, row.clients, row)
                    ttft_direct.append(await direct_first_token(provider.base_url))
                    ttft_http.append(await http_first_token(gateway, spec))
                for process in processes:
                    await process.close()
    finally:
        for process in processes:
            if process.proc.returncode is None:
                process.proc.kill()
                await process.proc.wait()
        if gateway is not None:
            gateway.proc.terminate()
            gateway.proc.wait(30)
        provider.shutdown()
        provider.server_close()
        await openai_client.close()
    report(rows, ttft_http, ttft_direct, args)


def _counts(text: str) -> list[int]:
    values = [int(v) for v in text.split(",") if v.strip()]
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError("a comma-separated list of client counts, e.g. 1,50,200")
    return values


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=_counts, default=[1, 50, 200], help="SSE clients per run, comma-separated")
    parser.add_argument("--runs", type=int, default=2, help="measured runs per client count")
    parser.add_argument("--chunks", type=int, default=30, help="content chunks per answer")
    parser.add_argument("--interval", type=float, default=0.05, help="seconds between chunks")
    parser.add_argument("--batch", type=float, default=0.05, help="the spec's stream_batch_seconds")
    asyncio.run(main(parser.parse_args()))
