"""What a provider lane costs in throughput when nothing limits it, and why.

A model call on its lane's queue (``<queue>-llm-<provider>``) is dispatched
by the server's matching service like any activity of another queue; one on
the run's own queue (``AgentSpec(lane="")``) is started eagerly on the
worker that completed the workflow task. This runs, on one dev server, one
mock LLM and one process, the systems in turn in each repetition (the first
rotating):

* floor: ``benchmarks.loop.peers``' hand-written loop of plain activities;
* floor, model on its own queue: the same loop with its model calls on a
  second queue served by a second worker (what a lane is, in bare Temporal);
* agentloop: ``AgentRunWorkflow``, its model calls on the ``openai`` lane;
* agentloop, lane="": the same with its model calls on the run's queue;
* with ``--variants live``: agentloop with live deltas on, posted to an
  ``agentloop serve`` gateway that nobody follows runs on (issue 56's
  "throughput unchanged").

Each repetition starts ``--concurrency`` runs of ``--burst-steps`` steps at
once per system and records runs/s, and the CPU the Temporal server and
this process (client and workers) spent per run over the burst. Prints
medians, each with its ratio to the floor's; ``paired`` is the median of
the per-repetition ratios (the two bursts minutes apart at most, so the
machine's load hits both alike). On a CPU-bound machine throughput follows
CPU a run, so the server's CPU is where the lane's cost shows. Usage::

    python -m benchmarks.loop.lanes_cost [--reps 8] [--concurrency 20] [--burst-steps 5] [--partitions N]
        [--variants one-lane,autoscaling,live]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import statistics
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from agentloop import AgentClient, AgentSpec
from agentloop.workers.devserver import DevServer
from benchmarks.loop.floor_workflows import (
    PEER_SYSTEM_PROMPT,
    ChatFloorActivities,
    ChatFloorOnQueue,
    peer_model_name,
)
from benchmarks.loop.peers import System, agentloop_system, burst, floor_system, mock_llm, running

#: The suffix of the floor's model queue (the floor's "lane").
FLOOR_LANE = "-llm"


@contextlib.asynccontextmanager
async def _both(*workers: Worker) -> AsyncIterator[None]:
    async with contextlib.AsyncExitStack() as stack:
        for worker in workers:
            await stack.enter_async_context(worker)
        yield


def floor_on_queue_system() -> System:
    """The floor with its model calls on ``<queue>-llm``, served by a second worker."""
    runner = SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules("benchmarks.loop.floor_workflows"))

    def worker(client: Client, queue: str, mock_url: str) -> Any:
        acts = ChatFloorActivities(mock_url)
        return _both(Worker(client, task_queue=queue, workflows=[ChatFloorOnQueue], activities=[acts.echo],
                            workflow_runner=runner),
                     Worker(client, task_queue=queue + FLOOR_LANE, activities=[acts.call_model]))

    async def start(client: Client, queue: str, steps: int, run_id: str) -> WorkflowHandle:
        return await client.start_workflow(ChatFloorOnQueue.run, args=[steps, queue + FLOOR_LANE], id=run_id,
                                           task_queue=queue)

    return System("floor, model on its own queue", lambda address, mock_url: Client.connect(address), worker, start)


def agentloop_no_lane_system() -> System:
    """agentloop with ``AgentSpec(lane="")``: model calls on the run's own queue."""
    base = agentloop_system()

    async def start(client: Client, queue: str, steps: int, run_id: str) -> WorkflowHandle:
        spec = AgentSpec(model=f"openai:{peer_model_name(steps)}", system_prompt=PEER_SYSTEM_PROMPT,
                         tools=["echo"], default_permission="allow", max_steps=steps + 5, lane="")
        handle = await AgentClient(client, task_queue=queue).start(spec, "Run the benchmark script.", run_id=run_id)
        return handle.workflow_handle

    return System('agentloop, lane=""', base.connect, base.worker, start)


