"""AG-UI: ``POST /v1/ag-ui/{agent}`` and ``GET /v1/runs/{id}/events?protocol=ag-ui``.

An AG-UI front end (``HttpAgent`` of ``@ag-ui/client``, CopilotKit...)
posts a ``RunAgentInput``. Its ``threadId`` is an agentloop thread: the first
request on a thread id starts the thread with the last user message of
``messages``, each later one sends the thread its next message. The answer
is the turn's events as AG-UI events over SSE, ending with ``RUN_FINISHED``
(or ``RUN_ERROR``) when the turn ends.

A call that waits for approval, or for the client's output
(``requires_action``), ends the AG-UI run with ``RUN_FINISHED`` whose outcome
is ``interrupt``: one interrupt per call, its id the call id. Answer it
either way:

* AG-UI's resume: the next request's ``resume`` entries, ``payload``
  ``{decision: approve|deny|skip, reason?, result?}`` for an approval,
  ``{output, is_error?}`` for an output; ``status: cancelled`` denies (or
  answers the output as an error). The answer is the continuation of the
  same turn.
* the JSON API (``POST /v1/runs/{id}/approvals`` or ``/tool_outputs``), then a
  resume entry with ``status: resolved`` and no payload to follow the turn on.

The translation itself is :class:`agentloop.server.agui.mapping.AguiTranslator`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any, Literal

from ag_ui.core import BaseEvent, ResumeEntry, RunAgentInput, TextPart, UserMessage
from ag_ui.encoder import EventEncoder
from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentloop.server.access.auth import Caller
from agentloop.server.agui.mapping import AguiTranslator
from agentloop.server.deps import (
    Actor,
    ServerState,
    State,
    describe_or_404,
    fits_or_413,
    may_send,
    resolve_spec,
    thread_id_in_use,
)
from agentloop.server.problems import Problem
from agentloop.server.streams.hub import IDLE
from agentloop.server.streams.live import Seen
from agentloop.server.streams.sse import event_stream
from agentloop.shared.base.errors import DecisionRejected, describe_validation_error
from agentloop.shared.definition.approvals import ApprovalDecision, ToolOutput
from agentloop.shared.runs.events import is_terminal
from agentloop.shared.runs.threads import MessageRefused, ThreadBusy

router = APIRouter(tags=["ag-ui"])

_ENCODER = EventEncoder()

#: How long the search for a resumed interrupt's event waits for more events
#: once it has read what the thread has, in seconds.
RESUME_SCAN_IDLE = 0.5


class ApprovalAnswer(BaseModel):
    """A resume entry's ``payload`` for a ``tool_approval`` interrupt."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "deny", "skip"] = "approve"
    reason: str | None = None
    result: str | None = Field(default=None, description="approve or skip: answer the model with this instead")


class OutputAnswer(BaseModel):
    """A resume entry's ``payload`` for a ``tool_output`` interrupt."""

    model_config = ConfigDict(extra="forbid")

    output: str
    is_error: bool = False


def encode(events: Iterable[BaseEvent], seq: int | None = None) -> list[str]:
    """SSE frames of AG-UI events (ag_ui's encoder); the last one carries
    ``id: seq``, the offset of the event of ours they came from, so
    ``Last-Event-ID`` resumes after it."""
    frames = [_ENCODER.encode(event) for event in events]
    if frames and seq is not None:
        frames[-1] = f"id: {seq}\n{frames[-1]}"
    return frames


async def run_stream(state: ServerState, run_id: str, offset: int) -> AsyncIterator[Any]:
    """The run's events from ``offset`` as AG-UI SSE frames (or ``IDLE``):
    an AG-UI run per turn of a thread (per wait of a run for someone), the
    user's messages included. Ends after the run's terminal event."""
    translator = AguiTranslator(run_id, echo_user=True)
    async for frame in _frames(state, run_id, offset, translator):
        yield frame


