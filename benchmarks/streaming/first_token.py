"""Tokens at the provider's pace: time to first token and each delta's
added latency against Temporal's own floor, for today's batching and for
each option of issue 56, measured in one run on one dev server.

What is measured (embedded Temporal dev server; worker, gateway and readers
in this process; the provider a local OpenAI-compatible server, the paced
server of ``benchmarks.streaming.stream_latency``, whose first chunk leaves
at once and each later one ``--interval`` s apart, each carrying the wall
time it was written):

* floor: a bare workflow (one activity, no agentloop) on the same server,
  ``start_workflow`` to its activity running;
* direct: the provider read with the ``openai`` SDK (first token, and each
  chunk's latency, the baseline of "added");
* per mode, an agentloop run of one LLM step (``max_steps=1``): its first
  text delta over ``AgentClient.events()`` (from just before ``start``), over
  SSE (``POST /v1/runs`` then ``GET /v1/runs/{id}/events`` on an in-process
  ``agentloop serve`` app), each chunk's latency over ``events()``, and the
  run's history (bytes, events, workflow tasks, signals, accepted updates).

The modes:

* ``today``: the fixed batch window (``DeltaPublisher.leading = False``), the
  reader polls every 50 ms (the code before issue 56);
* ``first at once``: option 1, the publisher's leading edge (default now);
* ``first at once + wait``: option 1 and option 2, the reader caught up
  waits in the workflow (``events(wait=True)``, the gateway's
  ``AGENTLOOP_WAIT_FOR_EVENTS=1``) instead of polling;
* ``live``: option 1 and option 3, live deltas: the worker posts each text
  delta to the gateway at once (``AGENTLOOP_LIVE_URL``/``_TOKEN``), which
  merges them into its SSE streams; ``events()`` reads the history as in
  option 1, so only the SSE columns change;
* ``live + POST stream``: live, and the SSE client starts the run with
  ``POST /v1/runs/stream``, which answers with the stream (no second
  request, no lookup before it);
* ``live + eager start``: that, and ``AgentClient.eager_start``: the start
  hands the first workflow task to this process's worker (it applies to the
  runs ``events()`` reads, and to the SSE ones when the gateway is in this
  process, as in an embedded ``agentloop serve``; not with ``--gateway-process``);
* ``live in memory``: the default of embedded ``agentloop serve``, with no
  setting: the gateway shares the worker's process (always this one, even
  with ``--gateway-process``) and takes its live deltas in memory;
* ``in memory + stream + eager``: all of embedded ``agentloop serve``'s
  defaults with the streaming start: live deltas in memory, eager start.

A second floor has its activity on a queue of its own, as agentloop's model
call is on its lane's (``docs/many-tenants.md``): the difference is the
lane's share. ``--trace`` prints, from the histories, each path from
``start`` to the first activity (``benchmarks.streaming.start_trace``).

Over SSE, each chunk's latency too ("SSE added"), and the CPU-seconds of
this process (worker, gateway and readers) per run streamed.

With ``--gateway-process``, each gateway is ``agentloop serve`` in a
process of its own, so that it does not share this process's event loop
and interpreter lock with the worker (as in a deployment).

Then, with ``--follow`` runs (30) held in their LLM step and one gateway
reader (``RunHub``) each, the CPU of the Temporal server and of this process
(worker and gateway) over ``--cpu-seconds``, polling against waiting, and
with nobody following. Usage::

    python -m benchmarks.streaming.first_token [--runs 5] [--chunks 40] [--interval 0.05]
        [--follow 30] [--cpu-seconds 10] [--gateway-process] [--client-process] [--trace] [--modes live,...]

Speed is measured here, never asserted; the machine's load moves the
absolute figures, so read each against the floor of the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import statistics
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn
from openai import AsyncOpenAI
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from agentloop import AgentClient, AgentSpec
from agentloop.activities.providers.models import ModelResolver
from agentloop.activities.providers.openai_model import OpenAIChatModel
from agentloop.activities.stream_publisher import DeltaPublisher
from agentloop.cli.servers.serve import listening_socket
from agentloop.server import ServerSettings, create_app
from agentloop.shared.base.contracts import CALL_MODEL, LIVE_TOKEN_ENV, LIVE_URL_ENV
from agentloop.shared.runs.events import MessageDelta
from agentloop.testing import reply
from agentloop.tools.registry import ToolRegistry
from agentloop.workers.devserver import DevServer
from agentloop.workers.worker import build_worker, connect
from benchmarks.streaming import start_trace
from benchmarks.streaming.follow_cpu import HELD, follow_cpu
from benchmarks.streaming.sse_fanout import ROOT, _env, start_gateway_with
from benchmarks.streaming.sse_timing import ClientProcess, timed_sse
from benchmarks.streaming.start_trace import Floor, FloorApart, floor_run, mark
from benchmarks.streaming.stream_latency import _latencies, _PacedServer, direct_run, pct

#: name: (the publisher's leading edge, readers wait, live deltas (None: in memory, in this process),
#: SSE by the streaming start, eager start)
MODES = {"today": (False, False, False, False, False), "first at once": (True, False, False, False, False),
         "first at once + wait": (True, True, False, False, False), "live": (True, False, True, False, False),
         "live + POST stream": (True, False, True, True, False), "live + eager start": (True, False, True, True, True),
         "live in memory": (True, False, None, False, False),
         "in memory + stream + eager": (True, False, None, True, True)}
LIVE_TOKEN = secrets.token_urlsafe(24)


# ---------------------------------------------------------------- agentloop


@dataclass
class Mode:
    ttft_events: list[float] = field(default_factory=list)
    ttft_sse: list[float] = field(default_factory=list)
    at_worker: list[float] = field(default_factory=list)  # start to the first delta reaching the publisher
    latencies: list[float] = field(default_factory=list)
    sse_latencies: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)  # this process's CPU-seconds per run over SSE
    opened: list[tuple[float, float]] = field(default_factory=list)  # POST answered, SSE headers, ms
    history: list[dict[str, int]] = field(default_factory=list)
    traces: list[Any] = field(default_factory=list)  # start_trace.trace of each run read by events()
    sse_traces: list[Any] = field(default_factory=list)  # the same, of each run started over SSE
    # SSE: the first delta at the worker and on its way, ms, and whether it came live (not from the history)
    journey: list[tuple[float, float, bool]] = field(default_factory=list)


async def events_run(agents: AgentClient, spec: AgentSpec, wait: bool, mode: Mode) -> None:
    began = time.time()
    handle = await agents.start(spec, "go")
    first = None
    async for event in agents.events(handle.run_id, wait=wait):
        received = time.time()
        if isinstance(event, MessageDelta) and event.delta.kind == "text":
            if first is None:
                first = (received - began) * 1000
                mode.at_worker.append((event.time.timestamp() - began) * 1000)
            mode.latencies.extend(_latencies(event.delta.text, received))
    await handle.result()
    mode.ttft_events.append(first if first is not None else float("nan"))
    history = await handle.workflow_handle.fetch_history()
    mode.traces.append(start_trace.trace(history.events, began, CALL_MODEL))
    counts = {"bytes": sum(e.ByteSize() for e in history.events), "events": len(history.events),
              "tasks": 0, "signals": 0, "updates": 0}
    for e in history.events:
        counts["tasks"] += e.HasField("workflow_task_completed_event_attributes")
        counts["signals"] += e.HasField("workflow_execution_signaled_event_attributes")
        counts["updates"] += e.HasField("workflow_execution_update_accepted_event_attributes")
    mode.history.append(counts)


async def sse_run(http: httpx.AsyncClient, spec: AgentSpec, mode: Mode, stream: bool = False,
                  agents: AgentClient | None = None, client: ClientProcess | None = None) -> None:
    """The first text delta over SSE: ``POST /v1/runs`` then ``GET .../events``,
    or (``stream``) the one ``POST /v1/runs/stream``; read in this process,
    or by ``client``, a process of its own."""
    cpu = time.process_time()
    body = {"spec": spec.model_dump(mode="json", exclude_defaults=True), "input": "go"}
    got = await (client.run(str(http.base_url), body, stream) if client is not None else timed_sse(http, body, stream))
    began = got["began"]
    opened = (got["opened"] - began) * 1000
    mode.opened.append(((got["posted"] - began) * 1000 if got["posted"] is not None else opened, opened))
    if got["first"] is not None:
        mode.journey.append(((got["at"] - began) * 1000, (got["first"] - got["at"]) * 1000, got["live"]))
    mode.sse_latencies.extend(got["latencies"])
    mode.ttft_sse.append((got["first"] - began) * 1000 if got["first"] is not None else float("nan"))
    mode.cpu.append(time.process_time() - cpu)
    if agents is not None:
        history = await agents.get_handle(got["run_id"]).workflow_handle.fetch_history()
        mode.sse_traces.append(start_trace.trace(history.events, began, CALL_MODEL))


@contextlib.asynccontextmanager
async def gateway(agents: AgentClient, wait: bool, live: bool = False, process: str | None = None,
                  embedded: bool = False) -> Any:
    """An ``agentloop serve`` app in this process, on a free port (taking
    live deltas with :data:`LIVE_TOKEN`, with ``live``); with ``process``
    (the Temporal address), ``agentloop serve`` in a process of its own."""
    if process is not None:
        extra = {"AGENTLOOP_WAIT_FOR_EVENTS": "1" if wait else "0", LIVE_TOKEN_ENV: LIVE_TOKEN if live else ""}
        env = _env(TEMPORAL_ADDRESS=process, AGENTLOOP_TASK_QUEUE=agents.task_queue, **extra)
        served = start_gateway_with(env)
        try:
            async with httpx.AsyncClient(base_url=served.url, timeout=60) as http:
                yield http
        finally:
            served.proc.terminate()
            served.proc.wait(10)
        return
    app = create_app(agents, ServerSettings(wait_for_events=wait, live_token=LIVE_TOKEN if live else None,
                                            live_in_process=embedded))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    sock = listening_socket("127.0.0.1", 0)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{sock.getsockname()[1]}", timeout=60) as http:
            yield http
    finally:
        server.should_exit = True
        await task


def _live_env(url: str | None) -> None:
    """Point this process's worker at the live gateway (``url``), or not (None)."""
    if url is None:
        os.environ.pop(LIVE_URL_ENV, None)
        os.environ.pop(LIVE_TOKEN_ENV, None)
    else:
        os.environ[LIVE_URL_ENV], os.environ[LIVE_TOKEN_ENV] = url, LIVE_TOKEN


