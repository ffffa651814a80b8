"""What one agent step costs on the embedded dev server, against Temporal's floor.

Runs, on one local dev server (fast polling: transfer/timer MaxPollRPS=1000):

* floor: a bare workflow that runs 2*N sequential no-op activities;
* agentloop: an N-step run with a scripted model, one trivial tool call per
  step (so 2*N activities too: N LLM steps and N tool calls), with its
  deltas streamed (the default: one signal per step here) and without.

Prints ms per activity for both and their ratio. Usage::

    python -m benchmarks.loop.step_overhead [--steps 25] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from datetime import timedelta

from temporalio import activity, workflow

from agentloop import AgentClient, AgentSpec
from agentloop.testing import call, calls, register_scripted_model, reply
from agentloop.tools.registry import ToolRegistry
from agentloop.workers.devserver import DevServer
from agentloop.workers.worker import build_worker, connect


@activity.defn(name="bench_noop")
async def noop(i: int) -> int:
    return i


@workflow.defn(name="BenchFloorWorkflow")
class FloorWorkflow:
    @workflow.run
    async def run(self, n: int) -> int:
        for i in range(n):
            await workflow.execute_activity(noop, i, start_to_close_timeout=timedelta(seconds=10))
        return n


async def main(steps: int, repeat: int) -> None:
    registry = ToolRegistry()

    @registry.tool
    def ping() -> str:
        """Pong."""
        return "pong"

    register_scripted_model("bench", [calls(call("ping")) for _ in range(steps - 1)] + [reply("done")])
    with DevServer() as server:
        await server.wait_ready()
        client = await connect(server.address)
        queue = f"bench-{uuid.uuid4().hex[:8]}"
        from temporalio.worker import Worker

        floor_worker = Worker(client, task_queue=queue + "-floor", workflows=[FloorWorkflow], activities=[noop])
        agent_worker = build_worker(client, task_queue=queue, registry=registry)
        agents = AgentClient(client, task_queue=queue)
        spec = AgentSpec(model="scripted:bench", tools=["ping"], max_steps=steps + 1,
                         default_permission="allow")
        quiet = spec.model_copy(update={"stream_deltas": False})
        floor_ms, agent_ms, quiet_ms = [], [], []
        async with floor_worker, agent_worker:
            # Warm up both paths once.
            await client.execute_workflow(FloorWorkflow.run, 2, id=f"w-{uuid.uuid4()}", task_queue=queue + "-floor")
            await agents.run(spec, "warm up")
            for _ in range(repeat):
                t = time.perf_counter()
                await client.execute_workflow(
                    FloorWorkflow.run, 2 * steps, id=f"f-{uuid.uuid4()}", task_queue=queue + "-floor"
                )
                floor_ms.append((time.perf_counter() - t) * 1000 / (2 * steps))
                t = time.perf_counter()
                result = await agents.run(spec, "go")
                agent_ms.append((time.perf_counter() - t) * 1000 / (2 * steps))
                assert result.report.step_count == steps
                t = time.perf_counter()
                await agents.run(quiet, "go")
                quiet_ms.append((time.perf_counter() - t) * 1000 / (2 * steps))
    floor, agent, no_deltas = statistics.median(floor_ms), statistics.median(agent_ms), statistics.median(quiet_ms)
    print(f"dev server: fast polling (transfer/timer MaxPollRPS=1000); {steps} steps, {repeat} repeats")
    print(f"floor (bare workflow, no-op activities): {floor:6.1f} ms per activity")
    print(f"agentloop (LLM step + tool call):        {agent:6.1f} ms per activity")
    print(f"ratio agentloop / floor:                 {agent / floor:6.2f}x")
    print(f"agentloop per step (LLM + tool):         {2 * agent:6.1f} ms")
    print(f"same, stream_deltas=False:               {no_deltas:6.1f} ms per activity "
          f"({no_deltas / floor:.2f}x floor, {2 * no_deltas:.1f} ms per step)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.steps, args.repeat))
