"""How runs come through two faults, on an embedded dev server of their own.

``outage``: N runs each start one tool call; while all N calls run, the
Temporal server stops; the calls complete while it is down (their workers
cannot report it); after ``--seconds`` the server starts again on the same
port and SQLite file. Prints how many calls ran again.

``kill``: a run's worker subprocess (``agentloop worker --import
tests.helpers.fixtures.crash_fixture``) is SIGKILLed in the middle of an LLM step, another
worker is started (heartbeat timeout 3 s). Prints, per trial, which attempt
of the step completed, how often the model was called, and the seconds from
the kill to the run's end. Usage::

    python -m benchmarks.durability.fault_recovery outage [--runs 9] [--seconds 40]
    python -m benchmarks.durability.fault_recovery kill [--trials 8]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter

from agentloop import AgentClient, AgentSpec, ToolContext
from agentloop.testing import call, calls, register_scripted_model, reply
from agentloop.tools.registry import ToolRegistry
from agentloop.workers.devserver import DevServer
from agentloop.workers.worker import build_worker, connect

ROOT = Path(__file__).resolve().parents[2]


def attempts_of(history, activity_type: str) -> list[int]:
    scheduled = {
        e.event_id: e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    return [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        and scheduled[e.activity_task_started_event_attributes.scheduled_event_id] == activity_type
    ]


async def outage(runs: int, seconds: float) -> None:
    executions: dict[str, int] = {}
    started = asyncio.Event()
    release = asyncio.Event()
    registry = ToolRegistry()

    @registry.tool
    async def effect(ctx: ToolContext) -> str:
        """A side effect that should happen once."""
        executions[ctx.run_id] = executions.get(ctx.run_id, 0) + 1
        if sum(executions.values()) >= runs:
            started.set()
        await release.wait()
        return "done"

    register_scripted_model("outage", [calls(call("effect")), reply("finished")])
    with tempfile.TemporaryDirectory() as tmp:
        server = DevServer(db_file=Path(tmp) / "temporal.db", log_file=Path(tmp) / "server.log")
        server.start()
        try:
            await server.wait_ready()
            # The worker warns at every failed call while the server is down.
            quiet = Runtime(telemetry=TelemetryConfig(logging=LoggingConfig(
                filter=TelemetryFilter(core_level="ERROR", other_level="ERROR"))))
            client = await Client.connect(server.address, runtime=quiet, data_converter=pydantic_data_converter)
            queue = f"outage-{uuid.uuid4().hex[:8]}"
            spec = AgentSpec(model="scripted:outage", tools=["effect"], default_permission="allow")
            async with build_worker(client, task_queue=queue, registry=registry, workspace=tmp):
                agents = AgentClient(client, task_queue=queue)
                handles = [await agents.start(spec, "go") for _ in range(runs)]
                await started.wait()
                server.stop()
                release.set()
                await asyncio.sleep(seconds)
                server.start()
                results = [await asyncio.wait_for(h.result(), 300) for h in handles]
                histories = [await h.workflow_handle.fetch_history() for h in handles]
        finally:
            server.stop()
    again = sum(1 for n in executions.values() if n > 1)
    retried = sum(1 for h in histories if max(attempts_of(h, "execute_tool")) > 1)
    replayed = sum(1 for r in results if "replayed_from_attempt" in r.report.steps[0].tool_calls[0].metrics)
    completed = sum(1 for r in results if r.status == "completed")
    print(f"server down {seconds:g}s (heartbeat timeout {spec.heartbeat_timeout_seconds:g}s) "
          f"while {runs} tool calls completed")
    print(f"runs completed: {completed} of {runs}; calls retried by Temporal: {retried} of {runs}")
    print(f"calls run again: {again} of {runs}; retries answered from the worker's ledger: {replayed}")


def spawn(server: DevServer, queue: str, log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, TEMPORAL_ADDRESS=server.address, AGENTLOOP_TASK_QUEUE=queue)
    return subprocess.Popen(
        [sys.executable, "-m", "agentloop.cli", "worker", "--import", "tests.helpers.fixtures.crash_fixture"],
        cwd=ROOT, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT,
    )


async def kill(trials: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, DevServer() as server:
        await server.wait_ready()
        client = await connect(server.address)
        print("trial  attempt that completed  model calls  seconds from kill to end")
        for trial in range(trials):
            queue = f"kill-{uuid.uuid4().hex[:8]}"
            gate = Path(tmp) / queue
            gate.mkdir()
            log = gate / "worker.log"
            workers = [spawn(server, queue, log)]
            try:
                spec = AgentSpec(model="scripted:llm_kill", workspace=str(gate), heartbeat_timeout_seconds=3)
                handle = await AgentClient(client, task_queue=queue).start(spec, f"gate={gate}")
                calls_log = gate / "calls.log"
                while not (calls_log.exists() and "llm-start" in calls_log.read_text()):
                    if workers[0].poll() is not None:
                        raise SystemExit(f"the worker exited: see {log}")
                    await asyncio.sleep(0.05)
                workers[0].send_signal(signal.SIGKILL)
                workers[0].wait()
                killed = time.monotonic()
                (gate / "release").touch()
                workers.append(spawn(server, queue, log))
                await asyncio.wait_for(handle.result(), 120)
                seconds = time.monotonic() - killed
                history = await handle.workflow_handle.fetch_history()
            finally:
                for worker in workers:
                    if worker.poll() is None:
                        worker.kill()
                        worker.wait()
            (attempt,) = attempts_of(history, "call_model")
            model_calls = calls_log.read_text().count("llm-start")
            print(f"{trial + 1:5}  {attempt:22}  {model_calls:11}  {seconds:24.1f}", flush=True)


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="scenario", required=True)
    o = sub.add_parser("outage")
    o.add_argument("--runs", type=int, default=9)
    o.add_argument("--seconds", type=float, default=40.0)
    k = sub.add_parser("kill")
    k.add_argument("--trials", type=int, default=8)
    args = parser.parse_args()
    if args.scenario == "outage":
        asyncio.run(outage(args.runs, args.seconds))
    else:
        asyncio.run(kill(args.trials))


if __name__ == "__main__":
    cli()
