"""Where a workflow's time went, from its history: the waits of its workflow
tasks in their queue, of its activities in theirs (by task queue), and the
time workers spent on them. For the fleet benchmarks, to tell a lane's wait
from a run queue's.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

from temporalio.api.enums.v1 import EventType, TaskQueueKind
from temporalio.client import Client


def _seconds(event: object) -> float:
    return event.event_time.ToDatetime().timestamp()  # type: ignore[attr-defined, no-any-return]


async def breakdown(client: Client, workflow_id: str) -> dict[str, float]:
    """Seconds, summed over the workflow's history: ``wft wait`` (workflow task
    scheduled to started; also split into ``wft wait run``, on the run's
    queue, and ``wft wait sticky``, on a worker's sticky queue), ``wft work`` (started to completed), ``wait <queue>``
    (activity scheduled to its last attempt's start, by task queue; retries'
    backoff included), ``work <queue>`` (last attempt's start to its end), and
    ``span`` (execution started to closed)."""
    sums: dict[str, float] = defaultdict(float)
    times: dict[int, float] = {}
    queues: dict[int, str] = {}
    first = last = None
    async for event in client.get_workflow_handle(workflow_id).fetch_history_events():
        t, kind = _seconds(event), event.event_type
        first = t if first is None else first
        last = t
        times[event.event_id] = t
        if kind == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
            kind_of_queue = event.workflow_task_scheduled_event_attributes.task_queue.kind
            sticky = kind_of_queue == TaskQueueKind.TASK_QUEUE_KIND_STICKY
            queues[event.event_id] = "sticky" if sticky else "run"
        elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
            scheduled = event.workflow_task_started_event_attributes.scheduled_event_id
            sums["wft wait"] += t - times[scheduled]
            sums[f"wft wait {queues.get(scheduled, 'run')}"] += t - times[scheduled]
        elif kind in (EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
                      EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT):
            attrs = (event.workflow_task_completed_event_attributes
                     if kind == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED else None)
            if attrs is not None:
                sums["wft work"] += t - times[attrs.started_event_id]
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            queues[event.event_id] = event.activity_task_scheduled_event_attributes.task_queue.name
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            scheduled = event.activity_task_started_event_attributes.scheduled_event_id
            sums[f"wait {queues[scheduled]}"] += t - times[scheduled]
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            attrs = event.activity_task_completed_event_attributes
            sums[f"work {queues[attrs.scheduled_event_id]}"] += t - times[attrs.started_event_id]
    sums["span"] = (last or 0.0) - (first or 0.0)
    return dict(sums)


async def median_breakdown(client: Client, workflow_ids: list[str], queue: str) -> dict[str, float]:
    """The median of each part over ``workflow_ids``, queue names shortened:
    ``queue`` itself reads ``run``, ``<queue>-llm-openai`` reads ``lane``."""
    parts = await asyncio.gather(*(breakdown(client, wid) for wid in workflow_ids))
    by_key: dict[str, list[float]] = defaultdict(list)
    for part in parts:
        for key, value in part.items():
            key = key.replace(f"{queue}-llm-openai", "lane").replace(f"{queue}-lane", "lane").replace(queue, "run")
            by_key[key].append(value)
    return {key: round(sorted(v)[len(v) // 2], 3) for key, v in sorted(by_key.items())}
