"""``/v1/runs`` and ``/v1/threads``: start, list, read, follow and act on runs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field
from temporalio.service import RPCError

from agentloop.server.auth import Caller
from agentloop.server.deps import Actor, Reader, ServerState, State, describe_or_404, resolve_spec
from agentloop.server.hub import IDLE
from agentloop.server.problems import Problem
from agentloop.server.sse import event_stream, frame, resume_offset
from agentloop.shared.approvals import ApprovalDecision
from agentloop.shared.errors import DecisionRejected, UserError
from agentloop.shared.spec import AgentSpec

router = APIRouter(tags=["runs"])


class StartRun(BaseModel):
    """``POST /v1/runs``: an agent and its input."""

    spec: AgentSpec | str = Field(description="an AgentSpec, or the name of an agent registered with the server")
    input: str = Field(min_length=1, description="the user's instruction")
    run_id: str | None = Field(default=None, description="the run id; a fresh one when absent")
    thread_id: str | None = Field(default=None, description="start a thread with this id (the run id is the thread id)")


class Started(BaseModel):
    run_id: str


class Decide(BaseModel):
    """``POST /v1/runs/{id}/approvals``: a decision on one waiting call."""

    call_id: str = Field(min_length=1)
    decision: Literal["approve", "deny", "skip"]
    reason: str | None = None
    result: str | None = Field(default=None, description="approve or skip: answer the model with this instead")


@router.post("/runs", status_code=201, response_model=Started)
async def start_run(body: StartRun, request: Request, state: ServerState = State, caller: Caller = Actor) -> Started:
    """Start a run (or a thread, with ``thread_id``)."""
    from agentloop.client.agent_client import RunIdInUse

    spec = resolve_spec(state, body.spec)
    try:
        handle = await state.client.start(spec, body.input, run_id=body.run_id, thread_id=body.thread_id)
    except RunIdInUse as err:
        raise Problem(409, "Run id in use", str(err)) from None
    return Started(run_id=handle.run_id)


async def _native(state: ServerState, run_id: str, offset: int) -> AsyncIterator[Any]:
    async for event in state.hub.subscribe(run_id, offset, idle=state.settings.heartbeat_seconds):
        yield event if event is IDLE else frame(event.model_dump(mode="json"), event_id=event.seq)


@router.get("/runs/{run_id}/events")
async def run_events(
    run_id: str, request: Request, from_: int | None = Query(default=None, alias="from", ge=0),
    protocol: Literal["agentloop", "ag-ui"] = "agentloop", state: ServerState = State, caller: Caller = Reader,
) -> Any:
    """The run's events as Server-Sent Events: each ``id`` is the event's
    stream offset; ``Last-Event-ID`` resumes just after it, ``?from=N``
    starts at offset N. The stream ends after the run's terminal event.
    ``?protocol=ag-ui`` gives AG-UI events instead."""
    offset = resume_offset(request, from_)
    await describe_or_404(state, run_id)
    if protocol == "ag-ui":
        from agentloop.server.agui import run_stream

        return event_stream(run_stream(state, run_id, offset))
    return event_stream(_native(state, run_id, offset))


async def _decided(state: ServerState, run_id: str, call_id: str) -> str:
    """Who decided ``call_id`` and when, from the run's events."""
    async for event in state.client.events(run_id):
        if getattr(event, "type", "") == "agent.tool.approval.resolved" and event.call_id == call_id:
            return f"decided {event.decision} by {event.by or 'someone unnamed'} at {event.time.isoformat()}"
    return "decided earlier"


@router.post("/runs/{run_id}/approvals")
async def decide(run_id: str, body: Decide, state: ServerState = State, caller: Caller = Actor) -> Any:
    """Decide a waiting call, as the token's name (the decision's ``by``).
    A decision is single-use: deciding the same call again is 409, naming
    who decided it and when."""
    await describe_or_404(state, run_id)
    handle = state.client.get_handle(run_id)
    decision = ApprovalDecision(call_id=body.call_id, decision=body.decision, reason=body.reason,
                                result=body.result, by=caller.name)
    try:
        accepted = await handle.decide(decision)
    except DecisionRejected as err:
        text = str(err)
        if "already decided" in text:
            raise Problem(409, "Already decided", f"call {body.call_id!r} was already "
                          f"{await _decided(state, run_id, body.call_id)}; a decision is single-use") from None
        pending = await _waiting(handle)
        raise Problem(409, "Request refused by the run", text, waiting=pending) from None
    return accepted.model_dump(mode="json")


async def _waiting(handle: Any) -> list[str]:
    try:
        work = await handle.pending()
    except (RPCError, UserError):
        return []
    return [p.call_id for p in work.approvals] + [a.call_id for a in work.actions]
