"""Many runs at once on one worker, against a bare workflow at the same N.

For each N (default 100, 300 and 1,000), in one process, each system on an
embedded dev server of its own, started fresh for it (fast polling:
transfer/timer MaxPollRPS=1000; search attributes cached as on a production
server, see ``agentloop.workers.devserver.PRODUCTION_LIKE``). A server's cost per
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
  "What you can trade"), so agentloop's own cost over Temporal shows
  apart from the sandbox's. Its ``x floor`` is to the first floor too.
* with ``--record-floor``, one more row: the floor recording what an agent
  run records besides its calls (:class:`RecordFloor`: start search
  attributes and summary, a patch marker, the tool lookup as a local
  activity, a summary on each activity, an agent run's payload sizes, the
  closing status upsert), outside the sandbox as agentloop's workflow runs:
  what agentloop spends over it is its own code's. Its ``x floor`` is to
  the first floor too.
* with ``--without lookup,events``, one more row: agentloop's runs with
  those parts switched off (:func:`switched_off`): ``lookup``, the local
  activity that looks a run's tools up at its start (each run is handed the
  answer of one lookup made before the burst); ``events``, every event on
  the run's stream. Not a mode of agentloop (such a run emits nothing, and
  keeps no record of its tools in its history): an upper bound of what a
  change that removed the part would buy, measured beside the real thing.
* with ``--local-tools``, two more rows: the floor with its tool call a
  local activity, and agentloop with ``echo`` registered ``local=True``, so
  each call is a local activity of the run's worker (README "Quick tools as
  local activities"). Their ``x floor`` is still to the first floor; compare
  the two with each other.

Each N is measured ``--reps`` times, floor and agentloop in turn (which goes
first alternates, and each burst starts from a collected heap, since both
share this process); the table gives medians. With ``--sustained SECONDS``,
each system instead keeps N runs in flight (a finished run is replaced at
once) and is measured over a window of that many seconds, which opens once
the first N runs have finished: a steady load, where a single burst thins
out at its end and leaves the server's timers of its last runs until after
it. Reports, per system and N:
runs/s (N over the time from the first start to the last result; sustained,
the runs finished in the window over its length), p50 and
p95 of the gap between a run's consecutive model calls (minus the model's
own time: what the loop adds per step), runs unfinished at ``--timeout``
(sustained: after the window, once no new runs start), the CPU the server
and the worker (this process) spent per run over the burst or the window,
the worker's RSS, and (agentloop) transcript queries per LLM step. Of the
worker's CPU, three parts (:class:`CpuSplit`): the workflow ms/run its
workflow activations took (the workflow code and the SDK's work on each
activation), the activities ms/run its activities' own code took (between
the SDK's decoding of their input and its encoding of their result), and
the gc ms/run the garbage collector took, wherever it ran (collections
during the other two counted there too), and of that the full gc ms/run its
full collections took (they walk every object the process holds, so their
cost a run grows with the runs in flight). Then the collections a run, by
where each started (gcs/run wf/act/else): inside an activation, inside an
activity's step, or elsewhere (the SDK's decoding of activations and
encoding of completions, its activity worker, the client starting the runs
and waiting on them). The machine is shared by the
server and the worker: with 2 cores both are CPU-bound, so runs/s follows
their CPU per run. Usage::

    python -m benchmarks.loop.concurrency [--runs 100,300,1000] [--reps 3] [--model-ms 300] [--steps 3] [--no-deltas]
        [--local-tools] [--unsandboxed-floor] [--record-floor] [--without lookup,events] [--sustained SECONDS]
        [--gc-threshold 50000,20,100]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
import uuid

from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from agentloop.testing import register_scripted_model
from agentloop.workers.devserver import PRODUCTION_LIKE, DevServer
from agentloop.workers.worker import connect
from benchmarks.loop import agent_runs
from benchmarks.loop.agent_runs import PARTS, answers, measure_agentloop, parts_of, scripted
from benchmarks.loop.cpu_split import CpuSplit, cpu_seconds, rss_mb
from benchmarks.loop.floor_workflows import MODEL_CALLS as CALLS
from benchmarks.loop.floor_workflows import (
    MODEL_SECONDS,
    AgentShapedFloor,
    LocalToolFloor,
    RecordFloor,
    UnsandboxedFloor,
    floor_model,
    floor_tool,
    record_lookup,
    record_model,
    record_start_options,
)
from benchmarks.loop.load import Sustained, cpu_columns, drive, median_row, row_of

#: The floors by system name: their workflow and their row's label.
FLOORS = {
    "floor": (AgentShapedFloor, "floor"),
    "floor-unsandboxed": (UnsandboxedFloor, "floor (unsandboxed)"),
    "floor-local": (LocalToolFloor, "floor (local tool)"),
    "floor-record": (RecordFloor, "floor (agentloop's record)"),
}



async def measure(n: int, deltas: bool, timeout: float, floor: bool = True, rep: int = 0, local: bool = False,
                  unsandboxed: bool = False, window: float | None = None,
                  without: tuple[str, ...] = (), record: bool = False) -> list[dict[str, object]]:
    """Floor and agentloop (with ``unsandboxed``, then the floor outside
    the sandbox; with ``record``, then the floor with agentloop's record;
    with ``without``, then agentloop without those parts; with ``local``,
    then both with their tool call local) at ``n``, rows in that order,
    each on a dev server of its own, fresh: a server's cost per run grows
    with the runs it already holds, so sharing one would charge whichever
    system runs second. The process is shared, so the order alternates with
    ``rep`` and each burst starts from a collected heap: the garbage of one system's runs is
    not collected on the other's time. With ``window``, each system keeps
    ``n`` runs in flight and is measured over that many seconds
    (:func:`sustain`)."""
    rows: list[dict[str, object]] = []
    tag = uuid.uuid4().hex[:6]
    systems = (["floor", "agentloop"] + (["floor-unsandboxed"] if unsandboxed else [])
               + (["floor-record"] if record else [])
               + (["without"] if without else []) + (["floor-local", "local"] if local else []))
    if not floor:
        systems = [s for s in systems if not s.startswith("floor")]
    for system in systems if rep % 2 == 0 else systems[::-1]:
        gc.collect()
        with DevServer(dynamic_config=PRODUCTION_LIKE) as server, CpuSplit() as split:
            await server.wait_ready()
            client = await connect(server.address)
            pid = server.pid

            def cpu(pid: int = pid, split: CpuSplit = split) -> tuple[float, ...]:
                # Collections counted in thousands, so that the per-run figures (after - before) * 1000 / runs
                # are milliseconds a run for the CPU seconds and collections a run for the counts.
                return (cpu_seconds(pid), cpu_seconds(None), *split.seconds(),
                        *(count / 1000 for count in split.collections()))

            sustained = None if window is None else Sustained(window, cpu)
            before = cpu()
            if system in FLOORS:
                row = await measure_floor(client, n, tag, timeout, system, sustained=sustained, split=split)
            else:
                row = await measure_agentloop(client, n, tag, deltas, timeout, local=system == "local",
                                              sustained=sustained, split=split,
                                              without=without if system == "without" else ())
            if sustained is None:
                row.update(cpu_columns(tuple((a - b) * 1000 / n for a, b in zip(cpu(), before, strict=True))))
            row["order"] = systems.index(system)
            rows.append(row)
    return sorted(rows, key=lambda row: row["order"])


async def measure_floor(client: Client, n: int, tag: str, timeout: float, kind: str = "floor", *,
                        sustained: Sustained | None = None, split: CpuSplit | None = None) -> dict[str, object]:
    """One floor of :data:`FLOORS` at ``n`` (``split`` times its activities)."""
    floor_queue = f"{kind}-{tag}"
    runner = SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules("benchmarks.loop.floor_workflows"))
    shape, label = FLOORS[kind]
    activities = [floor_model, floor_tool, record_model, record_lookup]
    async with Worker(client, task_queue=floor_queue, workflows=[shape], activities=activities,
                      workflow_runner=runner, interceptors=[split] if split else []):
        async def start_floor(run_id: str):
            if shape is RecordFloor:
                return await client.start_workflow(shape.run, id=run_id, task_queue=floor_queue,
                                                   **record_start_options(agent_runs.STEPS))
            return await client.start_workflow(shape.run, agent_runs.STEPS, id=run_id, task_queue=floor_queue)

        driven = await drive(start_floor, f"{kind}-{tag}", n, timeout, sustained)
        return row_of(label, n, driven, queries=None)




async def main(runs: list[int], deltas: bool, timeout: float, floor: bool = True, reps: int = 3,
               local: bool = False, unsandboxed: bool = False, window: float | None = None,
               without: tuple[str, ...] = (), record: bool = False) -> None:
    register_scripted_model("bench-concurrency", scripted)
    original = scripted

    async def counted(request):
        # Runs are keyed by workflow id: the scripted model runs inside call_model.
        CALLS[activity.info().workflow_id].append(time.monotonic())
        return await original(request)

    register_scripted_model("bench-concurrency", counted)
    load = "one burst of N runs" if window is None else f"N runs kept in flight, a {window:g} s window"
    print(f"a fresh dev server per system, N and repetition (fast polling, search attributes cached); {load}; "
          f"{agent_runs.STEPS} tool steps a run, model {MODEL_SECONDS[0] * 1000:.0f} ms a call, deltas "
          f"{'on' if deltas else 'off'}; medians of {reps}")
    width = max(26, len(f"agentloop without {', '.join(without)}") + 2) if without else 26  # the system column
    print(f"{'system':<{width}}{'N':>6}{'runs/s':>9}{'x floor':>9}{'gap p50 ms':>12}{'gap p95 ms':>12}"
          f"{'unfinished':>12}{'server ms/run':>15}{'worker ms/run':>15}{'workflow ms/run':>17}"
          f"{'activities ms/run':>19}{'gc ms/run':>11}{'full gc ms/run':>16}{'gcs/run wf/act/else':>21}"
          f"{'RSS MB':>9}{'queries/step':>14}   runs/s of each repetition")
    for n in runs:
        measured = [await measure(n, deltas, timeout, floor, rep, local, unsandboxed, window, without, record)
                    for rep in range(reps)]
        rows = [median_row([rep[i] for rep in measured]) for i in range(len(measured[0]))]
        floor_rate = rows[0]["rate"] if floor else float("nan")
        for row in rows:
            queries = "" if row["queries"] is None else f"{row['queries']:.2f}"
            each = " ".join(f"{rate:.2f}" for rate in row["rates"])
            gcs = "/".join(f"{row[column]:.2f}" for column in ("gcs_workflow", "gcs_activities", "gcs_elsewhere"))
            print(f"{row['system']:<{width}}{row['n']:>6}{row['rate']:>9.2f}{row['rate'] / floor_rate:>8.2f}x"
                  f"{row['p50']:>12.0f}{row['p95']:>12.0f}{row['unfinished']:>12}{row['server_ms']:>15.0f}"
                  f"{row['worker_ms']:>15.0f}{row['workflow_ms']:>17.1f}{row['activities_ms']:>19.1f}{row['gc_ms']:>11.2f}{row['full_gc_ms']:>16.2f}{gcs:>21}"
                  f"{row['rss']:>9.0f}{queries:>14}   {each}", flush=True)
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
    parser.add_argument("--record-floor", action="store_true",
                        help="also the floor recording what an agent run records besides its calls")
    parser.add_argument("--without", metavar="PARTS", default="",
                        help=f"also agentloop with these parts switched off ({','.join(PARTS)}): an upper bound "
                             "of what removing them would buy, not a mode of agentloop")
    parser.add_argument("--sustained", type=float, metavar="SECONDS",
                        help="keep N runs in flight and measure a window of this many seconds")
    parser.add_argument("--gc-threshold", metavar="G0,G1,G2",
                        help="gc.set_threshold for this process, so for both systems (see AGENTLOOP_GC_THRESHOLD)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds to wait for a burst")
    parser.add_argument("--no-floor", action="store_true", help="agentloop only (e.g. under a profiler)")
    args = parser.parse_args()
    for flag, given in (("--unsandboxed-floor", args.unsandboxed_floor), ("--record-floor", args.record_floor)):
        if args.no_floor and given:
            parser.error(f"{flag} is a floor: it cannot go with --no-floor")
    if args.sustained is not None and args.sustained <= 0:
        parser.error(f"--sustained must be a positive number of seconds, not {args.sustained:g}")
    try:
        without = parts_of(args.without)
    except ValueError as exc:
        parser.error(f"--without: {exc}")
    if args.reps < 1:
        parser.error(f"--reps must be at least 1, not {args.reps}")
    if args.gc_threshold:
        try:
            gc.set_threshold(*(int(part) for part in args.gc_threshold.split(",")))
        except (TypeError, ValueError):
            parser.error("--gc-threshold takes up to three whole numbers, e.g. 50000,20,100, "
                         f"not {args.gc_threshold!r}")
        print(f"gc thresholds {gc.get_threshold()} for both systems")
    MODEL_SECONDS[0] = args.model_ms / 1000
    agent_runs.STEPS = args.steps
    agent_runs.ANSWERS = answers(args.steps)
    asyncio.run(main([int(n) for n in args.runs.split(",")], not args.no_deltas, args.timeout, not args.no_floor,
                     args.reps, args.local_tools, args.unsandboxed_floor, args.sustained, without, args.record_floor))