# ---------------------------------------------------------------- report


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values):.1f}" if values else "n/a"


def report(floor: list[float], direct_ttft: list[float], direct_lat: list[float], modes: dict[str, Mode],
           cpu: dict[str, tuple[float, float]], args: argparse.Namespace) -> None:
    f50 = statistics.median(floor)
    d50, d95 = pct(direct_lat, 50), pct(direct_lat, 95)
    print(f"provider: {args.chunks} chunks, the first at once, then {args.interval * 1000:.0f} ms apart; "
          f"{args.runs} runs per mode (after a warm-up), medians; floor and direct in the same rounds")
    print(f"floor (bare workflow, start to activity running): p50 {f50:.1f} ms "
          f"(runs: {' '.join(f'{v:.1f}' for v in floor)})")
    print(f"direct (openai SDK): first chunk {_ms(direct_ttft)} ms after it was written; "
          f"chunk latency p50 {d50:.2f} ms, p95 {d95:.2f} ms")
    print()
    header = (f"{'mode':<22} {'TTFT events':>11} {'- floor':>8} {'TTFT SSE':>9} {'- floor':>8} "
              f"{'at worker':>9} {'added p50':>9} {'added p95':>9} {'SSE p50':>8} {'SSE p95':>8} "
              f"{'hist KB':>8} {'events':>7} {'WFTs':>5} {'signals':>7} {'updates':>7} {'CPU s':>6}")
    print(header)
    print("-" * len(header))
    for name, m in modes.items():
        h = {k: statistics.median(c[k] for c in m.history) for k in m.history[0]}
        te, ts = statistics.median(m.ttft_events), statistics.median(m.ttft_sse)
        print(f"{name:<22} {te:>11.1f} {te - f50:>+8.1f} {ts:>9.1f} {ts - f50:>+8.1f} "
              f"{statistics.median(m.at_worker):>9.1f} {pct(m.latencies, 50) - d50:>+9.1f} "
              f"{pct(m.latencies, 95) - d95:>+9.1f} {pct(m.sse_latencies, 50) - d50:>+8.1f} "
              f"{pct(m.sse_latencies, 95) - d95:>+8.1f} {h['bytes'] / 1024:>8.1f} "
              f"{h['events']:>7.0f} {h['tasks']:>5.0f} {h['signals']:>7.0f} {h['updates']:>7.0f} "
              f"{statistics.median(m.cpu):>6.3f}")
    print("at worker: start to the first delta reaching the worker's publisher (its `time`), ms; added: over "
          "events(), SSE: over the gateway's SSE, each against direct; CPU s: this process per run over SSE")
    print("\nTTFT runs (events; SSE), ms:")
    for name, m in modes.items():
        print(f"  {name:<22} {' '.join(f'{v:.0f}' for v in m.ttft_events)}; {' '.join(f'{v:.0f}' for v in m.ttft_sse)}"
              f"; POST answered, SSE open: {' '.join(f'{a:.0f}/{b:.0f}' for a, b in m.opened)}"
              f"; SSE's first delta at the worker, then on its way: "
              f"{' '.join(f'{a:.0f}+{b:.0f}{chr(32) if live else chr(104)}' for a, b, live in m.journey)}"
              " (h: it came from the history, not live)")
    if cpu:
        print(f"\nCPU-seconds over {args.cpu_seconds:g} s ({args.follow} runs held in their LLM step, one gateway "
              "reader each):")
        print(f"{'':<28} {'Temporal':>9} {'worker + gateway':>17}")
        for label, (server, proc) in cpu.items():
            print(f"{label:<28} {server:>9.2f} {proc:>17.2f}")


