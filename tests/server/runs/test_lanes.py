"""Provider lanes on the real dev server: model calls go to their lane's
queue, the server paces a lane by its rate limit, and a run tells of the
time its steps waited there."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio.api.enums.v1 import EventType, TaskQueueType
from temporalio.api.taskqueue.v1 import RateLimit
from temporalio.api.workflowservice.v1 import UpdateTaskQueueConfigRequest
from temporalio.client import Client, WorkflowHistory

from agentloop import AgentClient, AgentSpec
from agentloop.testing import reply, script
from tests.helpers.runs import scheduled_queues, task_failures

#: The lane's limit in the pacing test, and how many runs share it.
RPS, RUNS = 2.0, 8


async def set_rate_limit(client: Client, queue: str, rps: float) -> None:
    """The queue's rate limit for the whole fleet, as `temporal task-queue config set --queue-rps-limit` sets it."""
    await client.workflow_service.update_task_queue_config(UpdateTaskQueueConfigRequest(
        namespace=client.namespace, identity="test", task_queue=queue,
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
        update_queue_rate_limit=UpdateTaskQueueConfigRequest.RateLimitUpdate(
            rate_limit=RateLimit(requests_per_second=rps), reason="test")))


def call_model_starts(history: WorkflowHistory) -> list[float]:
    """When each ``call_model`` attempt of the run started (server time, seconds)."""
    scheduled = {e.event_id for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
                 and e.activity_task_scheduled_event_attributes.activity_type.name == "call_model"}
    return [e.event_time.ToDatetime().timestamp() for e in history.events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
            and e.activity_task_started_event_attributes.scheduled_event_id in scheduled]


async def test_a_lanes_rate_limit_paces_the_model_calls_of_every_run(
    temporal_client: Client, agent_client: AgentClient, task_queue: str, worker: Any
) -> None:
    lane = f"{task_queue}-llm-scripted"
    await set_rate_limit(temporal_client, lane, RPS)
    model = script(reply("done"))
    async with worker():
        handles = await asyncio.gather(*(agent_client.start(AgentSpec(model=model), f"run {i}")
                                         for i in range(RUNS)))
        results = await asyncio.gather(*(h.result() for h in handles))
        events = [[e async for e in h.events()] for h in handles]
    assert [r.status for r in results] == ["completed"] * RUNS
    histories = [await h.workflow_handle.fetch_history() for h in handles]
    assert all(not task_failures(h) for h in histories)
    assert all(scheduled_queues(h) == [("call_model", lane)] for h in histories)
    starts = sorted(t for h in histories for t in call_model_starts(h))
    assert len(starts) == RUNS
    # Unpaced, all would start within a moment. The server let them start
    # at about RPS a second after a first burst (of at most 2 x RPS): the
    # rest came later, spread over (RUNS - 2 x RPS) / RPS seconds or more.
    burst = sum(1 for t in starts if t < starts[0] + 1)
    assert burst <= 2 * RPS, starts
    assert starts[-1] - starts[0] >= (RUNS - 2 * RPS) / RPS, starts
    # The runs that waited say so, in their report and their step's event.
    reports = [r.report for r in results]
    waited = [rep for rep in reports if rep.lane_waits]
    assert len(waited) >= RUNS - 2 * RPS
    for report in waited:
        step = report.steps[0]
        assert step.lane == "scripted" and step.lane_wait_ms >= 100
        assert report.total_lane_wait_ms == step.lane_wait_ms
    completed = [e for e in events[reports.index(waited[-1])] if e.type == "thread.message.completed"]
    assert completed[0].lane == "scripted" and completed[0].lane_wait_ms == waited[-1].steps[0].lane_wait_ms


async def test_a_spec_picks_its_lane_or_none(
    temporal_client: Client, agent_client: AgentClient, task_queue: str, worker: Any
) -> None:
    model = script(reply("done"))
    async with worker(lanes=["scripted", "eu-proxy"]):
        own = await agent_client.start(AgentSpec(model=model, lane="eu-proxy"), "go")
        none = await agent_client.start(AgentSpec(model=model, lane=""), "go")
        assert (await own.result()).status == "completed" and (await none.result()).status == "completed"
    assert scheduled_queues(await own.workflow_handle.fetch_history()) == [("call_model", f"{task_queue}-llm-eu-proxy")]
    assert scheduled_queues(await none.workflow_handle.fetch_history()) == [("call_model", task_queue)]
