"""Runs as Temporal lists them: :class:`RunSummary`, the visibility query,
and the run-id-in-use refusal."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from agentloop.shared.base.contracts import WORKFLOW_NAME
from agentloop.shared.base.errors import UserError
from agentloop.shared.runs.report import LIVE_STATUSES
from agentloop.shared.runs.run import RunStatus
from agentloop.shared.runs.search_attributes import (
    AGENT_MODEL,
    AGENT_NAME,
    AGENT_PARENT_RUN,
    AGENT_PENDING_TOOLS,
    AGENT_ROOT_RUN,
    AGENT_STATUS,
    AGENT_TENANT,
)


class RunIdInUse(UserError):
    """A run with this id is running, or has ended and reusing its id was not
    allowed (``AgentClient.start(..., allow_reuse=True)``).

    Attributes:
        run_id: The id asked for.
        running: Whether the run with that id is still running.
        status: Its status (``running``, ``completed``, ``cancelled``...).
        closed_at: When it ended, if it has.
    """

    def __init__(self, run_id: str, *, running: bool, status: str, closed_at: datetime | None = None) -> None:
        self.run_id, self.running, self.status, self.closed_at = run_id, running, status, closed_at
        if running:
            message = f"run {run_id} is already running; choose another run id, or follow that run"
        else:
            message = (f"a run with id {run_id} has already ended ({status}); choose another run id, or "
                       "allow reusing it (allow_reuse=True) to start a new run under this id")
        super().__init__(message)



class RunSummary(BaseModel):
    """One run, as :meth:`AgentClient.list_runs` finds it.

    Attributes:
        run_id: The run id.
        status: The agent status the run last indexed (``AgentStatus``);
            for runs that ended without indexing it, derived from Temporal's.
        agent_name: ``AgentSpec.name``.
        model: ``AgentSpec.model``.
        pending_tools: Tools whose calls wait for approval or outputs.
        started_at: When the run started.
        closed_at: When it ended, if it has.
        parent_run_id: For a sub-agent's run, the run that delegated to it.
        root_run_id: For a sub-agent's run, the top run of its tree.
        tenant: The run's tenant (``AgentTenant``), if it has one.
    """

    run_id: str
    status: RunStatus | str
    agent_name: str = ""
    model: str = ""
    pending_tools: list[str] = Field(default_factory=list)
    started_at: datetime | None = None
    closed_at: datetime | None = None
    parent_run_id: str | None = None
    root_run_id: str | None = None
    tenant: str | None = None


_TEMPORAL_STATUS: dict[Any, str] = {
    WorkflowExecutionStatus.RUNNING: "running",
    WorkflowExecutionStatus.COMPLETED: "completed",
    WorkflowExecutionStatus.FAILED: "failed",
    WorkflowExecutionStatus.CANCELED: "cancelled",
    WorkflowExecutionStatus.TERMINATED: "terminated",
    WorkflowExecutionStatus.TIMED_OUT: "timed_out",
    WorkflowExecutionStatus.CONTINUED_AS_NEW: "continued",
}


def runs_query(status: str | None = None, name: str | None = None, extra: str | None = None) -> str:
    """The visibility query :meth:`AgentClient.list_runs` sends (also what
    to type into ``temporal workflow list --query``)."""
    # A run that continued as new is listed once, as its latest Temporal run.
    clauses = [f'WorkflowType="{WORKFLOW_NAME}"', 'ExecutionStatus!="ContinuedAsNew"']
    if status:
        clauses.append(f'{AGENT_STATUS.name}="{status}"')
        if status in LIVE_STATUSES:
            # A terminated run cannot update its status: trust Temporal's.
            clauses.append('ExecutionStatus="Running"')
    if name:
        clauses.append(f'{AGENT_NAME.name}="{name}"')
    if extra:
        clauses.append(f"({extra})")
    return " AND ".join(clauses)


def summary_of(execution: Any) -> RunSummary:
    """A listed Temporal run as a :class:`RunSummary`."""
    attrs = execution.typed_search_attributes
    indexed = attrs.get(AGENT_STATUS)
    temporal_status = _TEMPORAL_STATUS.get(execution.status, "unknown")
    if execution.status != WorkflowExecutionStatus.RUNNING and indexed in (None, *LIVE_STATUSES):
        indexed = temporal_status  # ended without indexing it (terminated, timed out)
    return RunSummary(
        run_id=execution.id,
        status=indexed or temporal_status,
        agent_name=attrs.get(AGENT_NAME) or "",
        model=attrs.get(AGENT_MODEL) or "",
        pending_tools=list(attrs.get(AGENT_PENDING_TOOLS) or []),
        started_at=execution.start_time,
        closed_at=execution.close_time,
        parent_run_id=attrs.get(AGENT_PARENT_RUN),
        root_run_id=attrs.get(AGENT_ROOT_RUN),
        tenant=attrs.get(AGENT_TENANT),
    )


async def id_in_use(temporal: Client, run_id: str) -> RunIdInUse:
    """Why a run could not start under ``run_id``: one runs, or has ended."""
    try:
        description = await temporal.get_workflow_handle(run_id).describe()
    except RPCError:  # gone meanwhile, or not ours to describe
        return RunIdInUse(run_id, running=True, status="running")
    if description.status == WorkflowExecutionStatus.RUNNING:
        return RunIdInUse(run_id, running=True, status="running")
    indexed = description.typed_search_attributes.get(AGENT_STATUS)
    if indexed is None or indexed in LIVE_STATUSES:
        status = _TEMPORAL_STATUS.get(description.status, "ended")
    else:
        status = indexed
    return RunIdInUse(run_id, running=False, status=status, closed_at=description.close_time)
