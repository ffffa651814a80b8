"""``/v1/runs``: start, list, read, follow and act on runs."""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import AsyncIterator
from typing import Any, Literal

from fastapi import APIRouter, Body, Query, Request, Response
from pydantic import BaseModel, Field, field_validator
from temporalio.service import RPCError

from agentloop.client.runs import RunSummary
from agentloop.server.access.auth import Caller
from agentloop.server.access.visibility import RunFacts, allowed_agents, list_clause, listed, unscoped
from agentloop.server.agui.routes import run_stream
from agentloop.server.deps import (
    Actor,
    Reader,
    ServerState,
    State,
    ask,
    describe_or_404,
    fits_or_413,
    resolve_spec,
    resolve_tenant,
    running_or_409,
)
from agentloop.server.problems import Problem, problem_responses
from agentloop.server.streams.sse import RUN_ID_HEADER, SSE_RESPONSE, event_stream, native_frames, resume_offset
from agentloop.shared.base.errors import DecisionRejected, UserError
from agentloop.shared.base.messages import Message
from agentloop.shared.base.priority import checked_tenant
from agentloop.shared.definition.approvals import ApprovalDecision, DecisionAccepted, ToolOutput
from agentloop.shared.definition.spec import AgentSpec
from agentloop.shared.runs.events import ApprovalResolved
from agentloop.shared.runs.report import AgentRunReport, RunStatus
from agentloop.shared.runs.run import RunState
from agentloop.shared.runs.snapshots import AgentSnapshot

router = APIRouter(tags=["runs"], responses=problem_responses(401, 403, 422))

#: A filter value of the runs list: no quotes or backslashes (it goes into a visibility query).
_FILTER = r'^[^"\\]{1,200}$'
#: How long a refused decision looks for the event that says who decided the call.
_DECIDED_LOOKUP_SECONDS = 5.0


class StartRun(BaseModel):
    """``POST /v1/runs``: an agent and its input."""

    spec: AgentSpec | str = Field(description="an AgentSpec, or the name of an agent registered with the server")
    input: str = Field(min_length=1, description="the user's instruction")
    run_id: str | None = Field(default=None, description="the run id; a fresh one when absent")
    thread_id: str | None = Field(default=None, description="start a thread with this id (the run id is the thread id)")
    tenant: str | None = Field(default=None, description="whose run it is (its fairness key and AgentTenant); a "
                               "token with a tenant starts runs of that tenant only")

    @field_validator("tenant")
    @classmethod
    def _check_tenant(cls, value: str | None) -> str | None:
        return checked_tenant(value)


class Started(BaseModel):
    run_id: str
    workspace: str | None = Field(
        default=None, description="the directory the run's tools work in: the spec's, else the default of the "
        "worker that runs it when the server knows it (its own, or `agentloop dev`'s); null: a worker's own default")


class RunList(BaseModel):
    """A page of runs, newest first."""

    runs: list[RunSummary]
    next_page_token: str | None = Field(default=None, description="pass as ?page_token= for the next page; "
                                        "absent after the last")


class MessagesPage(BaseModel):
    """Messages ``offset`` to ``offset + len(messages)`` of the conversation."""

    messages: list[Message]
    offset: int
    total: int = Field(description="messages in the conversation")
    next_offset: int | None = Field(default=None, description="the next page's ?offset=; absent after the last")


class Decide(BaseModel):
    """``POST /v1/runs/{id}/approvals``: a decision on one waiting call."""

    call_id: str = Field(min_length=1)
    decision: Literal["approve", "deny", "skip"]
    reason: str | None = None
    result: str | None = Field(default=None, description="approve or skip: answer the model with this instead")


class SubmitOutputs(BaseModel):
    """``POST /v1/runs/{id}/tool_outputs``: an output for every call the run waits for."""

    tool_outputs: list[ToolOutput] = Field(min_length=1)


