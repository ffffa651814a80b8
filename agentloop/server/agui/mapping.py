"""Our run events as AG-UI events: a pure, stateful translation.

:class:`AguiTranslator` takes a run's events one at a time (in stream
order) and returns the AG-UI events (``ag_ui.core``) each one becomes. It
keeps what the AG-UI protocol needs to stay well-formed across a stream: the
AG-UI run that is open (``RUN_STARTED`` is sent before the first event that
shows anything), the text, reasoning and tool-call messages that are open,
the step, and the interrupts gathered while the run waits for someone.

The mapping (docs/http-api.md, "AG-UI"):

=====================================================  ==========================================
ours                                                   AG-UI
=====================================================  ==========================================
``agent.run.created``, ``agent.turn.started``          ``RUN_STARTED`` (echoing the request)
``agent.run.step.created``                             ``STEP_STARTED`` ``step N`` (the previous
                                                       step's ``STEP_FINISHED`` first)
``thread.message.delta`` text                          ``TEXT_MESSAGE_START`` / ``_CONTENT``
``thread.message.delta`` thinking                      ``REASONING_START``,
                                                       ``REASONING_MESSAGE_START`` / ``_CONTENT``
``thread.run.step.tool_call.created`` + arguments      ``TOOL_CALL_START`` / ``TOOL_CALL_ARGS``
``thread.run.step.tool_call.completed_by_llm``         ``TOOL_CALL_END``
``thread.message.completed``                           ``TEXT_MESSAGE_END`` (after the text not
                                                       streamed yet, if any), ``REASONING_END``
``agent.tool.execution.completed``                     ``TOOL_CALL_RESULT``
``agent.tool.approval.requested``                      ``CUSTOM agentloop.tool.approval.requested``,
                                                       and an interrupt of ``RUN_FINISHED``
``thread.run.requires_action``                         ``CUSTOM agentloop.requires_action``, and
                                                       an interrupt per call
``agent.run.status.changed`` to a wait                 ``RUN_FINISHED`` with outcome
                                                       ``interrupt`` (the interrupts gathered)
``agent.turn.ended``, ``thread.run.completed``         ``RUN_FINISHED`` (``RUN_ERROR`` when the
                                                       turn failed)
``thread.run.failed``                                  ``RUN_ERROR``
``thread.run.cancelled``                               ``RUN_FINISHED`` with outcome ``cancelled``
``thread.message.reset``                               open messages closed, ``CUSTOM
                                                       agentloop.message.reset``; the new attempt
                                                       streams under a new message id
approval resolved, sub-agents, guardrails...           ``CUSTOM agentloop.<our type less agent.>``
=====================================================  ==========================================

:data:`HANDLERS`, :data:`CUSTOM_TYPES` and :data:`NOT_MAPPED` (the events
left out on purpose, with why) together name every event type we have.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Interrupt,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TokenUsage,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from agentloop.shared.base.messages import TextPart, ThinkingPart, ToolCallPart
from agentloop.shared.base.usage import Usage
from agentloop.shared.runs import events as ev

#: The AG-UI protocol version this server speaks (``RUN_STARTED.protocolVersion``).
PROTOCOL_VERSION = "1.0"

#: Prefix of the ``CUSTOM`` events' names.
CUSTOM_PREFIX = "agentloop."

#: ``Interrupt.reason`` of a call waiting for an operator's decision.
APPROVAL_REASON = "tool_approval"
#: ``Interrupt.reason`` of a call the client must run and answer (``requires_action``).
OUTPUT_REASON = "tool_output"

#: What a resume entry's ``payload`` answers a ``tool_approval`` interrupt with.
APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {"enum": ["approve", "deny", "skip"], "default": "approve"},
        "reason": {"type": "string"},
        "result": {"type": "string", "description": "approve or skip: answer the model with this instead"},
    },
    "additionalProperties": False,
}
#: What a resume entry's ``payload`` answers a ``tool_output`` interrupt with.
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"output": {"type": "string"}, "is_error": {"type": "boolean", "default": False}},
    "required": ["output"],
    "additionalProperties": False,
}

#: Our statuses that mean the run waits for someone.
WAITING_STATUSES = frozenset({"awaiting_approval", "requires_action"})

#: Our events shown as ``CUSTOM agentloop.<type>`` with their fields.
CUSTOM_TYPES = frozenset({
    "agent.sub_agent.invocation.started", "agent.sub_agent.invocation.completed",
    "agent.guardrail.triggered", "agent.context.compacted", "agent.turn.interrupted", "agent.turn.rolled_back",
    "agent.run.steered", "agent.run.tool_removed", "agent.run.tool_added", "agent.run.quota.waiting",
})

#: Our events that become no AG-UI event, on purpose, and why.
NOT_MAPPED: dict[str, str] = {
    "thread.message.created": "the message opens with its first delta or its completion (TEXT_MESSAGE_START)",
    "agent.tool.execution.started": "AG-UI has no event for a call starting to run; TOOL_CALL_RESULT shows its end",
    "agent.run.continued": "a new Temporal run under the same run id is no change a follower sees",
}


def token_usage(usage: Usage, model: str | None) -> list[TokenUsage] | None:
    """Our usage as AG-UI's (one entry, the run's model); None when nothing was used."""
    if not usage.requests and not usage.input_tokens and not usage.output_tokens:
        return None
    provider, _, name = (model or "").partition(":")
    return [TokenUsage(provider=provider or None, model=name or model or None, input_tokens=usage.input_tokens,
                       output_tokens=usage.output_tokens, total_tokens=usage.input_tokens + usage.output_tokens,
                       cached_input_tokens=usage.cached_input_tokens)]


def _millis(event: Any) -> int:
    return int(event.time.timestamp() * 1000)


class AguiTranslator:
    """Translates one stream of our events into AG-UI events.

    Args:
        thread_id: The AG-UI ``threadId`` of every run (an agentloop thread,
            or the run id for a run that is not a thread).
        run_id: The AG-UI ``runId`` of the first AG-UI run (a client's
            ``RunAgentInput.runId``); later ones, and the first when None, are
            ``<thread_id>@<offset>``, after the event that opened them.
        input: Echoed in the first ``RUN_STARTED``.
        echo_user: Also stream the user's messages (the run's input, a
            thread's messages) as text messages: for a follower who did not
            send them. A client that sent them (``POST /v1/ag-ui``) has them.
        model: The run's model (``provider:name``) for the usage entries;
            learnt from ``agent.run.created`` when None.
    """

    def __init__(self, thread_id: str, *, run_id: str | None = None, input: RunAgentInput | None = None,
                 echo_user: bool = False, model: str | None = None) -> None:
        self.thread_id, self.echo_user, self.model = thread_id, echo_user, model
        self._next_run_id, self._input = run_id, input
        #: The AG-UI run open now (its runId), if any.
        self.run_id: str | None = None
        #: AG-UI runs finished (``RUN_FINISHED`` or ``RUN_ERROR``) so far.
        self.runs_finished = 0
        self._step: str | None = None
        self._text: set[str] = set()  # open text messages
        self._reasoning: str | None = None  # the open reasoning message
        self._tools: dict[str, str] = {}  # open tool calls: call id -> parent message id
        self._ended_tools: set[str] = set()
        # Our message ids whose text or thinking streamed, with what streamed of each.
        self._streamed: dict[str, dict[str, str]] = {}
        self._attempts: dict[str, int] = {}  # our message id -> the attempt streaming it
        self._interrupts: dict[str, Interrupt] = {}
        self._pending_parent: str | None = None  # the AG-UI id of the message whose calls come next
        self._out: list[BaseEvent] = []
        self._seq: int | None = None
        self._ms: int | None = None

    # -- public ------------------------------------------------------------------

    def translate(self, event: Any) -> list[BaseEvent]:
        """The AG-UI events ``event`` (one of ours) becomes, in order."""
        self._out, self._seq, self._ms = [], event.seq, _millis(event)
        handler = HANDLERS.get(event.type)
        if handler is not None:
            handler(self, event)
        elif event.type in CUSTOM_TYPES:
            self._custom(event.type, event.model_dump(mode="json", exclude={"type", "time", "seq"}))
        return self._out

    def end_of_stream(self, reason: str = "the run's event stream ended before the run did") -> list[BaseEvent]:
        """Close an AG-UI run left open when the stream ends without a
        terminal event (a run terminated from outside, say): ``RUN_ERROR``."""
        self._out, self._ms = [], None
        if self.run_id is not None:
            self._close_all()
            self._emit(RunErrorEvent(message=reason, code="stream_ended"))
            self._finished()
        return self._out

    def error_events(self, message: str, code: str) -> list[BaseEvent]:
        """``RUN_ERROR`` for a failure outside the run (reading its stream
        failed): the open AG-UI run's, or alone when none is open."""
        self._out, self._ms = [], None
        self._close_all()
        self._emit(RunErrorEvent(message=message, code=code))
        self._finished()
        return self._out

    # -- AG-UI runs ----------------------------------------------------------------

    def _emit(self, event: BaseEvent) -> None:
        if event.timestamp is None and self._ms is not None:
            event.timestamp = self._ms
        self._out.append(event)

    def _open_run(self) -> None:
        if self.run_id is not None:
            return
        run_id = self._next_run_id or f"{self.thread_id}@{self._seq if self._seq is not None else 0}"
        self._next_run_id = None
        self.run_id = run_id
        self._emit(RunStartedEvent(thread_id=self.thread_id, run_id=run_id, protocol_version=PROTOCOL_VERSION,
                                   input=self._input))
        self._input = None

    def _show(self, event: BaseEvent) -> None:
        """Emit ``event`` inside an AG-UI run (opening one if none is open)."""
        self._open_run()
        self._emit(event)

    def _custom(self, name: str, value: Any) -> None:
        self._show(CustomEvent(name=CUSTOM_PREFIX + name.removeprefix("agent."), value=value))

    def _finished(self) -> None:
        self.run_id = None
        self.runs_finished += 1
        self._interrupts.clear()

    def _finish(self, *, result: Any = None, outcome: Any = None, usage: Usage | None = None) -> None:
        self._open_run()
        self._close_all()
        self._emit(RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id or "", result=result,
                                    outcome=outcome, usage=token_usage(usage, self.model) if usage else None))
        self._finished()

    def _error(self, message: str, code: str | None, usage: Usage | None = None) -> None:
        self._open_run()
        self._close_all()
        self._emit(RunErrorEvent(message=message or "the run failed", code=code,
                                 usage=token_usage(usage, self.model) if usage else None))
        self._finished()

    # -- open things -----------------------------------------------------------------

    def _close_reasoning(self) -> None:
        if self._reasoning is not None:
            rid, self._reasoning = self._reasoning, None
            self._emit(ReasoningMessageEndEvent(message_id=rid))
            self._emit(ReasoningEndEvent(message_id=rid))

    def _close_text(self) -> None:
        for mid in sorted(self._text):
            self._emit(TextMessageEndEvent(message_id=mid))
        self._text.clear()

    def _close_tool(self, call_id: str) -> None:
        if self._tools.pop(call_id, None) is not None:
            self._emit(ToolCallEndEvent(tool_call_id=call_id))
            self._ended_tools.add(call_id)

    def _close_all(self) -> None:
        self._close_reasoning()
        self._close_text()
        for call_id in list(self._tools):
            self._close_tool(call_id)
        if self._step is not None:
            self._emit(StepFinishedEvent(step_name=self._step))
            self._step = None

    def _mid(self, message_id: str, attempt: int | None = None) -> str:
        """The AG-UI id of our message ``message_id`` (its attempt's, after a reset)."""
        n = self._attempts.get(message_id, 1) if attempt is None else attempt
        return message_id if n <= 1 else f"{message_id}#{n}"

    def _text_delta(self, mid: str, text: str) -> None:
        if not text:
            return
        self._close_reasoning()
        if mid not in self._text:
            self._show(TextMessageStartEvent(message_id=mid, role="assistant"))
            self._text.add(mid)
        self._emit(TextMessageContentEvent(message_id=mid, delta=text))

    def _thinking_delta(self, mid: str, text: str) -> None:
        if not text:
            return
        rid = f"{mid}:reasoning"
        if self._reasoning != rid:
            self._close_reasoning()
            self._show(ReasoningStartEvent(message_id=rid))
            self._emit(ReasoningMessageStartEvent(message_id=rid, role="reasoning"))
            self._reasoning = rid
        self._emit(ReasoningMessageContentEvent(message_id=rid, delta=text))

    def _tool_start(self, call_id: str, name: str, parent: str) -> None:
        if call_id in self._tools:
            return
        self._close_reasoning()
        self._close_text()
        self._show(ToolCallStartEvent(tool_call_id=call_id, tool_call_name=name, parent_message_id=parent))
        self._tools[call_id] = parent
        self._ended_tools.discard(call_id)

    def _user_text(self, mid: str, text: str) -> None:
        if self.echo_user and text:
            self._show(TextMessageStartEvent(message_id=mid, role="user"))
            self._emit(TextMessageContentEvent(message_id=mid, delta=text))
            self._emit(TextMessageEndEvent(message_id=mid))

    # -- our events ------------------------------------------------------------------

    def _on_agent_run_created(self, event: ev.RunCreated) -> None:
        self.model = self.model or event.model
        self._open_run()
        for n, message in enumerate(event.input):
            if message.role == "user":
                self._user_text(f"{event.run_id}:input:{n}", message.text)

    def _on_agent_thread_message_received(self, event: ev.ThreadMessageReceived) -> None:
        if self.echo_user and event.text:
            self._user_text(f"{event.run_id}:turn:{event.turn}", event.text)

    def _on_agent_turn_started(self, event: ev.TurnStarted) -> None:
        self._open_run()

    def _on_agent_run_step_created(self, event: ev.StepCreated) -> None:
        self._open_run()
        self._close_all()
        self._step = f"step {event.step + 1}"
        self._emit(StepStartedEvent(step_name=self._step))

    def _on_thread_message_delta(self, event: ev.MessageDelta) -> None:
        delta, mid = event.delta, self._mid(event.message_id, event.attempt)
        self._attempts[event.message_id] = max(event.attempt, self._attempts.get(event.message_id, 1))
        if delta.kind in ("text", "thinking"):
            streamed = self._streamed.setdefault(event.message_id, {"text": "", "thinking": ""})
            streamed[delta.kind] += delta.text
            (self._text_delta if delta.kind == "text" else self._thinking_delta)(mid, delta.text)
        elif delta.kind == "tool_call_start" and delta.call_id:
            self._tool_start(delta.call_id, delta.name or "", mid)
        elif delta.kind == "tool_call_delta" and delta.call_id in self._tools and delta.text:
            self._emit(ToolCallArgsEvent(tool_call_id=delta.call_id, delta=delta.text))

    def _on_thread_run_step_tool_call_created(self, event: ev.ToolCallCreated) -> None:
        self._attempts[event.message_id] = max(event.attempt, self._attempts.get(event.message_id, 1))
        self._tool_start(event.call_id, event.name, self._mid(event.message_id, event.attempt))

    def _on_thread_message_reset(self, event: ev.MessageReset) -> None:
        old = self._mid(event.message_id)
        self._close_reasoning()
        self._close_text()
        for call_id in list(self._tools):
            self._close_tool(call_id)
        self._attempts[event.message_id] = event.attempt
        self._streamed.pop(event.message_id, None)
        self._custom("message.reset", {"messageId": old, "newMessageId": self._mid(event.message_id),
                                       "attempt": event.attempt, "reason": event.reason})

    def _on_thread_message_completed(self, event: ev.MessageCompleted) -> None:
        mid = self._mid(event.message_id)
        streamed = self._streamed.pop(event.message_id, None)
        if streamed is None:
            for part in event.message.content:
                if isinstance(part, ThinkingPart):
                    self._thinking_delta(mid, part.text)
                elif isinstance(part, TextPart):
                    self._text_delta(mid, part.text)
        else:
            # The tail that was not worth a batch of its own comes with the
            # completed message: show the rest of what streamed.
            for kind, show in (("thinking", self._thinking_delta), ("text", self._text_delta)):
                cls = ThinkingPart if kind == "thinking" else TextPart
                whole = "".join(p.text for p in event.message.content if isinstance(p, cls))
                if whole.startswith(streamed[kind]):
                    show(mid, whole[len(streamed[kind]):])
        self._close_reasoning()
        self._close_text()
        self._pending_parent = mid

    def _on_thread_run_step_tool_call_completed_by_llm(self, event: ev.ToolCallCompletedByLLM) -> None:
        call: ToolCallPart = event.call
        if call.id in self._ended_tools:
            return
        if call.id not in self._tools:
            parent = self._pending_parent or ev.message_id(event.run_id, event.step)
            self._tool_start(call.id, call.name, parent)
            args = call.raw_arguments if call.arguments_error and call.raw_arguments else json.dumps(call.arguments)
            self._emit(ToolCallArgsEvent(tool_call_id=call.id, delta=args))
        self._close_tool(call.id)

    def _on_agent_tool_execution_completed(self, event: ev.ToolExecutionCompleted) -> None:
        result = event.result
        self._close_tool(result.id)
        self._show(ToolCallResultEvent(message_id=f"{result.id}:result", tool_call_id=result.id,
                                       content=result.content, role="tool"))

    def _on_agent_tool_approval_requested(self, event: ev.ApprovalRequested) -> None:
        a = event.approval
        answer = f"POST /v1/runs/{event.run_id}/approvals"
        value = {"runId": event.run_id, "callId": a.call_id, "toolName": a.tool_name, "arguments": a.arguments,
                 "reason": a.reason, "step": a.step, "expiresAt": a.expires_at.isoformat() if a.expires_at else None,
                 "answer": answer}
        self._custom("tool.approval.requested", value)
        self._interrupts[a.call_id] = Interrupt(
            id=a.call_id, reason=APPROVAL_REASON, tool_call_id=a.call_id,
            message=f"{a.tool_name} needs approval" + (f": {a.reason}" if a.reason else ""),
            response_schema=APPROVAL_SCHEMA, expires_at=a.expires_at.isoformat() if a.expires_at else None,
            metadata={"agentloop": {"runId": event.run_id, "toolName": a.tool_name, "arguments": a.arguments,
                                    "answer": answer}},
        )

    def _on_thread_run_requires_action(self, event: ev.RequiresAction) -> None:
        answer = f"POST /v1/runs/{event.run_id}/tool_outputs"
        self._custom("requires_action", {
            "runId": event.run_id, "answer": answer,
            "actions": [{"callId": a.call_id, "toolName": a.tool_name, "arguments": a.arguments, "reason": a.reason}
                        for a in event.actions]})
        for a in event.actions:
            self._interrupts[a.call_id] = Interrupt(
                id=a.call_id, reason=OUTPUT_REASON, tool_call_id=a.call_id,
                message=f"run {a.tool_name} and send its output", response_schema=OUTPUT_SCHEMA,
                metadata={"agentloop": {"runId": event.run_id, "toolName": a.tool_name, "arguments": a.arguments,
                                        "why": a.reason, "answer": answer}},
            )

    def _on_agent_tool_approval_resolved(self, event: ev.ApprovalResolved) -> None:
        self._interrupts.pop(event.call_id, None)
        self._custom("tool.approval.resolved", {"runId": event.run_id, "callId": event.call_id,
                                                "decision": event.decision, "by": event.by, "reason": event.reason})

    def _on_agent_run_status_changed(self, event: ev.RunStatusChanged) -> None:
        if event.status in WAITING_STATUSES and self._interrupts:
            self._finish(outcome=RunFinishedInterruptOutcome(interrupts=list(self._interrupts.values())))

    def _on_agent_turn_ended(self, event: ev.TurnEnded) -> None:
        if event.status == "completed":
            self._finish(result=event.final_text, usage=event.usage)
        elif event.status in ("failed",):
            self._error(event.error or f"turn {event.turn} failed", event.reason, event.usage)
        else:  # stopped, interrupted, rolled back, cancelled
            self._finish(result=event.final_text or None, outcome=RunFinishedCancelledOutcome(), usage=event.usage)

    def _on_thread_run_completed(self, event: ev.RunCompleted) -> None:
        if event.status == "stopped":
            self._finish(result=event.final_text or None, outcome=RunFinishedCancelledOutcome(), usage=event.usage)
        else:
            self._finish(result=event.final_text, usage=event.usage)

    def _on_thread_run_failed(self, event: ev.RunFailed) -> None:
        self._error(event.error, event.reason, event.usage)

    def _on_thread_run_cancelled(self, event: ev.RunCancelled) -> None:
        self._finish(outcome=RunFinishedCancelledOutcome(), usage=event.usage)


