"""The bare-Temporal floors the benchmarks compare agentloop against.

Kept in a module of its own with no agentloop imports, and passed through
the workflow sandbox (as agentloop passes through its own package), so a
floor run costs what Temporal itself costs.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from datetime import timedelta

from temporalio import activity, workflow

#: When each run's model calls started, by workflow id.
MODEL_CALLS: dict[str, list[float]] = defaultdict(list)

#: How long a floor model call takes (set by the benchmark).
MODEL_SECONDS = [0.3]


@activity.defn(name="bench_model")
async def floor_model(step: int) -> str:
    MODEL_CALLS[activity.info().workflow_id].append(time.monotonic())
    await asyncio.sleep(MODEL_SECONDS[0])
    return f"call {step}"


@activity.defn(name="bench_tool")
async def floor_tool(text: str) -> str:
    return text


@workflow.defn(name="BenchConcurrencyFloor")
class AgentShapedFloor:
    """What an agent run does, with plain activities: ``steps`` times a model
    call then a tool call, then a last model call.

    Its activities have an agent run's heartbeat timeout (30 s, so a lost
    worker is noticed as soon as agentloop notices it). The server sets a
    timer for it when an activity starts, fired and dropped 30 s later: a
    floor whose first timer came at 60 s would leave that work until after
    a burst of 1,000 runs (about a minute) that agentloop's runs pay inside it.
    """

    @workflow.run
    async def run(self, steps: int) -> str:
        options = dict(start_to_close_timeout=timedelta(seconds=60), heartbeat_timeout=timedelta(seconds=30))
        for step in range(steps):
            text = await workflow.execute_activity(floor_model, step, **options)
            await workflow.execute_activity(floor_tool, text, **options)
        return await workflow.execute_activity(floor_model, steps, **options)


@workflow.defn(name="BenchConcurrencyFloorUnsandboxed", sandboxed=False)
class UnsandboxedFloor(AgentShapedFloor):
    """:class:`AgentShapedFloor` outside Temporal's workflow sandbox, as
    agentloop's own workflow runs by default (README "Where a worker's time
    goes"): the floor of agentloop's code alone, without the sandbox's cost
    that the plain floor pays and agentloop does not."""

    @workflow.run
    async def run(self, steps: int) -> str:
        return await super().run(steps)


@workflow.defn(name="BenchConcurrencyFloorLocalTool")
class LocalToolFloor:
    """:class:`AgentShapedFloor` with its tool call a local activity (the
    model call stays an activity task): the floor of agent runs whose tool
    is registered ``local=True``."""

    @workflow.run
    async def run(self, steps: int) -> str:
        options = dict(start_to_close_timeout=timedelta(seconds=60), heartbeat_timeout=timedelta(seconds=30))
        for step in range(steps):
            text = await workflow.execute_activity(floor_model, step, **options)
            await workflow.execute_local_activity(floor_tool, text, start_to_close_timeout=timedelta(seconds=60))
        return await workflow.execute_activity(floor_model, steps, **options)
