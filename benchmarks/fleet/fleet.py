"""One fleet, many tenants: a provider's rate limit, kept by a lane's limit
on the Temporal server, with priority and fairness, against today's
behaviour, on the same load in the same run.

A local provider in OpenAI's wire format (``mock_provider.py``) answers at
most ``--rate`` requests a second and 429 with ``retry-after`` above it.
Two worker processes (``agentloop worker``) serve one task queue. The load:
tenant A starts ``--a`` runs at once; tenant B ``--b`` runs ``--b-after``
seconds later; ``--priority`` runs of priority 1 start in the middle of
A's backlog. Each run is one LLM step.

* ``off``: model calls on the run's own queue (``AgentSpec.lane=""``), no
  limit on the server, no priority or fairness key (agentloop before lanes).
* ``on``: model calls on the ``openai`` lane, its queue limited to
  ``--rate`` (``agentloop lanes set openai --rps``), each run's Priority
  with its tenant as fairness key, and priority 1 for the priority runs.
* ``B alone``: B's runs with nothing else, lanes on: B's baseline.

Priority and fairness go on the workflow (``AgentClient.start(..., tenant=)``
and ``AgentSpec.priority`` become its ``temporalio.common.Priority``), which
its activities inherit; the dev server runs with the dynamic config
fairness needs (:data:`FAIRNESS_CONFIG`). Prints one table; compare the
rows of one run (the machine's load moves absolute figures). Then, to tell
where 429s and waits come from: what the provider saw (the workers run
``traced_worker.py``, which stamps each request with its dispatch time:
``mock_provider.arrival_summary``) and the median parts of each group's
run times from their histories (``timeline.py``).

    python -m benchmarks.fleet.fleet [--a 300 --b 20 --priority 10 --rate 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.client import Client

from agentloop import AgentClient, AgentSpec
from agentloop.shared.definition.lanes import lane_queue
from agentloop.workers.devserver import DevServer
from agentloop.workers.worker import connect
from benchmarks.fleet.load import add_load_arguments, pct, set_lane
from benchmarks.fleet.mock_provider import MockProvider, arrival_summary
from benchmarks.fleet.timeline import median_breakdown

ROOT = Path(__file__).resolve().parents[2]

#: The dev server's dynamic config for priority and fairness in matching.
FAIRNESS_CONFIG = {"matching.useNewMatcher": "true", "matching.enableFairness": "true",
                   "matching.numTaskqueueReadPartitions": "1", "matching.numTaskqueueWritePartitions": "1"}

#: With --weight-every-queue, B's weight on the run queue's workflow and activity tasks too.
EVERY_TASK_TYPE = (TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY)


@dataclass
class Outcome:
    """What one scenario gave."""

    name: str
    queue: str = ""
    seconds: dict[str, list[float]] = field(default_factory=dict)  # by group: run times of completed runs
    failed: int = 0
    requests: int = 0
    throttled: int = 0
    throughput: float = 0.0
    wall: float = 0.0
    throttled_at: list[float] = field(default_factory=list)  # seconds after the load began
    ids: dict[str, list[str]] = field(default_factory=dict)  # by group: workflow ids of completed runs
    arrivals: list[tuple[float, float | None, bool]] = field(default_factory=list)  # the provider's
    began_wall: float = 0.0


async def start_run(client: Client, queue: str, spec: AgentSpec, tenant: str, priority: int | None,
                    fair: bool) -> Any:
    """One run started by ``AgentClient.start``: when ``fair``, with its tenant
    (the fairness key) and ``AgentSpec.priority``; otherwise with neither."""
    agents = AgentClient(client, task_queue=queue)
    if fair:
        return await agents.start(spec.model_copy(update={"priority": priority}), "go", tenant=tenant)
    return await agents.start(spec, "go")


async def timed(client: Client, queue: str, spec: AgentSpec, tenant: str, priority: int | None, fair: bool,
                delay: float, out: Outcome, group: str) -> None:
    await asyncio.sleep(delay)
    began = time.monotonic()
    try:
        handle = await start_run(client, queue, spec, tenant, priority, fair)
        result = await handle.result()
    except Exception:  # a run that failed: counted, not timed
        out.failed += 1
        return
    if result.status != "completed":
        out.failed += 1
        return
    out.seconds.setdefault(group, []).append(time.monotonic() - began)
    out.ids.setdefault(group, []).append(handle.run_id)


def spawn_workers(server: DevServer, queue: str, provider: MockProvider, count: int, log: Path) -> list[Any]:
    env = dict(os.environ, TEMPORAL_ADDRESS=server.address, AGENTLOOP_TASK_QUEUE=queue, OPENAI_API_KEY="fleet",
               OPENAI_BASE_URL=provider.base_url, AGENTLOOP_LANES="openai")
    return [subprocess.Popen([sys.executable, "-m", "benchmarks.fleet.traced_worker", "worker"], cwd=ROOT, env=env,
                             stdout=log.open("ab"), stderr=subprocess.STDOUT) for _ in range(count)]


async def wait_polling(log: Path, count: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while log.read_text(errors="replace").count("agentloop worker: role") < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the workers did not start:\n{log.read_text(errors='replace')[-2000:]}")
        await asyncio.sleep(0.2)


async def scenario(name: str, server: DevServer, client: Client, provider: MockProvider,
                   args: argparse.Namespace, tmp: Path) -> Outcome:
    lanes = name != "off"
    queue = f"fleet-{name.replace(' ', '-')}-{uuid.uuid4().hex[:6]}"
    if lanes:
        await set_lane(client, "fleet-benchmark", lane_queue(queue, "openai"), args.lane_rps or args.rate,
                       args.b_weight, queue, EVERY_TASK_TYPE if args.weight_every_queue else ())
    log = tmp / f"{queue}.log"
    log.touch()
    workers = spawn_workers(server, queue, provider, args.workers, log)
    out = Outcome(name, queue=queue)
    try:
        await wait_polling(log, args.workers)
        spec = AgentSpec(model="openai:gpt-fleet", max_steps=1, stream_deltas=False,
                         lane=None if lanes else "", llm_max_attempts=args.attempts)
        provider.reset()
        began, out.began_wall = time.monotonic(), time.time()
        middle = args.a / args.rate / 2
        tasks = []
        if name != "B alone":
            tasks += [timed(client, queue, spec, "A", None, lanes, 0, out, "A") for _ in range(args.a)]
            tasks += [timed(client, queue, spec, "A", 1, lanes, middle, out, "P1") for _ in range(args.priority)]
        tasks += [timed(client, queue, spec, "B", None, lanes, 0 if name == "B alone" else args.b_after, out, "B")
                  for _ in range(args.b)]
        await asyncio.gather(*tasks)
        out.wall = time.monotonic() - began
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            try:
                worker.wait(timeout=40)
            except subprocess.TimeoutExpired:
                worker.kill()
    out.requests = len(provider.ok_times) + provider.throttled
    out.throttled, out.throughput = provider.throttled, provider.throughput()
    out.throttled_at = [round(t - began, 1) for t in provider.throttled_times]
    out.arrivals = list(provider.arrivals)
    return out


def report(outcomes: dict[str, Outcome], args: argparse.Namespace) -> None:
    alone = outcomes["B alone"].seconds.get("B", [])
    print(f"fleet: A {args.a} runs at once, B {args.b} runs {args.b_after:g}s later, {args.priority} priority-1 "
          f"runs in the middle of A's backlog; provider {args.rate:g} req/s; {args.workers} workers; "
          f"lane limit {args.lane_rps or args.rate:g} req/s; B's weight {args.b_weight:g}")
    print(f"B alone: p50 {pct(alone, 50):.2f}s, p95 {pct(alone, 95):.2f}s")
    header = ["mode", "requests", "429s", "429 %", "failed", "throughput", "B p50", "B p95", "B p50/alone",
              "P1 p50", "A p50", "P1/A", "wall"]
    rows = [header]
    for name in [n for n in ("off", "on") if n in outcomes]:
        o = outcomes[name]
        b, p1, a = o.seconds.get("B", []), o.seconds.get("P1", []), o.seconds.get("A", [])
        rows.append([name, str(o.requests), str(o.throttled), f"{100 * o.throttled / max(1, o.requests):.1f}%",
                     str(o.failed), f"{100 * o.throughput / args.rate:.0f}%", f"{pct(b, 50):.2f}s",
                     f"{pct(b, 95):.2f}s", f"{pct(b, 50) / pct(alone, 50):.2f}x", f"{pct(p1, 50):.2f}s",
                     f"{pct(a, 50):.2f}s", f"{pct(p1, 50) / pct(a, 50):.2f}x", f"{o.wall:.1f}s"])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for row in rows:
        cells = zip(row, widths, strict=True)
        print("  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(cells)))
    print("throughput: answers a second from the first to the last, as a share of the provider's rate; "
          "times from each run's start to its result")


async def main(args: argparse.Namespace) -> None:
    provider = MockProvider(args.rate, args.service).start()
    try:
        with tempfile.TemporaryDirectory() as tmp, DevServer(dynamic_config=FAIRNESS_CONFIG) as server:
            await server.wait_ready()
            client = await connect(server.address)
            outcomes = {}
            for name in ("B alone", "on") if args.skip_off else ("B alone", "off", "on"):
                outcomes[name] = await scenario(name, server, client, provider, args, Path(tmp))
                print(f"{name}: done in {outcomes[name].wall:.1f}s, {outcomes[name].failed} failed", file=sys.stderr)
            report(outcomes, args)
            print(f"mean of A's run times (on): {statistics.mean(outcomes['on'].seconds.get('A', [0])):.2f}s")
            print(f"429s with lanes on, seconds after the load began: {outcomes['on'].throttled_at}")
            for name in ("B alone", "on"):
                out = outcomes[name]
                seen = arrival_summary(out.arrivals, out.began_wall, args.rate, args.lane_rps or args.rate)
                print(f"{name}: provider {json.dumps(seen)}")
                queue = out.queue
                for group, ids in sorted(out.ids.items()):
                    parts = await median_breakdown(client, ids[:40], queue)
                    print(f"{name}: {group} medians (s) {json.dumps(parts)}")
    finally:
        provider.shutdown()
        provider.server_close()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_load_arguments(p, "runs")
    p.add_argument("--lane-rps", type=float, default=None,
                   help="the lane's limit with lanes on (default: --rate, the provider's rate)")
    p.add_argument("--b-weight", type=float, default=1.0,
                   help="tenant B's fairness weight on the lane, with lanes on (default 1: as A's)")
    p.add_argument("--weight-every-queue", action="store_true",
                   help="set B's weight on the run queue (workflow and activity tasks) as well as on the lane")
    p.add_argument("--skip-off", action="store_true", help="leave out the 'off' scenario (today's behaviour)")
    p.add_argument("--attempts", type=int, default=5, help="AgentSpec.llm_max_attempts (default 5)")
    return p


if __name__ == "__main__":
    asyncio.run(main(parser().parse_args()))