async def _frames(state: ServerState, run_id: str, offset: int, translator: AguiTranslator, *,
                  turn: int | None = None, one_run: bool = False) -> AsyncIterator[Any]:
    """Translated frames of ``run_id`` from ``offset``; with ``turn``, from
    that turn's start; with ``one_run``, until the first AG-UI run ends."""
    started = turn is None
    try:
        async for event in state.hub.subscribe(run_id, offset, idle=state.settings.heartbeat_seconds,
                                               live=state.hub.live, catch_up=False):
            if event is IDLE:
                yield IDLE
                continue
            if isinstance(event, Seen):  # shown live already: its id alone
                yield f"id: {event.seq}\n\n"
                continue
            if not started:
                started = event.type == "agent.turn.started" and event.turn == turn
                if not started and not is_terminal(event):
                    continue  # the turns before this one (a message waits for its turn)
            finished = translator.runs_finished
            for frame in encode(translator.translate(event), event.seq):
                yield frame
            if one_run and translator.runs_finished > finished:
                return
        for frame in encode(translator.end_of_stream()):
            yield frame
    except Exception as err:  # the response has begun: the error is the stream's last event
        for frame in encode(translator.error_events(f"reading run {run_id} failed: {err}", "read_failed")):
            yield frame


def user_text(input: RunAgentInput) -> str:
    """The text of the last user message of ``input.messages``.

    Raises:
        Problem: 422 when there is none, or it has no text.
    """
    for message in reversed(input.messages):
        if isinstance(message, UserMessage):
            content = message.content
            text = content if isinstance(content, str) else "\n".join(
                p.text for p in content if isinstance(p, TextPart))
            if not text.strip():
                raise Problem(422, "Invalid request", "the last user message has no text: agentloop takes a "
                              "user message's text as the thread's next message")
            return text
    raise Problem(422, "Invalid request", "messages has no user message: the last user message is the "
                  "thread's next message (or send resume entries to answer interrupts)")


def _payload(entry: ResumeEntry, model: type[BaseModel]) -> Any:
    try:
        return model.model_validate(entry.payload if entry.payload is not None else {})
    except ValidationError as err:
        fields = ", ".join(model.model_fields)
        raise Problem(422, "Invalid resume payload", f"resume entry {entry.interrupt_id!r}: "
                      f"{describe_validation_error(err)} (a payload has {fields})") from None


async def _interrupt_offset(state: ServerState, thread_id: str, ids: set[str]) -> int:
    """The offset just after the events that asked for ``ids`` (where the
    AG-UI run they interrupted ended).

    Raises:
        Problem: 409 naming the ids that no call of the thread has.
    """
    found: dict[str, int] = {}
    async for event in state.hub.subscribe(thread_id, 0, idle=RESUME_SCAN_IDLE):
        if event is IDLE:
            break
        asked = [event.approval.call_id] if event.type == "agent.tool.approval.requested" else \
            [a.call_id for a in event.actions] if event.type == "thread.run.requires_action" else []
        for call_id in asked:
            if call_id in ids:
                found[call_id] = event.seq or 0
        if len(found) == len(ids):
            break
    missing = sorted(ids - set(found))
    if missing:
        raise Problem(409, "Unknown interrupt", f"thread {thread_id[:200]!r} has no interrupt "
                      f"{', '.join(missing)}: resume entries answer the interrupts of the run before")
    return max(found.values()) + 1


