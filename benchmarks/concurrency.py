"""Many runs at once on one worker, against a bare workflow at the same N.

For each N (default 100, 300 and 1,000), in one process, each system on an
embedded dev server of its own, started fresh for it (fast polling:
transfer/timer MaxPollRPS=1000; search attributes cached as on a production
server, see ``agentloop.devserver.PRODUCTION_LIKE``). A server's cost per
run grows with the runs it already holds, so one shared server would charge
the later system. The two systems:

* floor: N bare workflows started at once, each doing what an agent run does
  here with plain activities: ``--steps`` times a model call then a tool
  call, then a last model call. The model call sleeps ``--model-ms``.
* agentloop: N agent runs started at once on one agentloop worker: a
  scripted model that takes ``--model-ms`` per call and asks for one tool
  call a step (``--steps`` of them), then answers; an async ``echo`` tool;
  deltas streamed (the default; ``--no-deltas`` turns them off).
* with ``--unsandboxed-floor``, one more row: the floor's workflow outside
  Temporal's workflow sandbox, as agentloop's runs by default (README
  "Where a worker's time goes"), so agentloop's own cost over Temporal shows
  apart from the sandbox's. Its ``x floor`` is to the first floor too.
* with ``--local-tools``, two more rows: the floor with its tool call a
  local activity, and agentloop with ``echo`` registered ``local=True``, so
  each call is a local activity of the run's worker (README "Quick tools as
  local activities"). Their ``x floor`` is still to the first floor; compare
  the two with each other.

Each N is measured ``--reps`` times, floor and agentloop in turn (which goes
first alternates, and each burst starts from a collected heap, since both
share this process); the table gives medians. Reports, per system and N:
runs/s (N over the time from the first start to the last result), p50 and
p95 of the gap between a run's consecutive model calls (minus the model's
own time: what the loop adds per step), runs unfinished at ``--timeout``,
the CPU the server and the worker (this process) spent per run over the
burst, the worker's RSS, and (agentloop) transcript queries per LLM step. The machine is shared by the
server and the worker: with 2 cores both are CPU-bound, so runs/s follows
their CPU per run. Usage::

    python -m benchmarks.concurrency [--runs 100,300,1000] [--reps 3] [--model-ms 300] [--steps 3] [--no-deltas]
        [--local-tools] [--unsandboxed-floor]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import os
import resource
import statistics
import time
import uuid

from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from agentloop import AgentClient, AgentLoopPlugin, AgentSpec, ModelResponse, ToolRegistry, Usage
from agentloop.devserver import PRODUCTION_LIKE, DevServer
from agentloop.testing import call, calls, register_scripted_model, reply, step_of
from agentloop.workers.worker import connect
from benchmarks.floor_workflows import MODEL_CALLS as CALLS
from benchmarks.floor_workflows import (
    MODEL_SECONDS,
    AgentShapedFloor,
    LocalToolFloor,
    UnsandboxedFloor,
    floor_model,
    floor_tool,
)

#: The floors by system name: their workflow and their row's label.
FLOORS = {
    "floor": (AgentShapedFloor, "floor"),
    "floor-unsandboxed": (UnsandboxedFloor, "floor (unsandboxed)"),
    "floor-local": (LocalToolFloor, "floor (local tool)"),
}


async def scripted(request):  # type: ignore[no-untyped-def]
    """The agent's model: ``MODEL_SECONDS`` per call, one echo per step.

    Like the floor's model, it does nothing but sleep and hand back an
    answer, here one made once (:data:`ANSWERS`): the cost of a model call on
    the worker is the provider adapter's, not the loop's, and neither system
    pays one here. The answers carry their usage, as a provider reports it
    (the scripted model would otherwise estimate it from the request's
    JSON), and their tool-call ids."""
    await asyncio.sleep(MODEL_SECONDS[0])
    return ANSWERS[min(step_of(request), STEPS)]


STEPS = 3

USAGE = Usage(input_tokens=120, output_tokens=20, requests=1)


def answers(steps: int) -> list[ModelResponse]:
    """The answer to each step: a call of ``echo`` for the first ``steps``, then ``done``."""
    return [
        calls(call("echo", {"text": f"step {step}"}, id=f"call_{step}_0")).model_copy(update={"usage": USAGE})
        for step in range(steps)
    ] + [reply("done").model_copy(update={"usage": USAGE})]


ANSWERS = answers(STEPS)


def rss_mb() -> tuple[float, float]:
    """This process's resident set now and at its peak, in MB."""
    now = 0.0
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                now = int(line.split()[1]) / 1024
    return now, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_seconds(pid: int | None) -> float:
    """CPU (user + system) a process has used: this one when ``pid`` is None."""
    if pid is None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def step_gaps(run_ids: list[str]) -> list[float]:
    """Gaps between a run's consecutive model calls, less the model's time (ms)."""
    gaps = []
    for run_id in run_ids:
        starts = CALLS.get(run_id, [])
        gaps += [(b - a - MODEL_SECONDS[0]) * 1000 for a, b in itertools.pairwise(starts)]
    return gaps


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


