"""The fleet benchmark's burst on a bare Temporal workflow: no agentloop code
in the workflow, the activity or the worker, only the same dev server, the
same rate-limited task queue and the same mock provider.

A workflow (``BareRun``) runs one activity (``bare_call``) on the queue
``<queue>-lane``, whose limit is set on the server (``UpdateTaskQueueConfig``,
as ``temporal task-queue config set --queue-rps-limit``). The activity posts
one chat completion to the mock provider (``mock_provider.py``: a token
bucket of ``--rate`` a second holding one second's requests) and, on 429,
fails with the ``retry-after`` as its next retry delay. Each request carries
the activity attempt's ``started_time`` (the server's dispatch time) in an
``x-dispatched-at`` header, so the provider keeps both when the server
handed a request out and when it arrived.

The load, as ``fleet.py``'s: ``--a`` workflows of fairness key A at once,
``--b`` of key B ``--b-after`` seconds later, ``--priority`` workflows of
priority 1 (key A) in the middle of A's backlog; two worker processes. Then
B's workflows alone, for B's baseline.

For each scenario it prints the 429s the provider sent and, to tell where a
burst comes from, the 429s the same bucket would have sent had each request
arrived at its dispatch time (``at dispatch``), the most dispatches in any
one second, and the lag from dispatch to arrival.

    python -m benchmarks.fleet.bare_burst [--a 300 --b 20 --priority 10 --rate 20 --lane-rps 19]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity, workflow
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.client import Client
from temporalio.common import Priority, RetryPolicy
from temporalio.exceptions import ApplicationError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from benchmarks.fleet.load import add_load_arguments, pct, set_lane
from benchmarks.fleet.mock_provider import MockProvider, arrival_summary

ROOT = Path(__file__).resolve().parents[2]
READY = "bare worker polling"


def post(url: str, dispatched: float) -> tuple[int, str | None]:
    request = urllib.request.Request(url, method="POST", data=json.dumps({"model": "gpt-fleet"}).encode(),
                                     headers={"content-type": "application/json",
                                              "x-dispatched-at": repr(dispatched)})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            answer.read()
            return answer.status, None
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("retry-after")


@activity.defn(name="bare_call")
async def bare_call(base_url: str) -> list[float]:
    """One chat completion; a 429 fails the attempt with its ``retry-after``.
    Returns the attempt's scheduled and started times (the server's)."""
    info = activity.info()
    dispatched = info.started_time.timestamp()
    status, retry_after = await asyncio.to_thread(post, f"{base_url}/chat/completions", dispatched)
    if status == 429:
        raise ApplicationError("429 from the provider", type="RateLimited",
                               next_retry_delay=timedelta(seconds=float(retry_after or 1)))
    if status != 200:
        raise ApplicationError(f"provider answered {status}", non_retryable=True)
    return [info.current_attempt_scheduled_time.timestamp(), dispatched]


@workflow.defn(name="BareRun")
class BareRun:
    @workflow.run
    async def run(self, base_url: str, lane: str) -> list[float]:
        """[first workflow task, activity scheduled, activity started] (Unix seconds)."""
        first = workflow.now().timestamp()
        times = await workflow.execute_activity(
            "bare_call", base_url, task_queue=lane, start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=5),
            result_type=list[float])
        return [first, *times]


async def serve(address: str, queue: str, max_cached: str = "1000") -> None:
    """A worker process: the workflows on ``queue`` (``max_cached`` of them
    cached; 0: no sticky queue), the activities on its lane."""
    client = await Client.connect(address)
    runner = UnsandboxedWorkflowRunner()
    async with Worker(client, task_queue=queue, workflows=[BareRun], workflow_runner=runner,
                      max_cached_workflows=int(max_cached)), \
            Worker(client, task_queue=f"{queue}-lane", activities=[bare_call]):
        print(READY, flush=True)
        await asyncio.Event().wait()


@dataclass
class Outcome:
    """What one scenario gave."""

    name: str
    seconds: dict[str, list[float]] = field(default_factory=dict)  # by group: run times of completed runs
    # by group: per run, seconds its start call took, from its start to its first workflow task, its lane wait
    waits: dict[str, list[tuple[float, float, float]]] = field(default_factory=dict)
    failed: int = 0
    arrivals: list[tuple[float, float | None, bool]] = field(default_factory=list)
    began: float = 0.0  # wall clock


async def timed(client: Client, queue: str, base_url: str, key: str, priority: int | None, delay: float,
                out: Outcome, group: str) -> None:
    await asyncio.sleep(delay)
    began, wall = time.monotonic(), time.time()
    try:
        handle = await client.start_workflow(
            BareRun.run, args=[base_url, f"{queue}-lane"], id=f"bare-{uuid.uuid4()}",
            task_queue=queue, priority=Priority(priority_key=priority, fairness_key=key))
        start_call = time.monotonic() - began
        first, scheduled, started = await handle.result()
    except Exception:  # a run that failed: counted, not timed
        out.failed += 1
        return
    out.seconds.setdefault(group, []).append(time.monotonic() - began)
    out.waits.setdefault(group, []).append((start_call, first - wall, started - scheduled))


async def scenario(name: str, address: str, client: Client, provider: MockProvider,
                   args: argparse.Namespace, log: Path) -> Outcome:
    queue = f"bare-{name.replace(' ', '-')}-{uuid.uuid4().hex[:6]}"
    await set_lane(client, "bare-burst", f"{queue}-lane", args.lane_rps or args.rate, args.b_weight, queue,
                   [TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW] if args.run_queue_weight else [])
    command = ["--worker", address, queue, str(args.max_cached_workflows)]
    workers = [subprocess.Popen([sys.executable, "-m", "benchmarks.fleet.bare_burst", *command],
                                cwd=ROOT, stdout=log.open("ab"), stderr=subprocess.STDOUT)
               for _ in range(args.workers)]
    out = Outcome(name)
    try:
        deadline = time.monotonic() + 60
        while log.read_text(errors="replace").count(READY) < args.workers * (1 + args._scenarios_done):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the workers did not start:\n{log.read_text(errors='replace')[-2000:]}")
            await asyncio.sleep(0.2)
        provider.reset()
        out.began = time.time()
        url, tasks = provider.base_url, []
        if name != "B alone":
            tasks += [timed(client, queue, url, "A", None, 0, out, "A") for _ in range(args.a)]
            middle = args.a / args.rate / 2
            tasks += [timed(client, queue, url, "A", 1, middle, out, "P1") for _ in range(args.priority)]
        after = 0 if name == "B alone" else args.b_after
        tasks += [timed(client, queue, url, "B", None, after, out, "B") for _ in range(args.b)]
        await asyncio.gather(*tasks)
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
    args._scenarios_done += 1
    out.arrivals = list(provider.arrivals)
    return out


def summary(out: Outcome, alone: Outcome | None, rate: float, lane_rps: float) -> dict[str, Any]:
    row: dict[str, Any] = {"scenario": out.name, "failed": out.failed,
                           **arrival_summary(out.arrivals, out.began, rate, lane_rps)}
    ok = sorted(a for a, _, admitted in out.arrivals if admitted)
    row["throughput"] = round((len(ok) - 1) / (ok[-1] - ok[0]) / rate, 2) if len(ok) > 1 else None
    for group, waits in sorted(out.waits.items()):
        row[f"{group} p50 s"] = round(pct(out.seconds[group], 50), 2)
        row[f"{group} p50 start call s"] = round(pct([w for w, _, _ in waits], 50), 2)
        row[f"{group} p50 to first wf task s"] = round(pct([w for _, w, _ in waits], 50), 2)
        row[f"{group} p50 lane wait s"] = round(pct([w for _, _, w in waits], 50), 2)
    b, base = out.seconds.get("B", []), (alone.seconds.get("B", []) if alone else [])
    if base and b:
        row["B p50 / alone"] = round(pct(b, 50) / pct(base, 50), 2)
    if out.seconds.get("P1") and out.seconds.get("A"):
        row["P1 p50 / A p50"] = round(pct(out.seconds["P1"], 50) / pct(out.seconds["A"], 50), 2)
    return row


async def main(args: argparse.Namespace) -> None:
    from agentloop.workers.devserver import DevServer  # only to start the temporal binary with dynamic config
    from benchmarks.fleet.fleet import FAIRNESS_CONFIG

    args._scenarios_done = 0
    provider = MockProvider(args.rate, args.service).start()
    log = Path(args.log)
    log.write_text("")
    try:
        with DevServer(dynamic_config=FAIRNESS_CONFIG) as server:
            await server.wait_ready()
            client = await Client.connect(server.address)
            outcomes = {}
            for name in ("B alone", "burst"):
                outcomes[name] = await scenario(name, server.address, client, provider, args, log)
                print(f"{name}: done, {outcomes[name].failed} failed", file=sys.stderr)
    finally:
        provider.shutdown()
        provider.server_close()
    print(f"bare burst: A {args.a} at once, B {args.b} {args.b_after:g}s later, {args.priority} priority-1 in the "
          f"middle ({args.a / args.rate / 2:g}s); provider {args.rate:g} req/s (bucket of 1 s); lane limit "
          f"{args.lane_rps or args.rate:g} req/s; B's weight {args.b_weight:g}; {args.workers} workers")
    for out in outcomes.values():
        print(json.dumps(summary(out, outcomes["B alone"], args.rate, args.lane_rps or args.rate)))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_load_arguments(p, "workflows")
    p.add_argument("--lane-rps", type=float, default=None, help="the lane's limit (default: --rate)")
    p.add_argument("--b-weight", type=float, default=1.0, help="key B's fairness weight on the lane (default 1)")
    p.add_argument("--run-queue-weight", action="store_true",
                   help="set B's weight on the workflows' queue as well as on the lane")
    p.add_argument("--log", default="/tmp/bare_burst_workers.log", help="the workers' output")
    p.add_argument("--max-cached-workflows", type=int, default=1000,
                   help="the workers' workflow cache (default 1000; 0: no sticky queues, every workflow task "
                        "on the fair normal queue)")
    p.add_argument("--worker", nargs=3, metavar=("ADDRESS", "QUEUE", "MAX_CACHED"), help=argparse.SUPPRESS)
    return p


if __name__ == "__main__":
    parsed = parser().parse_args()
    asyncio.run(serve(*parsed.worker) if parsed.worker else main(parsed))