#: Each of our event types with a translation of its own, and its handler.
#: Every type of :data:`agentloop.shared.runs.events.AgentEvent` is here, in
#: :data:`CUSTOM_TYPES` or in :data:`NOT_MAPPED` (tests/unit/http/test_agui_mapping.py).
HANDLERS: dict[str, Callable[[AguiTranslator, Any], None]] = {
    "agent.run.created": AguiTranslator._on_agent_run_created,
    "agent.thread.message.received": AguiTranslator._on_agent_thread_message_received,
    "agent.turn.started": AguiTranslator._on_agent_turn_started,
    "agent.run.step.created": AguiTranslator._on_agent_run_step_created,
    "thread.message.delta": AguiTranslator._on_thread_message_delta,
    "thread.run.step.tool_call.created": AguiTranslator._on_thread_run_step_tool_call_created,
    "thread.message.reset": AguiTranslator._on_thread_message_reset,
    "thread.message.completed": AguiTranslator._on_thread_message_completed,
    "thread.run.step.tool_call.completed_by_llm": AguiTranslator._on_thread_run_step_tool_call_completed_by_llm,
    "agent.tool.execution.completed": AguiTranslator._on_agent_tool_execution_completed,
    "agent.tool.approval.requested": AguiTranslator._on_agent_tool_approval_requested,
    "thread.run.requires_action": AguiTranslator._on_thread_run_requires_action,
    "agent.tool.approval.resolved": AguiTranslator._on_agent_tool_approval_resolved,
    "agent.run.status.changed": AguiTranslator._on_agent_run_status_changed,
    "agent.turn.ended": AguiTranslator._on_agent_turn_ended,
    "thread.run.completed": AguiTranslator._on_thread_run_completed,
    "thread.run.failed": AguiTranslator._on_thread_run_failed,
    "thread.run.cancelled": AguiTranslator._on_thread_run_cancelled,
}