async def burst(start, ids: list[str], timeout: float) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    """Start every run at once; runs/s and how many did not finish in time."""
    began = time.monotonic()
    handles = await asyncio.gather(*(start(run_id) for run_id in ids))
    results = await asyncio.wait([asyncio.ensure_future(h.result()) for h in handles], timeout=timeout)
    done, pending = results
    for task in pending:
        task.cancel()
    failed = sum(1 for t in done if t.exception() is not None)
    if failed:
        print(f"  ({failed} runs failed: {next(t.exception() for t in done if t.exception())})")
    elapsed = time.monotonic() - began
    return len(done) / elapsed, len(pending)


async def measure(n: int, deltas: bool, timeout: float, floor: bool = True,
                  rep: int = 0, local: bool = False, unsandboxed: bool = False) -> list[dict[str, object]]:
    """Floor and agentloop (with ``unsandboxed``, then the floor outside
    the sandbox; with ``local``, then both with their tool call local) at
    ``n``, rows in that order, each on a dev server of its own,
    fresh: a server's cost per run grows with the runs it already holds, so
    sharing one would charge whichever system runs second. The process is
    shared, so the order alternates with ``rep`` and each
    burst starts from a collected heap: the garbage of one system's runs is
    not collected on the other's time."""
    rows: list[dict[str, object]] = []
    tag = uuid.uuid4().hex[:6]
    systems = (["floor", "agentloop"] + (["floor-unsandboxed"] if unsandboxed else [])
               + (["floor-local", "local"] if local else []))
    if not floor:
        systems = [s for s in systems if not s.startswith("floor")]
    for system in systems if rep % 2 == 0 else systems[::-1]:
        gc.collect()
        with DevServer(dynamic_config=PRODUCTION_LIKE) as server:
            await server.wait_ready()
            client = await connect(server.address)
            server_cpu, worker_cpu = cpu_seconds(server.pid), cpu_seconds(None)
            if system in FLOORS:
                row = await measure_floor(client, n, tag, timeout, system)
            else:
                row = await measure_agentloop(client, n, tag, deltas, timeout, local=system == "local")
            row["server_ms"] = (cpu_seconds(server.pid) - server_cpu) * 1000 / n
            row["worker_ms"] = (cpu_seconds(None) - worker_cpu) * 1000 / n
            row["order"] = systems.index(system)
            rows.append(row)
    return sorted(rows, key=lambda row: row["order"])  # type: ignore[arg-type,return-value]


def median_row(rows: list[dict[str, object]]) -> dict[str, object]:
    """One row of medians over repetitions (most unfinished; RSS at its largest)."""
    row = dict(rows[0])
    for key in ("rate", "p50", "p95", "server_ms", "worker_ms", "queries"):
        if row[key] is not None:
            row[key] = statistics.median(r[key] for r in rows)  # type: ignore[misc]
    row["unfinished"] = max(r["unfinished"] for r in rows)  # type: ignore[type-var]
    row["rss"] = max(r["rss"] for r in rows)  # type: ignore[type-var]
    row["rates"] = [r["rate"] for r in rows]
    return row


async def measure_floor(client: Client, n: int, tag: str, timeout: float, kind: str = "floor") -> dict[str, object]:
    """One floor of :data:`FLOORS` at ``n``."""
    floor_queue = f"{kind}-{tag}"
    runner = SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules("benchmarks.floor_workflows"))
    shape, label = FLOORS[kind]
    async with Worker(client, task_queue=floor_queue, workflows=[shape],
                      activities=[floor_model, floor_tool], workflow_runner=runner):
        ids = [f"{kind}-{tag}-{i}" for i in range(n)]

        async def start_floor(run_id: str):  # type: ignore[no-untyped-def]
            return await client.start_workflow(shape.run, STEPS, id=run_id, task_queue=floor_queue)

        rate, unfinished = await burst(start_floor, ids, timeout)
        gaps = step_gaps(ids)
        return {"system": label, "n": n, "rate": rate, "unfinished": unfinished,
                "p50": pct(gaps, 0.5), "p95": pct(gaps, 0.95), "rss": rss_mb()[0], "queries": None}