class StopRun(BaseModel):
    """``POST /v1/runs/{id}/stop``: end the run after its current step."""

    reason: str | None = Field(default=None, max_length=2000)


class Requested(BaseModel):
    """A stop or cancel was asked of the run; its events say when it ended."""

    run_id: str
    requested: Literal["stop", "cancel"]


@router.post("/runs", status_code=201, response_model=Started, responses=problem_responses(404, 409))
async def start_run(body: StartRun, response: Response, state: ServerState = State,
                    caller: Caller = Actor) -> Started:
    """Start a run (or a thread, with ``thread_id``)."""
    spec = resolve_spec(state, body.spec, caller)
    run_id = await _start(state, body, spec, caller)
    response.headers["Location"] = f"/v1/runs/{run_id}"
    return Started(run_id=run_id, workspace=spec.workspace or state.settings.default_workspace)


async def _start(state: ServerState, body: StartRun, spec: AgentSpec, caller: Caller) -> str:
    """Start the run ``body`` asks for (its ``spec`` resolved): its id.

    Raises:
        Problem: 403 for a tenant the caller may not start, 409 for a run id in use.
    """
    from agentloop.client.runs import RunIdInUse

    tenant = resolve_tenant(caller, body.tenant)
    try:
        handle = await state.client.start(spec, body.input, run_id=body.run_id, thread_id=body.thread_id,
                                          tenant=tenant)
    except RunIdInUse as err:
        # A scoped token learns no more of a run it may not see than that its id is taken.
        said = str(err) if unscoped(caller) else f"run id {err.run_id!r} is in use; choose another run id"
        raise Problem(409, "Run id in use", said) from None
    return handle.run_id


def _bad_page_token() -> Problem:
    return Problem(422, "Invalid page token", "page_token is not a token this server gave: pass the "
                   "next_page_token of the previous page as it was",
                   errors=[{"field": "page_token", "reason": "not a page token"}])