async def main(args: argparse.Namespace) -> None:
    from agentloop.activities.providers.scripted_model import register_scripted_model

    release = asyncio.Event()

    async def held(request: Any) -> Any:
        await release.wait()
        return reply("ok")

    register_scripted_model(HELD.split(":", 1)[1], held)
    provider = _PacedServer(args.chunks, args.interval)
    threading.Thread(target=provider.serve_forever, daemon=True).start()
    openai_client = AsyncOpenAI(base_url=provider.base_url, api_key="x", max_retries=0)
    models = ModelResolver({"openai": lambda _provider, _name: OpenAIChatModel(openai_client)})
    spec = AgentSpec(model="openai:gpt-bench", max_steps=1)
    floor: list[float] = []
    apart: list[float] = []
    floor_traces: dict[str, list[Any]] = {"floor": [], "floor, activity on another queue": []}
    direct_ttft: list[float] = []
    direct_lat: list[float] = []
    chosen = {name: MODES[name] for name in args.modes}
    modes = {name: Mode() for name in chosen}
    cpu: dict[str, tuple[float, float]] = {}
    try:
        with DevServer() as server:
            await server.wait_ready()
            client = await connect(server.address)
            queue = f"bench-first-token-{uuid.uuid4().hex[:8]}"
            agents = AgentClient(client, task_queue=queue)
            floor_queue = queue + "-floor"
            elsewhere = server.address if args.gateway_process else None
            reader = await ClientProcess.start(str(ROOT), _env()) if args.client_process else None
            async with build_worker(client, task_queue=queue, registry=ToolRegistry(), models=models), \
                    Worker(client, task_queue=floor_queue, workflows=[Floor, FloorApart], activities=[mark],
                           workflow_runner=UnsandboxedWorkflowRunner()), \
                    Worker(client, task_queue=floor_queue + "-apart", activities=[mark]), \
                    gateway(agents, False, process=elsewhere) as polling_http, \
                    gateway(agents, True, process=elsewhere) as waiting_http, \
                    gateway(agents, False, live=True, process=elsewhere) as live_http, \
                    gateway(agents, False, embedded=True) as embedded_http:
                https = {(False, False): polling_http, (True, False): waiting_http, (False, True): live_http,
                         (False, None): embedded_http}
                for warm in (True, *([False] * args.runs)):
                    traces = None if warm else floor_traces["floor"]
                    f = await floor_run(client, floor_queue, traces=traces)
                    traces = None if warm else floor_traces["floor, activity on another queue"]
                    a = await floor_run(client, floor_queue, floor_queue + "-apart", traces=traces)
                    lat = await direct_run(provider.base_url)
                    if not warm:
                        floor.append(f)
                        apart.append(a)
                        direct_ttft.append(lat[0] if lat else float("nan"))
                        direct_lat.extend(lat)
                    for name, (leading, wait, live, stream, eager) in chosen.items():
                        DeltaPublisher.leading = leading
                        agents.eager_start = eager
                        _live_env(str(live_http.base_url) if live else None)
                        mode = modes[name] if not warm else Mode()
                        await events_run(agents, spec, wait, mode)
                        await sse_run(https[(wait, live)], spec, mode, stream, agents if args.trace else None,
                                      reader)
                DeltaPublisher.leading, agents.eager_start = True, False
                _live_env(None)
                if reader is not None:
                    await reader.close()
                if args.follow:
                    cpu = await follow_cpu(agents, server.pid, args.follow, args.cpu_seconds, release)
    finally:
        DeltaPublisher.leading = True
        provider.shutdown()
        provider.server_close()
        await openai_client.close()
    report(floor, direct_ttft, direct_lat, modes, cpu, args)
    print(f"\nfloor with its activity on another queue: p50 {statistics.median(apart):.1f} ms "
          f"(runs: {' '.join(f'{v:.1f}' for v in apart)}); the other queue's share: "
          f"{statistics.median(apart) - statistics.median(floor):+.1f} ms")
    if args.trace:
        print("\nThe path to the first activity (call_model for agentloop), medians:")
        print(start_trace.header())
        ran = {"floor": floor, "floor, activity on another queue": apart}
        for label, traces in floor_traces.items():
            print(start_trace.report(label, traces, ran[label]))
        for name, m in modes.items():
            print(start_trace.report(name, m.traces, m.at_worker))
        for name, m in modes.items():
            print(start_trace.report(f"{name}, over SSE", m.sse_traces, [a for a, _, _ in m.journey]))
        print("ran: the activity's code running (the floor's mark; agentloop: its first delta at the publisher); "
              "over SSE: from the client's first request")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="measured runs per mode")
    parser.add_argument("--chunks", type=int, default=40, help="content chunks per answer")
    parser.add_argument("--interval", type=float, default=0.05, help="seconds between chunks")
    parser.add_argument("--follow", type=int, default=30, help="runs followed for the CPU measure (0: skip it)")
    parser.add_argument("--cpu-seconds", type=float, default=10.0, help="length of each CPU window")
    parser.add_argument("--modes", type=lambda text: [m.strip() for m in text.split(",")], default=list(MODES),
                        help=f"comma-separated modes to run (default all: {', '.join(MODES)})")
    parser.add_argument("--trace", action="store_true",
                        help="print each run's path from start to its first activity, from the histories")
    parser.add_argument("--client-process", action="store_true",
                        help="read the SSE runs in a process of its own (benchmarks.streaming.sse_timing), not in "
                             "this one, where the worker's workflow tasks hold up what the client reads")
    parser.add_argument("--gateway-process", action="store_true",
                        help="run each gateway as `agentloop serve` in a process of its own (not in this one, "
                             "with the worker)")
    args = parser.parse_args()
    if unknown := [name for name in args.modes if name not in MODES]:
        parser.error(f"--modes: {', '.join(map(repr, unknown))} not among {', '.join(MODES)}")
    asyncio.run(main(args))