async def measure_agentloop(client: Client, n: int, tag: str, deltas: bool, timeout: float,
                            local: bool = False) -> dict[str, object]:
    queue = f"agents-{tag}"
    registry = ToolRegistry()

    @registry.tool(local=local)
    async def echo(text: str) -> str:
        """Return the text."""
        return text

    plugin = AgentLoopPlugin(registry=registry)
    agents = AgentClient(client, task_queue=queue)
    async with Worker(client, task_queue=queue, plugins=[plugin]):
        spec = AgentSpec(model="scripted:bench-concurrency", tools=["echo"], default_permission="allow",
                         max_steps=STEPS + 2, stream_deltas=deltas)
        ids = [f"{'local' if local else 'agent'}-{tag}-{i}" for i in range(n)]
        stats = plugin.agent_activities.transcripts.stats
        queries_before = stats.queries

        async def start_agent(run_id: str):  # type: ignore[no-untyped-def]
            return (await agents.start(spec, "go", run_id=run_id)).workflow_handle

        rate, unfinished = await burst(start_agent, ids, timeout)
        gaps = step_gaps(ids)
        llm_steps = sum(len(CALLS.get(i, [])) for i in ids) or 1
        label = "agentloop" + ("" if deltas else " (deltas off)") + (" (local tool)" if local else "")
        return {"system": label, "n": n, "rate": rate,
                "unfinished": unfinished, "p50": pct(gaps, 0.5), "p95": pct(gaps, 0.95), "rss": rss_mb()[0],
                "queries": (stats.queries - queries_before) / llm_steps}


async def main(runs: list[int], deltas: bool, timeout: float, floor: bool = True, reps: int = 3,
               local: bool = False, unsandboxed: bool = False) -> None:
    register_scripted_model("bench-concurrency", scripted)
    original = scripted

    async def counted(request):  # type: ignore[no-untyped-def]
        # Runs are keyed by workflow id: the scripted model runs inside call_model.
        CALLS[activity.info().workflow_id].append(time.monotonic())
        return await original(request)

    register_scripted_model("bench-concurrency", counted)
    print(f"a fresh dev server per system, N and repetition (fast polling, search attributes cached); "
          f"{STEPS} tool steps a run, model {MODEL_SECONDS[0] * 1000:.0f} ms a call, deltas "
          f"{'on' if deltas else 'off'}; medians of {reps}")
    print(f"{'system':<26}{'N':>6}{'runs/s':>9}{'x floor':>9}{'gap p50 ms':>12}{'gap p95 ms':>12}"
          f"{'unfinished':>12}{'server ms/run':>15}{'worker ms/run':>15}{'RSS MB':>9}{'queries/step':>14}"
          "   runs/s of each repetition")
    for n in runs:
        measured = [await measure(n, deltas, timeout, floor, rep, local, unsandboxed) for rep in range(reps)]
        rows = [median_row([rep[i] for rep in measured]) for i in range(len(measured[0]))]
        floor_rate = rows[0]["rate"] if floor else float("nan")
        for row in rows:
            queries = "" if row["queries"] is None else f"{row['queries']:.2f}"
            each = " ".join(f"{rate:.2f}" for rate in row["rates"])  # type: ignore[attr-defined]
            print(f"{row['system']:<26}{row['n']:>6}{row['rate']:>9.2f}{row['rate'] / floor_rate:>8.2f}x"
                  f"{row['p50']:>12.0f}{row['p95']:>12.0f}{row['unfinished']:>12}{row['server_ms']:>15.0f}"
                  f"{row['worker_ms']:>15.0f}{row['rss']:>9.0f}{queries:>14}   {each}", flush=True)
    print(f"peak RSS of the process: {rss_mb()[1]:.0f} MB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", default="100,300,1000", help="comma-separated N (runs at once)")
    parser.add_argument("--reps", type=int, default=3, help="repetitions of each N (the table gives medians)")
    parser.add_argument("--model-ms", type=float, default=300)
    parser.add_argument("--steps", type=int, default=3, help="tool steps per run")
    parser.add_argument("--no-deltas", action="store_true", help="stream_deltas=False")
    parser.add_argument("--local-tools", action="store_true",
                        help="also the floor with a local tool activity and agentloop with echo local=True")
    parser.add_argument("--unsandboxed-floor", action="store_true",
                        help="also the floor outside the workflow sandbox, as agentloop's workflow runs")
    parser.add_argument("--timeout", type=float, default=900, help="seconds to wait for a burst")
    parser.add_argument("--no-floor", action="store_true", help="agentloop only (e.g. under a profiler)")
    args = parser.parse_args()
    if args.no_floor and args.unsandboxed_floor:
        parser.error("--unsandboxed-floor is a floor: it cannot go with --no-floor")
    if args.reps < 1:
        parser.error(f"--reps must be at least 1, not {args.reps}")
    MODEL_SECONDS[0] = args.model_ms / 1000
    STEPS = args.steps
    ANSWERS = answers(STEPS)
    asyncio.run(main([int(n) for n in args.runs.split(",")], not args.no_deltas, args.timeout, not args.no_floor,
                     args.reps, args.local_tools, args.unsandboxed_floor))