def agentloop_variant(variant: str) -> System:
    """agentloop on its lane with another worker setup: ``one-lane`` (the
    worker polls the ``openai`` lane alone, not every built-in provider's) or
    ``autoscaling`` (its workers' activity pollers autoscale)."""
    from temporalio.worker import PollerBehaviorAutoscaling

    from benchmarks.loop.agent_runs import bench_plugin

    base = agentloop_system()

    def worker(client: Client, queue: str, mock_url: str) -> Worker:
        plugin = bench_plugin()
        options: dict[str, Any] = {}
        if variant == "one-lane":
            plugin.lanes = ("openai",)
        else:
            options["activity_task_poller_behavior"] = PollerBehaviorAutoscaling()
        return Worker(client, task_queue=queue, plugins=[plugin], **options)

    return System(f"agentloop, {variant}", base.connect, worker, base.start)


#: The name of the ``live`` variant's system, and the environment its bursts run in.
LIVE_SYSTEM = "agentloop, live"
LIVE_ENV: dict[str, str] = {}


def agentloop_live_system() -> System:
    """agentloop on its lane with live deltas on (docs/live-deltas.md): an
    ``agentloop serve`` gateway in a process of its own takes the worker's
    deltas, and nobody follows the runs, as for most runs in production."""
    import atexit
    import secrets

    from agentloop.shared.base.contracts import LIVE_TOKEN_ENV, LIVE_URL_ENV
    from benchmarks.streaming.sse_fanout import start_gateway_with

    base = agentloop_system()

    async def connect(address: str, mock_url: str) -> Client:
        token = secrets.token_hex(16)
        gateway = start_gateway_with({**os.environ, "TEMPORAL_ADDRESS": address, LIVE_TOKEN_ENV: token})
        atexit.register(gateway.proc.terminate)
        LIVE_ENV.update({LIVE_URL_ENV: gateway.url, LIVE_TOKEN_ENV: token})
        return await base.connect(address, mock_url)

    return System(LIVE_SYSTEM, connect, base.worker, base.start)


@contextlib.contextmanager
def environment(system: System) -> Iterator[None]:
    """The live variant's bursts run with the gateway in the environment, the others' without."""
    os.environ.update(LIVE_ENV if system.name == LIVE_SYSTEM else {})
    try:
        yield
    finally:
        for name in LIVE_ENV:
            os.environ.pop(name, None)


def live_senders() -> list[Any]:
    """This event loop's senders to live gateways (the live variant's, when it ran)."""
    from agentloop.activities.live_sender import _senders

    found: list[Any] = []
    for sink in (_senders.get(asyncio.get_running_loop()) or {}).values():
        found.extend(getattr(sink, "senders", {}).values() or [sink])  # a fan-out holds one sender per gateway
    return found


#: The worker setups ``--variants`` may add.
VARIANTS = ("one-lane", "autoscaling", "live")


@dataclass
class Bursts:
    """One system's bursts: runs/s, and CPU ms a run of the server and of this process."""

    rate: list[float] = field(default_factory=list)
    server_ms: list[float] = field(default_factory=list)
    worker_ms: list[float] = field(default_factory=list)


def process_cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of process ``pid`` so far (Linux ``/proc``)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(systems: list[System], server: DevServer, mock_url: str, reps: int, concurrency: int,
                  burst_steps: int) -> dict[str, Bursts]:
    """Each system's bursts, repetition by repetition, the systems in turn."""
    assert server.pid is not None
    got: dict[str, Bursts] = {system.name: Bursts() for system in systems}
    async with running(systems, server.address, mock_url, []) as live:
        for rep in range(reps):
            for system, client, queue in live[rep % len(live):] + live[:rep % len(live)]:
                gc.collect()
                server_before, worker_before = process_cpu_seconds(server.pid), time.process_time()
                with environment(system):
                    got[system.name].rate.append(await burst(system, client, queue, concurrency, burst_steps))
                got[system.name].server_ms.append(
                    (process_cpu_seconds(server.pid) - server_before) * 1000 / concurrency)
                got[system.name].worker_ms.append((time.process_time() - worker_before) * 1000 / concurrency)
    return got


