"""What every request handler shares, and who may call it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from fastapi import Depends, Request
from temporalio.client import WorkflowExecutionStatus, WorkflowQueryFailedError
from temporalio.service import RPCError, RPCStatusCode

from agentloop.server.access.auth import Caller, authorize
from agentloop.server.access.visibility import Found, NotARun, NotYours, find_run, unscoped
from agentloop.server.problems import Problem
from agentloop.server.settings import ServerSettings
from agentloop.server.streams.hub import RunHub
from agentloop.server.streams.sse import StreamSlots
from agentloop.shared.definition.spec import AgentSpec

if TYPE_CHECKING:
    from agentloop.client.agent_client import AgentClient
    from agentloop.client.handle import AgentRunHandle

T = TypeVar("T")


@dataclass
class ServerState:
    """What every request handler shares."""

    client: AgentClient
    settings: ServerSettings
    hub: RunHub
    streams: StreamSlots


def server_state(request: Request) -> ServerState:
    return request.app.state.agentloop


def reader(request: Request) -> Caller:
    """A caller allowed to read (scope ``read`` or ``act``)."""
    return authorize(server_state(request).settings, request, "read")


def actor(request: Request) -> Caller:
    """A caller allowed to act (scope ``act``)."""
    return authorize(server_state(request).settings, request, "act")


def admin(request: Request) -> Caller:
    """A caller allowed to administer (scope ``admin``: tenants' quotas)."""
    return authorize(server_state(request).settings, request, "admin")


Reader = Depends(reader)
Admin = Depends(admin)
Actor = Depends(actor)
State = Depends(server_state)


def resolve_spec(state: ServerState, spec: AgentSpec | str, caller: Caller | None = None) -> AgentSpec:
    """The spec a request names: inline, or registered by name, if the
    server and the caller's token may start it.

    Raises:
        Problem: 404 for an unknown agent; 403 for an inline spec where only
            registered agents start, or an agent the token may not start.
    """
    agents = state.settings.agents
    limited = caller.agents if caller is not None else None
    if limited is not None and (not isinstance(spec, str) or spec not in limited):
        asked = f"agent {spec[:80]!r}" if isinstance(spec, str) else "an inline spec"
        raise Problem(403, "Agent not allowed", f"token {caller.name!r} may start only "  # type: ignore[union-attr]
                      f"{', '.join(limited)}; it asked for {asked}")
    if isinstance(spec, str):
        if spec not in agents:
            known = ", ".join(sorted(agents)) or "none (start the server with --agent NAME=FILE)"
            raise Problem(404, "Unknown agent", f"no agent {spec[:80]!r} is registered with this server; "
                          f"registered: {known}")
        return agents[spec]
    if not state.settings.inline_specs:
        why = ("a server with API tokens starts registered agents only unless started with --allow-inline-specs"
               if state.settings.registered_only is None else "this server starts registered agents only")
        raise Problem(403, "Inline specs refused", f"{why}: send the agent's name as spec "
                      f"({', '.join(sorted(agents)) or 'none registered: start the server with --agent NAME=FILE'})")
    return spec


def unknown_run(state: ServerState, run_id: str) -> Problem:
    """The 404 of a run id that is unknown, or that the caller may not see (the same sentence)."""
    return Problem(404, "Unknown run", f"no run {run_id[:200]!r} in namespace "
                   f"{state.client.temporal.namespace!r}: list runs with GET /v1/runs")


async def describe_or_404(state: ServerState, run_id: str, caller: Caller) -> Any:
    """The run's Temporal description, if ``caller`` may see the run
    (:mod:`agentloop.server.access.visibility`).

    Raises:
        Problem: 404 when no run has this id, or it is a run the caller may
            not see (another tenant's, another agent's): the same answer; or
            the workflow of this id is not a run (a tenant's quota ledger, an
            eval, a user's own workflow: the run routes' scopes are not theirs).
    """
    found = await find_run(state.client, state.settings, caller, run_id)
    if isinstance(found, NotARun):
        raise Problem(404, "Unknown run", found.reason)
    if not isinstance(found, Found):
        raise unknown_run(state, run_id)
    return found.description


async def may_send(state: ServerState, caller: Caller, thread_id: str) -> bool:
    """Whether ``caller`` may send to thread ``thread_id``: False for a run
    it may not see (answer as for an unknown thread, or an id in use where
    a spec would start it); True when no such run exists yet."""
    if unscoped(caller):
        return True
    return not isinstance(await find_run(state.client, state.settings, caller, thread_id), NotYours | NotARun)


def thread_id_in_use(thread_id: str) -> Problem:
    """The 409 of a thread id a scoped token would start, taken by a run it may not see."""
    return Problem(409, "Thread id in use", f"thread id {thread_id[:200]!r} is in use; choose another thread id")


async def running_or_409(state: ServerState, run_id: str, caller: Caller) -> None:
    """Raises:
        Problem: 404 for an unknown run (or one ``caller`` may not see), 409 for one that has ended."""
    description = await describe_or_404(state, run_id, caller)
    if description.status != WorkflowExecutionStatus.RUNNING:
        status = description.status.name.lower() if description.status else "closed"
        raise Problem(409, "Run ended", f"run {run_id[:200]!r} has ended ({status}); it takes no more requests")


async def ask(state: ServerState, run_id: str, question: Callable[[AgentRunHandle], Awaitable[T]],
              caller: Caller) -> T:
    """Ask run ``run_id`` a query (its state, report, messages...), if ``caller`` may see it.

    Raises:
        Problem: 404 for an unknown run (or one ``caller`` may not see), 503
            when no worker answers for it, 502 when its workflow failed to answer.
    """
    await describe_or_404(state, run_id, caller)
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


#: The share of Temporal's payload limit an approval or tool output may use.
PAYLOAD_SHARE = 0.9


async def fits_or_413(state: ServerState, value: Any, what: str) -> None:
    """Refuse ``value`` before it reaches Temporal when, encoded as the
    worker's converter and codec encode it (encryption included), it is over
    90% of the payload limit.

    Raises:
        Problem: 413, naming the size and the limit.
    """
    payloads = await state.client.temporal.data_converter.encode([value])
    size = sum(p.ByteSize() for p in payloads)
    limit = int(state.settings.max_payload_bytes * PAYLOAD_SHARE)
    if size > limit:
        raise Problem(413, "Too large for Temporal", f"{what} is {size} bytes once encoded; Temporal takes "
                      f"payloads up to {state.settings.max_payload_bytes} bytes and this server sends at most "
                      f"{limit}: shorten it, or pass a reference (a path, a URL) instead")


def resolve_tenant(caller: Caller, asked: str | None) -> str | None:
    """The tenant of a run ``caller`` starts: its token's tenant, forced on
    every run it starts, else the one it asks for (None: none).

    Raises:
        Problem: 403 when a token with a tenant asks for another one.
    """
    if caller.tenant is None:
        return asked
    if asked is not None and asked != caller.tenant:
        raise Problem(403, "Tenant not allowed", f"token {caller.name!r} starts runs of tenant "
                      f"{caller.tenant!r} only; it asked for {asked[:80]!r}")
    return caller.tenant