async def resume(state: ServerState, thread_id: str, entries: list[ResumeEntry], caller: Caller) -> int:
    """Answer interrupts with resume entries; the offset the continuation
    streams from.

    Raises:
        Problem: 404 for an unknown thread, 409 for an interrupt the thread
            does not have or that cannot be answered so, 422 for a payload
            that does not fit its interrupt.
    """
    await describe_or_404(state, thread_id, caller)
    offset = await _interrupt_offset(state, thread_id, {e.interrupt_id for e in entries})
    handle = state.client.get_handle(thread_id)
    pending = await handle.pending()
    approvals, actions = {p.call_id for p in pending.approvals}, {a.call_id for a in pending.actions}
    outputs: list[ToolOutput] = []
    try:
        for entry in entries:
            cid = entry.interrupt_id
            if cid in approvals:
                if entry.status == "cancelled":
                    decision = ApprovalDecision(call_id=cid, decision="deny", reason="cancelled by the user",
                                                by=caller.name)
                elif entry.payload is None:
                    raise Problem(409, "Interrupt still waiting", f"call {cid!r} still waits for a decision: "
                                  "send payload {decision: approve|deny|skip} in its resume entry, or decide it "
                                  f"with POST /v1/runs/{thread_id}/approvals first")
                else:
                    answer = _payload(entry, ApprovalAnswer)
                    decision = ApprovalDecision(call_id=cid, decision=answer.decision, reason=answer.reason,
                                                result=answer.result, by=caller.name)
                await fits_or_413(state, decision, f"the decision on call {cid!r}")
                await handle.decide(decision)
            elif cid in actions:
                if entry.status == "cancelled":
                    outputs.append(ToolOutput(call_id=cid, output="cancelled by the user", is_error=True))
                elif entry.payload is None:
                    raise Problem(409, "Interrupt still waiting", f"call {cid!r} still waits for its output: "
                                  "send payload {output} in its resume entry, or submit it with "
                                  f"POST /v1/runs/{thread_id}/tool_outputs first")
                else:
                    answer = _payload(entry, OutputAnswer)
                    outputs.append(ToolOutput(call_id=cid, output=answer.output, is_error=answer.is_error))
            elif entry.payload is not None and entry.status == "resolved":
                raise Problem(409, "Already answered", f"call {cid!r} no longer waits (answered already, or the "
                              "turn ended): send its resume entry without a payload to follow the turn on")
        if outputs:
            await fits_or_413(state, outputs, "the tool outputs")
            await handle.submit_tool_outputs(outputs)
    except DecisionRejected as err:
        raise Problem(409, "Request refused by the run", str(err)) from None
    return offset


@router.post("/ag-ui/{agent}", responses={200: {"content": {"text/event-stream": {}},
                                                "description": "AG-UI events (Server-Sent Events)"}})
async def run_agent(agent: str, body: RunAgentInput, request: Request, state: ServerState = State,
                    caller: Caller = Actor) -> Any:
    """Run agent ``agent`` (registered with the server) for an AG-UI client.

    ``threadId`` is the agentloop thread: the first request starts it, later
    ones send its next message (the last user message of ``messages``), or,
    with ``resume``, answer the interrupts the previous AG-UI run ended with
    and follow the turn on. Streams AG-UI events until the AG-UI run ends."""
    spec = resolve_spec(state, agent, caller)
    thread_id = body.thread_id
    translator = AguiTranslator(thread_id, run_id=body.run_id, input=body, model=spec.model)
    if body.resume:
        offset = await resume(state, thread_id, body.resume, caller)
        return event_stream(_frames(state, thread_id, offset, translator, one_run=True),
                            state.streams.take(caller.name))
    text = user_text(body)
    if not await may_send(state, caller, thread_id):
        raise thread_id_in_use(thread_id)
    release = state.streams.take(caller.name)  # 429 before the message is sent: no turn nobody follows
    try:
        handle = await state.client.send(thread_id, text, spec, by=caller.name, tenant=caller.tenant)
    except BaseException as err:
        release()
        if isinstance(err, ThreadBusy):
            raise Problem(409, "Thread busy", str(err)) from None
        if isinstance(err, MessageRefused):
            raise Problem(409, "Message refused", str(err)) from None
        raise
    return event_stream(_frames(state, thread_id, handle.offset, translator, turn=handle.turn, one_run=True),
                        release)
