"""What every request handler shares, and who may call it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from fastapi import Depends, Request
from temporalio.client import WorkflowExecutionStatus, WorkflowQueryFailedError
from temporalio.service import RPCError, RPCStatusCode

from agentloop.server.auth import Caller, authorize
from agentloop.server.hub import RunHub
from agentloop.server.problems import Problem
from agentloop.server.settings import ServerSettings
from agentloop.shared.spec import AgentSpec

if TYPE_CHECKING:
    from agentloop.client.agent_client import AgentClient, AgentRunHandle

T = TypeVar("T")


@dataclass
class ServerState:
    """What every request handler shares."""

    client: AgentClient
    settings: ServerSettings
    hub: RunHub


def server_state(request: Request) -> ServerState:
    return request.app.state.agentloop


def reader(request: Request) -> Caller:
    """A caller allowed to read (scope ``read`` or ``act``)."""
    return authorize(server_state(request).settings, request, "read")


def actor(request: Request) -> Caller:
    """A caller allowed to act (scope ``act``)."""
    return authorize(server_state(request).settings, request, "act")


Reader = Depends(reader)
Actor = Depends(actor)
State = Depends(server_state)


def resolve_spec(state: ServerState, spec: AgentSpec | str) -> AgentSpec:
    """The spec a request names: inline, or registered by name."""
    agents = state.settings.agents
    if isinstance(spec, str):
        if spec not in agents:
            known = ", ".join(sorted(agents)) or "none (start the server with --agent NAME=FILE)"
            raise Problem(404, "Unknown agent", f"no agent {spec[:80]!r} is registered with this server; "
                          f"registered: {known}")
        return agents[spec]
    if state.settings.registered_only:
        raise Problem(403, "Inline specs refused", "this server starts registered agents only: send the "
                      f"agent's name as spec ({', '.join(sorted(agents)) or 'none registered'})")
    return spec


async def describe_or_404(state: ServerState, run_id: str) -> Any:
    """The run's Temporal description.

    Raises:
        Problem: 404 when no run has this id.
    """
    try:
        return await state.client.temporal.get_workflow_handle(run_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise Problem(404, "Unknown run", f"no run {run_id[:200]!r} in namespace "
                          f"{state.client.temporal.namespace!r}: list runs with GET /v1/runs") from None
        raise


async def running_or_409(state: ServerState, run_id: str) -> None:
    """Raises:
        Problem: 404 for an unknown run, 409 for one that has ended."""
    description = await describe_or_404(state, run_id)
    if description.status != WorkflowExecutionStatus.RUNNING:
        status = description.status.name.lower() if description.status else "closed"
        raise Problem(409, "Run ended", f"run {run_id[:200]!r} has ended ({status}); it takes no more requests")


async def ask(state: ServerState, run_id: str, question: Callable[[AgentRunHandle], Awaitable[T]]) -> T:
    """Ask run ``run_id`` a query (its state, report, messages...).

    Raises:
        Problem: 404 for an unknown run, 503 when no worker answers for it,
            502 when its workflow failed to answer.
    """
    await describe_or_404(state, run_id)
    try:
        return await question(state.client.get_handle(run_id))
    except WorkflowQueryFailedError as err:
        raise Problem(502, "The run could not answer",
                      f"run {run_id[:200]!r} could not answer: {err.message}") from None
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise Problem(404, "Unknown run", f"no run {run_id[:200]!r}: {err.message}") from None
        raise Problem(503, "No worker answers", f"no worker answered for run {run_id[:200]!r} ({err.message}); "
                      f"a run is read from its workflow: start a worker on task queue "
                      f"{state.client.task_queue!r}") from None
