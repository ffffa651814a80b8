"""Watching a run on the server: waiting for its state or its end, and
reading its history."""

from __future__ import annotations

import json
from collections.abc import Callable

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle, WorkflowHistory

from agentloop.client.handle import AgentRunHandle
from agentloop.shared.runs.run import RunState
from tests.helpers.polling import eventually

_CLOSED = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
}


async def wait_state(
    handle: AgentRunHandle, predicate: Callable[[RunState], bool], what: str, timeout: float = 30.0
) -> RunState:
    """The run's state once ``predicate`` holds for it (a query before the
    first workflow task counts as not yet)."""

    async def check() -> RunState | None:
        state = await handle.state()
        return state if predicate(state) else None

    return await eventually(check, what, timeout, ignoring=(Exception,))


async def wait_status(handle: AgentRunHandle, status: str, timeout: float = 10.0) -> None:
    """Wait until the run's status is ``status``."""
    await wait_state(handle, lambda s: s.status == status, f"run {handle.run_id} to be {status}", timeout)


def task_failures(history: WorkflowHistory) -> list[str]:
    """The messages of the history's failed workflow tasks (there should be none)."""
    return [
        e.workflow_task_failed_event_attributes.failure.message[:300]
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    ]


async def wait_for_end(handle: WorkflowHandle, timeout: float = 60.0) -> WorkflowHistory:
    """The run's history once it has closed, or as soon as a workflow task
    failed (a run whose tasks fail would retry forever, never closing)."""

    async def ended() -> WorkflowHistory | None:
        history = await handle.fetch_history()
        return history if any(e.event_type in _CLOSED for e in history.events) or task_failures(history) else None

    return await eventually(ended, f"{handle.id} to end or fail a workflow task", timeout, interval=0.1)


def scheduled_queues(history: WorkflowHistory) -> list[tuple[str, str]]:
    """Each scheduled activity's type and task queue."""
    return [
        (e.activity_task_scheduled_event_attributes.activity_type.name,
         e.activity_task_scheduled_event_attributes.task_queue.name)
        for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]


def local_activities(history: WorkflowHistory) -> list[tuple[str, str | None]]:
    """Each local activity's type and failure type (None: it answered), from its marker."""
    found = []
    for e in history.events:
        marker = e.marker_recorded_event_attributes
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED and marker.marker_name == "core_local_activity":
            data = json.loads(marker.details["data"].payloads[0].data)
            failure = marker.failure.application_failure_info.type if marker.HasField("failure") else None
            found.append((data["activity_type"], failure))
    return found
