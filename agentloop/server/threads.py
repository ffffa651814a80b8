"""``/v1/threads``: send a thread its next message, or steer the turn under way."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from pydantic import BaseModel, Field, field_validator

from agentloop.server.access.auth import Caller
from agentloop.server.deps import (
    Actor,
    ServerState,
    State,
    describe_or_404,
    may_send,
    resolve_spec,
    resolve_tenant,
    thread_id_in_use,
)
from agentloop.server.problems import Problem, problem_responses
from agentloop.server.streams.sse import RUN_ID_HEADER, SSE_RESPONSE, event_stream, native_frames
from agentloop.shared.base.errors import DecisionRejected
from agentloop.shared.base.priority import checked_tenant
from agentloop.shared.definition.spec import AgentSpec, DoubleTexting
from agentloop.shared.runs.events import TurnEnded
from agentloop.shared.runs.threads import (
    MAX_MESSAGE_CHARS,
    MessageRefused,
    SteerAccepted,
    ThreadBusy,
    ThreadNotFound,
)

router = APIRouter(tags=["threads"], responses=problem_responses(401, 403, 422))


class SendBody(BaseModel):
    """``POST /v1/threads/{id}/messages``: the thread's next message."""

    text: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    strategy: DoubleTexting | None = Field(
        default=None, description="what to do if the thread is busy (enqueue, interrupt, rollback, reject); "
        "the thread's own strategy when absent")
    spec: AgentSpec | str | None = Field(
        default=None, description="starts the thread when it does not exist yet: an AgentSpec, or the name "
        "of an agent registered with the server")
    tenant: str | None = Field(default=None, description="the thread's tenant when `spec` starts it; a token "
                               "with a tenant starts threads of that tenant only")

    @field_validator("tenant")
    @classmethod
    def _check_tenant(cls, value: str | None) -> str | None:
        return checked_tenant(value)


class Sent(BaseModel):
    """The turn that answers the message. Its events start at ``offset``:
    ``GET /v1/runs/{run_id}/events?from={offset}``."""

    run_id: str = Field(description="the thread's run (its id is the thread id)")
    thread_id: str
    turn: int
    offset: int = Field(description="the event offset where the turn's events begin")


class SteerBody(BaseModel):
    """``POST /v1/threads/{id}/steer``: a message the model sees before its next step."""

    text: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)


@router.post("/threads/{thread_id}/messages", status_code=202, response_model=Sent,
             responses=problem_responses(404, 409))
async def send_message(thread_id: str, body: SendBody, state: ServerState = State, caller: Caller = Actor) -> Sent:
    """Send the thread its next message, as the token's name (``by``),
    with the thread's double-texting strategy (or ``strategy``). A thread
    that does not exist is started when ``spec`` is given."""
    return await _send(state, thread_id, body, caller)


@router.post("/threads/{thread_id}/messages/stream", response_class=Response,
             responses={**SSE_RESPONSE, **problem_responses(404, 409, 429)})
async def send_message_stream(thread_id: str, body: SendBody, state: ServerState = State,
                              caller: Caller = Actor) -> Any:
    """Send the thread its next message, as ``POST .../messages`` does, and
    answer with the turn's events as Server-Sent Events (from the turn's
    offset, ending after its ``agent.turn.ended``); the run id, turn and
    offset are in the headers. A refused message answers as ``POST
    .../messages`` does, before any stream."""
    release = state.streams.take(caller.name)  # 429 before the message is sent
    try:
        sent = await _send(state, thread_id, body, caller)
    except BaseException:
        release()
        raise

    def ends_turn(event: Any) -> bool:
        return isinstance(event, TurnEnded) and event.turn == sent.turn

    frames = native_frames(state.hub, sent.run_id, sent.offset, state.settings.heartbeat_seconds, ends_turn)
    response = event_stream(frames, release)
    response.headers.update({"Content-Location": f"/v1/runs/{sent.run_id}", RUN_ID_HEADER: sent.run_id,
                             "X-Agentloop-Turn": str(sent.turn), "X-Agentloop-Offset": str(sent.offset)})
    return response


async def _send(state: ServerState, thread_id: str, body: SendBody, caller: Caller) -> Sent:
    spec = resolve_spec(state, body.spec, caller) if body.spec is not None else None
    if not await may_send(state, caller, thread_id):
        if spec is not None:
            raise thread_id_in_use(thread_id)
        raise Problem(404, "Unknown thread", f"{ThreadNotFound(thread_id)} (or send `spec` with the message to "
                      "start it)")
    try:
        handle = await state.client.send(thread_id, body.text, spec, strategy=body.strategy, by=caller.name,
                                         tenant=resolve_tenant(caller, body.tenant) if spec is not None else None)
    except ThreadNotFound as err:
        raise Problem(404, "Unknown thread", f"{err} (or send `spec` with the message to start it)") from None
    except ThreadBusy as err:
        raise Problem(409, "Thread busy", str(err)) from None
    except MessageRefused as err:
        raise Problem(409, "Message refused", str(err)) from None
    return Sent(run_id=handle.run_id, thread_id=thread_id, turn=handle.turn or 1, offset=handle.offset)


@router.post("/threads/{thread_id}/steer", response_model=SteerAccepted, responses=problem_responses(404, 409))
async def steer(thread_id: str, body: SteerBody, state: ServerState = State, caller: Caller = Actor) -> SteerAccepted:
    """Add a user message the model sees before its next LLM step, without
    ending the turn under way."""
    await describe_or_404(state, thread_id, caller)
    try:
        return await state.client.get_handle(thread_id).steer(body.text, by=caller.name)
    except DecisionRejected as err:
        raise Problem(409, "Nothing to steer", str(err)) from None
