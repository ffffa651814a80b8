"""AguiTranslator: our events -> AG-UI events, without a server."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, get_args

from ag_ui.core import EventType
from ag_ui.encoder import EventEncoder

from agentloop.server.agui.mapping import (
    APPROVAL_REASON,
    CUSTOM_TYPES,
    HANDLERS,
    NOT_MAPPED,
    OUTPUT_REASON,
    AguiTranslator,
)
from agentloop.shared.base.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from agentloop.shared.base.usage import Usage
from agentloop.shared.definition.activity_io import StreamDelta
from agentloop.shared.definition.approvals import PendingAction, PendingApproval
from agentloop.shared.runs import events as ev

T = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
RUN = "thread-1"
MID = ev.message_id(RUN, 0)


def e(cls: Any, seq: int, **fields: Any) -> Any:
    fields.setdefault("run_id", RUN)
    return cls(time=T, seq=seq, **fields)


def delta(seq: int, kind: str, text: str = "", **fields: Any) -> Any:
    return e(ev.MessageDelta, seq, message_id=fields.pop("message_id", MID), attempt=fields.pop("attempt", 1),
             delta=StreamDelta(kind=kind, text=text, **fields))


def run(translator: AguiTranslator, events: list[Any]) -> list[Any]:
    out: list[Any] = []
    for event in events:
        out += translator.translate(event)
    return out


def types(events: list[Any]) -> list[str]:
    return [x.type.value for x in events]


def check_sequence(events: list[Any]) -> None:
    """The ordering rules @ag-ui/client's verifier enforces (the Node test
    checks with the client itself)."""
    in_run, texts, tools, steps, reasoning = False, set(), set(), set(), set()
    for n, x in enumerate(events):
        t = x.type
        assert in_run or t in (EventType.RUN_STARTED, EventType.RUN_ERROR), f"{n}: {t} outside a run"
        if t == EventType.RUN_STARTED:
            assert not in_run, f"{n}: RUN_STARTED inside a run"
            in_run = True
        elif t == EventType.TEXT_MESSAGE_START:
            assert x.message_id not in texts
            texts.add(x.message_id)
        elif t in (EventType.TEXT_MESSAGE_CONTENT, EventType.TEXT_MESSAGE_END):
            assert x.message_id in texts, f"{n}: {t} of a message not open"
            if t == EventType.TEXT_MESSAGE_CONTENT:
                assert x.delta
            else:
                texts.discard(x.message_id)
        elif t == EventType.TOOL_CALL_START:
            assert x.tool_call_id not in tools
            tools.add(x.tool_call_id)
        elif t in (EventType.TOOL_CALL_ARGS, EventType.TOOL_CALL_END):
            assert x.tool_call_id in tools, f"{n}: {t} of a call not open"
            if t == EventType.TOOL_CALL_END:
                tools.discard(x.tool_call_id)
        elif t == EventType.STEP_STARTED:
            assert x.step_name not in steps
            steps.add(x.step_name)
        elif t == EventType.STEP_FINISHED:
            assert x.step_name in steps
            steps.discard(x.step_name)
        elif t == EventType.REASONING_START:
            reasoning.add(x.message_id)
        elif t == EventType.REASONING_END:
            assert x.message_id in reasoning
            reasoning.discard(x.message_id)
        elif t in (EventType.RUN_FINISHED, EventType.RUN_ERROR):
            assert not (texts or tools or steps or reasoning), f"{n}: {t} with {texts, tools, steps, reasoning} open"
            in_run = False
        # every event encodes with ag_ui's encoder as one SSE data line of JSON
        frame = EventEncoder().encode(x)
        assert frame.startswith("data: ") and frame.endswith("\n\n")
        assert json.loads(frame[6:])["type"] == t.value


def turn_with_tool(call_id: str = "c1") -> list[Any]:
    call = ToolCallPart(id=call_id, name="lookup", arguments={"q": "x"})
    return [
        e(ev.TurnStarted, 1, turn=1),
        e(ev.StepCreated, 2),
        e(ev.MessageCreated, 3, message_id=MID),
        delta(4, "thinking", "let me "),
        delta(5, "thinking", "think"),
        delta(6, "text", "Looking"),
        e(ev.ToolCallCreated, 7, message_id=MID, call_id=call_id, name="lookup"),
        delta(8, "tool_call_delta", '{"q": ', call_id=call_id),
        delta(9, "tool_call_delta", '"x"}', call_id=call_id),
        e(ev.MessageCompleted, 10, message_id=MID, message=Message(role="assistant", content=[
            ThinkingPart(text="let me think"), TextPart(text="Looking"), call])),
        e(ev.ToolCallCompletedByLLM, 11, call=call),
        e(ev.ToolExecutionStarted, 12, call=call),
        e(ev.ToolExecutionCompleted, 13, result=ToolResultPart(id=call_id, name="lookup", content="found")),
    ]


def test_a_turn_with_thinking_text_and_a_tool_call() -> None:
    translator = AguiTranslator(RUN, run_id="agui-run-1", model="openai:gpt-4.1")
    events = turn_with_tool() + [
        e(ev.StepCreated, 14, step=1),
        delta(15, "text", "Done.", message_id=ev.message_id(RUN, 1)),
        e(ev.MessageCompleted, 16, step=1, message_id=ev.message_id(RUN, 1),
          message=Message(role="assistant", content=[TextPart(text="Done.")]), usage=Usage(input_tokens=5)),
        e(ev.TurnEnded, 17, turn=1, status="completed", final_text="Done.",
          usage=Usage(input_tokens=12, output_tokens=3, requests=2)),
    ]
    out = run(translator, events)
    check_sequence(out)
    assert types(out) == [
        "RUN_STARTED", "STEP_STARTED",
        "REASONING_START", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END", "REASONING_END",
        "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
        "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT",
        "STEP_FINISHED", "STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
        "STEP_FINISHED", "RUN_FINISHED",
    ]
    started, finished = out[0], out[-1]
    assert (started.thread_id, started.run_id) == (RUN, "agui-run-1")
    assert (finished.thread_id, finished.run_id, finished.result) == (RUN, "agui-run-1", "Done.")
    assert finished.usage[0].model_dump() == {"provider": "openai", "model": "gpt-4.1", "input_tokens": 12,
                                              "output_tokens": 3, "total_tokens": 15, "cached_input_tokens": 0}
    start = next(x for x in out if x.type == EventType.TOOL_CALL_START)
    assert (start.tool_call_id, start.tool_call_name, start.parent_message_id) == ("c1", "lookup", MID)
    args = "".join(x.delta for x in out if x.type == EventType.TOOL_CALL_ARGS)
    assert json.loads(args) == {"q": "x"}
    result = next(x for x in out if x.type == EventType.TOOL_CALL_RESULT)
    assert (result.tool_call_id, result.content, result.role) == ("c1", "found", "tool")
    assert [x.step_name for x in out if x.type == EventType.STEP_STARTED] == ["step 1", "step 2"]
    assert all(x.timestamp == int(T.timestamp() * 1000) for x in out)
    assert translator.runs_finished == 1 and translator.run_id is None


def test_an_answer_that_did_not_stream_is_sent_whole() -> None:
    call = ToolCallPart(id="c9", name="lookup", arguments={"q": 1})
    translator = AguiTranslator(RUN)
    out = run(translator, [
        e(ev.StepCreated, 0),
        e(ev.MessageCompleted, 1, message_id=MID, message=Message(role="assistant", content=[
            ThinkingPart(text="hmm"), TextPart(text="Hello"), call])),
        e(ev.ToolCallCompletedByLLM, 2, call=call),
    ])
    check_sequence(out + translator.end_of_stream())
    assert types(out)[1:] == ["STEP_STARTED", "REASONING_START", "REASONING_MESSAGE_START",
                              "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END", "REASONING_END",
                              "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
                              "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"]
    assert out[0].run_id == f"{RUN}@0"  # no client run id: the thread and the offset that opened it
    assert [x.delta for x in out if x.type == EventType.TOOL_CALL_ARGS] == ['{"q": 1}']


def test_the_tail_not_streamed_comes_with_the_completed_message() -> None:
    translator = AguiTranslator(RUN)
    out = run(translator, [
        e(ev.StepCreated, 0),
        delta(1, "text", "Hel"),  # the first delta went out at once; the rest came with the message
        e(ev.MessageCompleted, 2, message_id=MID, message=Message(role="assistant", content=[
            TextPart(text="Hello")])),
    ])
    check_sequence(out + translator.end_of_stream())
    assert [x.delta for x in out if x.type == EventType.TEXT_MESSAGE_CONTENT] == ["Hel", "lo"]


def test_an_approval_ends_the_agui_run_with_an_interrupt_and_the_rest_is_a_new_run() -> None:
    translator = AguiTranslator(RUN, run_id="r1")
    asked = PendingApproval(call_id="c1", tool_name="lookup", arguments={"q": "x"}, step=1, asked_at=T,
                            reason="lookups ask first")
    first = run(translator, turn_with_tool()[:11] + [
        e(ev.ApprovalRequested, 11, approval=asked),
        e(ev.RunStatusChanged, 12, status="awaiting_approval", previous="running"),
    ])
    check_sequence(first)
    assert types(first)[-3:] == ["CUSTOM", "STEP_FINISHED", "RUN_FINISHED"]
    custom = first[-3]
    assert custom.name == "agentloop.tool.approval.requested"
    assert custom.value["callId"] == "c1" and custom.value["answer"] == f"POST /v1/runs/{RUN}/approvals"
    outcome = first[-1].outcome
    assert outcome.type == "interrupt"
    [interrupt] = outcome.interrupts
    assert (interrupt.id, interrupt.reason, interrupt.tool_call_id) == ("c1", APPROVAL_REASON, "c1")
    assert interrupt.response_schema["properties"]["decision"]["enum"] == ["approve", "deny", "skip"]
    assert interrupt.metadata["agentloop"]["arguments"] == {"q": "x"}
    # the rest of the turn, in the same stream: a new AG-UI run, under a run id of its own
    rest = run(translator, [
        e(ev.ApprovalResolved, 13, call_id="c1", decision="approve", by="ops"),
        e(ev.ToolExecutionCompleted, 14, result=ToolResultPart(id="c1", name="lookup", content="found")),
        e(ev.TurnEnded, 15, turn=1, status="completed", final_text="ok"),
    ])
    check_sequence(first + rest)
    assert types(rest) == ["RUN_STARTED", "CUSTOM", "TOOL_CALL_RESULT", "RUN_FINISHED"]
    assert rest[0].run_id == f"{RUN}@13" and rest[1].value["by"] == "ops"
    assert rest[-1].outcome is None and translator.runs_finished == 2


def test_requires_action_is_an_interrupt_per_call() -> None:
    actions = [PendingAction(call_id=c, tool_name="pick", step=1, asked_at=T, reason="client_tool")
               for c in ("a1", "a2")]
    out = run(AguiTranslator(RUN), [
        e(ev.RequiresAction, 0, actions=actions),
        e(ev.RunStatusChanged, 1, status="requires_action", previous="running"),
    ])
    check_sequence(out)
    assert types(out) == ["RUN_STARTED", "CUSTOM", "RUN_FINISHED"]
    assert out[1].name == "agentloop.requires_action"
    interrupts = out[-1].outcome.interrupts
    assert [(i.id, i.reason) for i in interrupts] == [("a1", OUTPUT_REASON), ("a2", OUTPUT_REASON)]


def test_a_status_change_without_a_request_seen_is_no_interrupt() -> None:
    # a stream resumed after the requests: nothing to interrupt with
    assert run(AguiTranslator(RUN), [e(ev.RunStatusChanged, 5, status="awaiting_approval")]) == []


def test_a_reset_closes_what_the_failed_attempt_streamed_and_the_retry_streams_anew() -> None:
    out = run(AguiTranslator(RUN), [
        e(ev.StepCreated, 0),
        delta(1, "text", "Hel"),
        e(ev.MessageReset, 2, message_id=MID, attempt=2, reason="server error"),
        delta(3, "text", "Hello", attempt=2),
        e(ev.MessageCompleted, 4, message_id=MID, message=Message(role="assistant", content=[TextPart(text="Hello")])),
        e(ev.RunCompleted, 5, final_text="Hello"),
    ])
    check_sequence(out)
    reset = next(x for x in out if x.type == EventType.CUSTOM)
    assert reset.name == "agentloop.message.reset"
    assert reset.value == {"messageId": MID, "newMessageId": f"{MID}#2", "attempt": 2, "reason": "server error"}
    texts = [(x.message_id, x.delta) for x in out if x.type == EventType.TEXT_MESSAGE_CONTENT]
    assert texts == [(MID, "Hel"), (f"{MID}#2", "Hello")]  # the whole text not sent again at completion


def test_failures_and_cancellations() -> None:
    failed = run(AguiTranslator(RUN), [e(ev.StepCreated, 0),
                                       e(ev.RunFailed, 1, reason="max_steps", error="too many steps")])
    check_sequence(failed)
    assert types(failed) == ["RUN_STARTED", "STEP_STARTED", "STEP_FINISHED", "RUN_ERROR"]
    assert (failed[-1].message, failed[-1].code) == ("too many steps", "max_steps")
    turn_failed = run(AguiTranslator(RUN), [e(ev.TurnStarted, 0, turn=2),
                                            e(ev.TurnEnded, 1, turn=2, status="failed", error="boom", reason="error")])
    assert types(turn_failed) == ["RUN_STARTED", "RUN_ERROR"] and turn_failed[-1].message == "boom"
    cancelled = run(AguiTranslator(RUN), [e(ev.TurnStarted, 0, turn=1), e(ev.RunCancelled, 1)])
    assert cancelled[-1].outcome.type == "cancelled"
    interrupted = run(AguiTranslator(RUN), [e(ev.TurnStarted, 0, turn=1),
                                            e(ev.TurnEnded, 1, turn=1, status="interrupted")])
    assert interrupted[-1].outcome.type == "cancelled"


def test_a_follower_sees_the_users_messages_and_a_stream_cut_short_ends_in_run_error() -> None:
    translator = AguiTranslator(RUN, echo_user=True)
    out = run(translator, [
        e(ev.RunCreated, 0, agent_name="a", model="scripted:x", input=[Message.user("hi there")]),
        e(ev.StepCreated, 1),
    ])
    out += translator.end_of_stream()
    check_sequence(out)
    assert types(out) == ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
                          "STEP_STARTED", "STEP_FINISHED", "RUN_ERROR"]
    assert out[1].role == "user" and out[2].delta == "hi there"
    assert out[-1].code == "stream_ended"
    assert AguiTranslator(RUN).end_of_stream() == []  # nothing open: nothing to close


def test_other_events_are_custom_events() -> None:
    out = run(AguiTranslator(RUN), [
        e(ev.SubAgentInvocationStarted, 0, call_id="c", name="helper", child_run_id="child-1", task="t"),
        e(ev.GuardrailTriggered, 1, name="pii", stage="input", reason="found an email"),
    ])
    assert [x.name for x in out[1:]] == ["agentloop.sub_agent.invocation.started", "agentloop.guardrail.triggered"]
    assert out[1].value["child_run_id"] == "child-1"


def _event_types() -> set[str]:
    """Every ``type`` of the union of our event models."""
    union, _field = get_args(ev.AgentEvent)
    return {model.model_fields["type"].default for model in get_args(union)}


def test_every_event_type_has_a_handler_or_is_left_out_on_purpose():
    """A new event type must be mapped (a handler or CUSTOM) or named in
    NOT_MAPPED with a reason; the translator never drops one silently."""
    types = _event_types()
    assert len(types) == len(get_args(get_args(ev.AgentEvent)[0]))
    places = {"HANDLERS": set(HANDLERS), "CUSTOM_TYPES": set(CUSTOM_TYPES), "NOT_MAPPED": set(NOT_MAPPED)}
    missing = sorted(t for t in types if not any(t in keys for keys in places.values()))
    assert not missing, f"event types with no AG-UI mapping and no NOT_MAPPED entry: {missing}"
    twice = sorted(t for t in types if sum(t in keys for keys in places.values()) > 1)
    assert not twice, f"event types mapped in more than one place: {twice}"
    for name, keys in places.items():
        stale = sorted(keys - types)
        assert not stale, f"{name} names types that are no event of ours: {stale}"
    assert all(reason.strip() for reason in NOT_MAPPED.values())


def test_an_event_left_out_on_purpose_becomes_nothing():
    translator = AguiTranslator(RUN)
    assert translator.translate(e(ev.RunContinued, 1, runs=2)) == []
