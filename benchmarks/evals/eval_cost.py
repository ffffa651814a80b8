"""What an eval costs against running its runs: N recorded 5-step runs
(a scripted model; four tool calls and an answer each), then an eval of the
same spec against them with tools answered from the recording, at the same
concurrency, on one dev server and one in-process worker.

Prints the wall time of the N runs and of the eval (the case runs, the
checks and the report; reading the cases is timed apart, both as
``cases_from_runs`` reads them (a completed run from its history's input and
result) and with the ``export`` query of each run, the way it read them
before, ten at a time), their ratio, the history each case adds (the eval workflow's own
history per case, and a case run's history against its recorded run's),
the pass rate (which must be 100%: an unchanged spec passes every case; the
benchmark exits 1 otherwise) and the tool executions during the eval (must
be 0). With ``--reps`` > 1 the runs and the eval alternate, and the median
of each is taken.

Usage::

    python -m benchmarks.evals.eval_cost [--runs 100] [--concurrency 10] [--reps 1]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid

from temporalio.client import Client

from agentloop import AgentClient, AgentSpec
from agentloop.client.evals import cases_from_runs, start_eval
from agentloop.shared.evals.cases import EvalCase, case_from_snapshot
from agentloop.shared.evals.report import EvalReport
from agentloop.testing import call, calls, register_scripted_model, reply, step_of
from agentloop.tools.registry import ToolRegistry
from agentloop.workers.devserver import DevServer
from agentloop.workers.worker import build_worker, connect

STEPS = 5
EXECUTIONS = {"measure": 0}


def _answer(request):
    step = step_of(request)
    if step < STEPS - 1:
        return calls(call("measure", {"part": step}))
    question = next(m.text for m in request.messages if m.role == "user")
    return reply(f"measured {question}")


async def _history_bytes(client: Client, workflow_id: str) -> int:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return sum(e.ByteSize() for e in history.events)


async def _runs(agents: AgentClient, spec: AgentSpec, count: int, concurrency: int) -> tuple[float, list[str]]:
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int) -> str:
        async with gate:
            return (await agents.run(spec, f"part {i}")).run_id

    started = time.perf_counter()
    ids = await asyncio.gather(*(one(i) for i in range(count)))
    return time.perf_counter() - started, list(ids)


async def _export_all(agents: AgentClient, ids: list[str], at_once: int = 10) -> list[EvalCase]:
    """The cases as read before: the ``export`` query of each run (a worker replays it)."""
    gate = asyncio.Semaphore(at_once)

    async def one(run_id: str) -> EvalCase:
        async with gate:
            return case_from_snapshot(await agents.get_handle(run_id).export())

    return list(await asyncio.gather(*(one(run_id) for run_id in ids)))


async def main(count: int, concurrency: int, reps: int) -> int:
    registry = ToolRegistry()

    @registry.tool(read_only=True)
    async def measure(part: int) -> str:
        """Measure one part."""
        EXECUTIONS["measure"] += 1
        return f"part {part}: " + "x" * 200

    register_scripted_model("eval-cost", [_answer] * STEPS)
    spec = AgentSpec(model="scripted:eval-cost", tools=["measure"], default_permission="allow")
    with DevServer() as server:
        await server.wait_ready()
        client = await connect(server.address)
        queue = f"eval-cost-{uuid.uuid4().hex[:8]}"
        agents = AgentClient(client, task_queue=queue)
        run_times, eval_times, read_times, export_times = [], [], [], []
        report: EvalReport | None = None
        async with build_worker(client, task_queue=queue, registry=registry):
            await _runs(agents, spec, min(concurrency, count), concurrency)  # warm up
            for _ in range(reps):
                seconds, ids = await _runs(agents, spec, count, concurrency)
                run_times.append(seconds)
                started = time.perf_counter()
                exported = await _export_all(agents, ids)
                export_times.append(time.perf_counter() - started)
                started = time.perf_counter()
                cases = await cases_from_runs(agents, ids)
                read_times.append(time.perf_counter() - started)
                if cases != exported:
                    print("FAILED: the cases read from histories differ from the exported ones", file=sys.stderr)
                    return 1
                before = EXECUTIONS["measure"]
                started = time.perf_counter()
                handle = await start_eval(agents, cases, concurrency=concurrency)
                report = await handle.result()
                eval_times.append(time.perf_counter() - started)
                executed = EXECUTIONS["measure"] - before
            assert report is not None
            eval_bytes = await _history_bytes(client, handle.id)
            sample = report.cases[: min(10, len(report.cases))]
            case_bytes = [await _history_bytes(client, o.run_id) for o in sample]
            recorded_bytes = [await _history_bytes(client, o.recorded_run_id or "") for o in sample]
    runs_s, eval_s = statistics.median(run_times), statistics.median(eval_times)
    read_s, export_s = statistics.median(read_times), statistics.median(export_times)
    extra_case = statistics.mean(c - r for c, r in zip(case_bytes, recorded_bytes, strict=True))
    print(f"{count} runs of {STEPS} steps at concurrency {concurrency}, {reps} rep(s), medians:")
    print(f"  runs themselves         {runs_s:8.2f} s")
    print(f"  eval (recorded tools)   {eval_s:8.2f} s   ratio eval/runs {eval_s / runs_s:.2f}x")
    print(f"  reading the cases       {read_s:8.2f} s   (cases_from_runs)   with it: {(eval_s + read_s) / runs_s:.2f}x")
    print(f"  ... by export queries   {export_s:8.2f} s   (as before)         with it: "
          f"{(eval_s + export_s) / runs_s:.2f}x")
    print(f"  eval workflow history   {eval_bytes / count / 1024:8.2f} KiB per case ({eval_bytes / 1024:.1f} KiB)")
    case_kib, recorded_kib = statistics.mean(case_bytes) / 1024, statistics.mean(recorded_bytes) / 1024
    print(f"  case run vs recorded    {extra_case / 1024:+8.2f} KiB per case "
          f"(case run {case_kib:.1f} KiB, recorded {recorded_kib:.1f})")
    print(f"  pass rate               {report.totals.pass_rate:8.0%}   tool executions during the eval: {executed}")
    ok = report.totals.pass_rate == 1.0 and executed == 0
    if not ok:
        print("FAILED: an unchanged spec must pass every case with no tool executed", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100, help="recorded runs, and cases (default: 100)")
    parser.add_argument("--concurrency", type=int, default=10, help="runs (and case runs) at once (default: 10)")
    parser.add_argument("--reps", type=int, default=1, help="repetitions; medians are printed (default: 1)")
    options = parser.parse_args()
    sys.exit(asyncio.run(main(options.runs, options.concurrency, options.reps)))
