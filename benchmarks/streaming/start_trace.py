"""Where a run's start goes, from its history: the milliseconds from the
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
from collections.abc import Iterable
from typing import Any

from temporalio.api.enums.v1 import EventType

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
    return f"{label:<28}" + "".join(cells) + f"   before it: {' | '.join(sorted(befores)) or 'nothing'}"


#: The marks' column heads.
HEADS = ("started", "wft sch", "wft pick", "wft done", "act sch", "act run", "ran")


def header() -> str:
    return f"{'ms after start()':<28}" + "".join(f"{h:>8}" for h in HEADS)