def _page_token(text: str | None) -> bytes | None:
    if not text:
        return None
    try:
        token = base64.b64decode(text.translate(str.maketrans("-_", "+/")) + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise _bad_page_token() from None
    if not token:
        raise _bad_page_token()
    return token


@router.get("/runs", response_model=RunList)
async def list_runs(
    status: RunStatus | None = Query(default=None, description="the agent status"),
    name: str | None = Query(default=None, pattern=_FILTER, description="AgentSpec.name"),
    thread: str | None = Query(default=None, pattern=_FILTER, description="a thread id: that thread's run"),
    limit: int = Query(default=50, ge=1, le=1000),
    page_token: str | None = Query(default=None, max_length=4000),
    state: ServerState = State, caller: Caller = Reader,
) -> RunList:
    """Runs, newest first, found by their search attributes (``AgentStatus``,
    ``AgentName``, ``AgentThread``); a run continued as new is listed once."""
    agents = allowed_agents(state.settings, caller)
    scoped = list_clause(caller, agents)
    extra = " AND ".join(c for c in (f'AgentThread="{thread}"' if thread else None, scoped) if c) or None
    try:
        runs, token = await state.client.list_runs_page(status=status, name=name, query=extra, limit=limit,
                                                        page_token=_page_token(page_token))
        if scoped:
            runs = listed(caller, agents, ((RunFacts(r.tenant, r.agent_name), r) for r in runs))
    except RPCError as err:
        if page_token:
            raise _bad_page_token() from None
        raise Problem(400, "The list was refused", f"Temporal refused the list: {err.message}") from None
    return RunList(runs=runs, next_page_token=base64.urlsafe_b64encode(token).decode().rstrip("=") if token else None)


@router.get("/runs/{run_id}", response_model=RunState, responses=problem_responses(404, 503))
async def run_state(run_id: str, state: ServerState = State, caller: Caller = Reader) -> RunState:
    """What the run is doing: status, step, pending calls, usage."""
    return await ask(state, run_id, lambda handle: handle.state(), caller)


@router.get("/runs/{run_id}/report", response_model=AgentRunReport, responses=problem_responses(404, 503))
async def run_report(run_id: str, state: ServerState = State, caller: Caller = Reader) -> AgentRunReport:
    """The run report up to now: steps, tool calls (with each decision's ``decided_by``), usage, cost."""
    return await ask(state, run_id, lambda handle: handle.report(), caller)


@router.get("/runs/{run_id}/messages", response_model=MessagesPage, responses=problem_responses(404, 503))
async def run_messages(
    run_id: str, offset: int = Query(default=0, ge=0), limit: int = Query(default=100, ge=1, le=1000),
    state: ServerState = State, caller: Caller = Reader,
) -> MessagesPage:
    """The conversation, a page at a time (``?offset=&limit=``)."""
    messages = await ask(state, run_id, lambda handle: handle.messages(), caller)
    page = messages[offset:offset + limit]
    end = offset + len(page)
    return MessagesPage(messages=page, offset=offset, total=len(messages),
                        next_offset=end if end < len(messages) else None)


@router.get("/runs/{run_id}/export", response_model=AgentSnapshot, responses=problem_responses(404, 503))
async def run_export(run_id: str, state: ServerState = State, caller: Caller = Reader) -> Any:
    """The run as a versioned snapshot (what ``agentloop export`` writes)."""
    await describe_or_404(state, run_id, caller)
    try:
        snapshot = await state.client.get_handle(run_id).export()
    except UserError as err:
        raise Problem(409, "Cannot export", str(err)) from None
    return snapshot.model_dump(mode="json")


def _native(state: ServerState, run_id: str, offset: int) -> AsyncIterator[Any]:
    return native_frames(state.hub, run_id, offset, state.settings.heartbeat_seconds)


@router.get("/runs/{run_id}/events", response_class=Response, responses={**SSE_RESPONSE, **problem_responses(404)})
async def run_events(
    run_id: str, request: Request,
    from_: int | None = Query(default=None, alias="from", ge=0, description="the first offset to send"),
    protocol: Literal["agentloop", "ag-ui"] = "agentloop", state: ServerState = State, caller: Caller = Reader,
) -> Any:
    """The run's events as Server-Sent Events: each ``id`` is the event's
    stream offset; ``Last-Event-ID`` resumes just after it, ``?from=N``
    starts at offset N. The stream ends after the run's terminal event.
    ``?protocol=ag-ui`` gives AG-UI events instead."""
    offset = resume_offset(request, from_)
    await describe_or_404(state, run_id, caller)
    if protocol == "ag-ui":
        return event_stream(run_stream(state, run_id, offset), state.streams.take(caller.name))
    return event_stream(_native(state, run_id, offset), state.streams.take(caller.name))


@router.post("/runs/stream", response_class=Response,
             responses={**SSE_RESPONSE, **problem_responses(404, 409, 429)})
async def start_run_stream(body: StartRun, state: ServerState = State, caller: Caller = Actor) -> Any:
    """Start a run, as ``POST /v1/runs`` does, and answer with its events
    from offset 0, as ``GET /v1/runs/{id}/events`` streams them: one request,
    no second lookup. The run id is in ``Content-Location`` and
    ``X-Agentloop-Run-Id`` and in the first event (``agent.run.created``);
    a reconnect is ``GET /v1/runs/{id}/events`` with ``Last-Event-ID``. A
    start that fails answers as ``POST /v1/runs`` does, before any stream."""
    spec = resolve_spec(state, body.spec, caller)
    release = state.streams.take(caller.name)  # 429 before the run starts: no run nobody follows
    try:
        run_id = await _start(state, body, spec, caller)
    except BaseException:
        release()
        raise
    state.hub.follow(run_id)  # the run's feed reads from now on, before its first delta
    response = event_stream(_native(state, run_id, 0), release)
    response.headers["Content-Location"] = f"/v1/runs/{run_id}"
    response.headers[RUN_ID_HEADER] = run_id
    return response


async def _decided(state: ServerState, run_id: str, call_id: str) -> str:
    """Who decided ``call_id`` and when, from the run's events."""

    async def find() -> str | None:
        async for event in state.client.events(run_id):
            if isinstance(event, ApprovalResolved) and event.call_id == call_id:
                return f"decided ({event.decision}) by {event.by or 'someone unnamed'} at {event.time.isoformat()}"
        return None

    try:
        found = await asyncio.wait_for(find(), _DECIDED_LOOKUP_SECONDS)
    except (TimeoutError, UserError, RPCError):
        found = None
    return found or "decided earlier"


async def _waiting(handle: Any) -> list[str]:
    try:
        work = await handle.pending()
    except (RPCError, UserError):
        return []
    return [p.call_id for p in work.approvals] + [a.call_id for a in work.actions]


async def _refused(state: ServerState, run_id: str, err: DecisionRejected) -> Problem:
    """The 409 of a refused decision or submission, with the call ids the run waits for."""
    handle = state.client.get_handle(run_id)
    return Problem(409, "Request refused by the run", str(err), waiting=await _waiting(handle))


@router.post("/runs/{run_id}/approvals", response_model=DecisionAccepted, responses=problem_responses(404, 409))
async def decide(run_id: str, body: Decide, state: ServerState = State, caller: Caller = Actor) -> Any:
    """Decide a waiting call, as the token's name (the decision's ``by``).
    A decision is single-use: deciding the same call again is 409, naming
    who decided it and when."""
    await describe_or_404(state, run_id, caller)
    handle = state.client.get_handle(run_id)
    decision = ApprovalDecision(call_id=body.call_id, decision=body.decision, reason=body.reason,
                                result=body.result, by=caller.name)
    await fits_or_413(state, decision, "the decision")
    try:
        accepted = await handle.decide(decision)
    except DecisionRejected as err:
        text = str(err)
        if "already decided" in text or "is not running" in text:
            decided = await _decided(state, run_id, body.call_id)
            if decided != "decided earlier" or "already decided" in text:
                raise Problem(409, "Already decided", f"call {body.call_id!r} was already {decided}; a decision "
                              "is single-use") from None
        raise await _refused(state, run_id, err) from None
    return accepted.model_dump(mode="json")


@router.post("/runs/{run_id}/tool_outputs", response_model=DecisionAccepted, responses=problem_responses(404, 409))
async def submit_tool_outputs(run_id: str, body: SubmitOutputs, state: ServerState = State,
                              caller: Caller = Actor) -> Any:
    """Answer every call the run waits for (``requires_action``), by call id."""
    await describe_or_404(state, run_id, caller)
    await fits_or_413(state, body.tool_outputs, "the tool outputs")
    try:
        accepted = await state.client.get_handle(run_id).submit_tool_outputs(body.tool_outputs)
    except DecisionRejected as err:
        raise await _refused(state, run_id, err) from None
    return accepted.model_dump(mode="json")


@router.post("/runs/{run_id}/stop", status_code=202, response_model=Requested, responses=problem_responses(404, 409))
async def stop_run(run_id: str, body: StopRun | None = Body(default=None), state: ServerState = State,
                   caller: Caller = Actor) -> Requested:
    """End the run ``stopped`` once its current step is done."""
    await running_or_409(state, run_id, caller)
    reason = body.reason if body and body.reason else f"stopped by {caller.name}"
    await state.client.get_handle(run_id).stop(reason)
    return Requested(run_id=run_id, requested="stop")


@router.post("/runs/{run_id}/cancel", status_code=202, response_model=Requested,
             responses=problem_responses(404, 409))
async def cancel_run(run_id: str, state: ServerState = State, caller: Caller = Actor) -> Requested:
    """Cancel the run: running LLM calls and tools are cancelled; it ends ``cancelled``."""
    await running_or_409(state, run_id, caller)
    await state.client.get_handle(run_id).cancel()
    return Requested(run_id=run_id, requested="cancel")
