"""The floor (a bare workflow's start to its one activity running, with
that activity on the workflow's queue or on another), and where a run's
start goes, from its history: the milliseconds from the
client's ``start`` call to each step of the path to its first activity (the
workflow started, its first workflow task scheduled, picked up and
completed, the activity scheduled and started), and what the workflow did
before it scheduled that activity (other activities, local activities,
markers, search-attribute upserts, workflow tasks). For
``benchmarks.streaming.first_token --trace``: an agentloop run's path to
``call_model`` beside the floor's to its one activity.

Temporal writes an activity's started event when the attempt ends, with the
time it started; the worker's own mark (the floor's activity, agentloop's
first delta) says when the activity's code ran.
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

#: The marks, in path order.
MARKS = ("started", "wft scheduled", "wft picked", "wft done", "act scheduled", "act started")
_NAMES = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: "activity",
    EventType.EVENT_TYPE_MARKER_RECORDED: "marker",
    EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES: "upsert",
    EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED: "memo",
    EventType.EVENT_TYPE_TIMER_STARTED: "timer",
    EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED: "wft",
}


# ---------------------------------------------------------------- the floor


@activity.defn(name="bench-first-token-mark")
async def mark() -> float:
    return time.time()


@workflow.defn(name="bench-first-token-floor")
class Floor:
    @workflow.run
    async def run(self) -> float:
        return await workflow.execute_activity(mark, start_to_close_timeout=timedelta(seconds=30))


@workflow.defn(name="bench-first-token-floor-apart")
class FloorApart:
    """The floor with its activity on a queue of its own, as agentloop's model calls are on their lane's."""

    @workflow.run
    async def run(self, queue: str) -> float:
        return await workflow.execute_activity(mark, task_queue=queue, start_to_close_timeout=timedelta(seconds=30))


async def floor_run(client: Client, queue: str, apart: str | None = None,
                    traces: list[Any] | None = None) -> float:
    began, workflow_id = time.time(), f"floor-{uuid.uuid4().hex}"
    if apart is None:
        ran = await client.execute_workflow(Floor.run, id=workflow_id, task_queue=queue)
    else:
        ran = await client.execute_workflow(FloorApart.run, apart, id=workflow_id, task_queue=queue)
    if traces is not None:
        events = (await client.get_workflow_handle(workflow_id).fetch_history()).events
        traces.append(trace(events, began, "bench-first-token-mark"))
    return (ran - began) * 1000


# ---------------------------------------------------------------- the trace


def _ms(event: Any, began: float) -> float:
    return (event.event_time.ToDatetime().timestamp() - began) * 1000


def trace(events: Iterable[Any], began: float, activity: str) -> tuple[dict[str, float], list[str]]:
    """The marks (ms after ``began``, the client's time before ``start``) of
    the path to the first activity named ``activity``, and the commands the
    workflow recorded before scheduling it (``activity <name>``, ``marker
    <name>``, ``upsert``, ``wft``...)."""
    marks: dict[str, float] = {}
    before: list[str] = []
    scheduled_id = None
    for event in events:
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            marks["started"] = _ms(event, began)
        elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
            marks.setdefault("wft scheduled", _ms(event, began))
        elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
            marks.setdefault("wft picked", _ms(event, began))
        elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED and "wft done" not in marks:
            marks["wft done"] = _ms(event, began)
        if (kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED and scheduled_id is None
                and event.activity_task_scheduled_event_attributes.activity_type.name == activity):
            scheduled_id, marks["act scheduled"] = event.event_id, _ms(event, began)
        elif (kind == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED and scheduled_id is not None
              and event.activity_task_started_event_attributes.scheduled_event_id == scheduled_id):
            marks["act started"] = _ms(event, began)
            break
        elif scheduled_id is None and kind in _NAMES:
            before.append(_what(event, kind))
    return marks, before


def _what(event: Any, kind: Any) -> str:
    if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
        return f"activity {event.activity_task_scheduled_event_attributes.activity_type.name}"
    if kind == EventType.EVENT_TYPE_MARKER_RECORDED:
        return f"marker {event.marker_recorded_event_attributes.marker_name}"
    return _NAMES[kind]


def report(label: str, traces: list[tuple[dict[str, float], list[str]]], ran: list[float]) -> str:
    """One line: the median of each mark over ``traces``, then ``ran`` (the
    activity's code running, by its own clock), and what came before."""
    cells = []
    for mark in MARKS:
        values = [t[mark] for t, _ in traces if mark in t]
        cells.append(f"{statistics.median(values):>8.1f}" if values else f"{'n/a':>8}")
    cells.append(f"{statistics.median(ran):>8.1f}" if ran else f"{'n/a':>8}")
    befores = {", ".join(b) for _, b in traces}
    return f"{label:<34}" + "".join(cells) + f"   before it: {' | '.join(sorted(befores)) or 'nothing'}"


#: The marks' column heads.
HEADS = ("started", "wft sch", "wft pick", "wft done", "act sch", "act run", "ran")


def header() -> str:
    return f"{'ms after start()':<34}" + "".join(f"{h:>8}" for h in HEADS)