def table(got: dict[str, Bursts]) -> list[str]:
    """The printed table: medians, each with its ratio to the floor's, and the paired ratio of runs/s."""
    floor = got["floor"]
    lines = [f"{'system':<32}{'runs/s':>8}{'x floor':>9}{'paired':>8}{'server CPU ms/run':>19}{'x floor':>9}"
             f"{'worker CPU ms/run':>19}{'x floor':>9}"]
    for name, bursts in got.items():
        if not bursts.rate:
            lines.append(f"{name:<32} not measured (failed its warm-up run)")
            continue
        paired = statistics.median(mine / theirs for mine, theirs in zip(bursts.rate, floor.rate, strict=True))
        cells = ""
        for attribute, width in (("server_ms", 19), ("worker_ms", 19)):
            value = statistics.median(getattr(bursts, attribute))
            cells += f"{value:>{width}.0f}{value / statistics.median(getattr(floor, attribute)):>8.2f}x"
        rate = statistics.median(bursts.rate)
        lines.append(f"{name:<32}{rate:>8.2f}{rate / statistics.median(floor.rate):>8.2f}x{paired:>7.2f}x{cells}")
    return lines


async def main(reps: int, concurrency: int, burst_steps: int, partitions: int | None,
               variants: list[str]) -> None:
    systems = [floor_system(), floor_on_queue_system(), agentloop_system(), agentloop_no_lane_system(),
               *(agentloop_live_system() if variant == "live" else agentloop_variant(variant) for variant in variants)]
    dynamic = ({} if partitions is None else
               {"matching.numTaskqueueReadPartitions": str(partitions),
                "matching.numTaskqueueWritePartitions": str(partitions)})
    load = os.getloadavg()[0]
    with mock_llm() as mock_url, DevServer(dynamic_config=dynamic) as server:
        await server.wait_ready()
        got = await measure(systems, server, mock_url, reps, concurrency, burst_steps)
    print(f"dev server: fast polling, task queue partitions {partitions or 'default (4)'}; mock LLM answering at "
          f"once; {concurrency} runs of {burst_steps} steps at once per burst; medians of {reps} repetitions, "
          f"systems interleaved; load average {load:.1f} at the start")
    for line in table(got):
        print(line)
    if "live" in variants:
        for sender in live_senders():
            print(f"live sender: {sender.posts} posts to the gateway, {sender.sent} deltas in the ones it took "
                  f"(a run nobody follows is refused and muted), {sender.dropped} dropped")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=8, help="repetitions (the table gives medians)")
    parser.add_argument("--concurrency", type=int, default=20, help="runs started at once")
    parser.add_argument("--burst-steps", type=int, default=5, help="tool steps of each of those runs")
    parser.add_argument("--partitions", type=int, default=None,
                        help="the dev server's task queue partitions (read and write); its default when not given")
    parser.add_argument("--variants", default="", help=f"more agentloop setups, comma-separated: {', '.join(VARIANTS)}")
    args = parser.parse_args()
    variants = [name.strip() for name in args.variants.split(",") if name.strip()]
    for name in variants:
        if name not in VARIANTS:
            parser.error(f"--variants: {name!r} is not one of {', '.join(VARIANTS)}")
    for flag, value in (("--reps", args.reps), ("--concurrency", args.concurrency),
                        ("--burst-steps", args.burst_steps), ("--partitions", args.partitions or 1)):
        if value < 1:
            parser.error(f"{flag} must be at least 1, not {value}")
    asyncio.run(main(args.reps, args.concurrency, args.burst_steps, args.partitions, variants))
