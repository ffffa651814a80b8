"""LoopState (what a run knows and carries across continue-as-new) and the
checks of what people send a run, without a server."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from temporalio.exceptions import ApplicationError

from agentloop.shared.base.errors import (
    INVALID_DECISION_ERROR_TYPE,
    INVALID_REQUEST_ERROR_TYPE,
    REQUEST_TOO_LARGE_ERROR_TYPE,
)
from agentloop.shared.base.messages import Message, ToolCallPart, ToolResultPart
from agentloop.shared.base.usage import Usage
from agentloop.shared.definition.approvals import (
    ApprovalDecision,
    PendingAction,
    PendingApproval,
    StopRequest,
    SubmitToolOutputs,
    ToolGate,
    ToolOutput,
)
from agentloop.shared.runs.report import AgentRunReport, StepReport
from agentloop.shared.runs.run import AgentRunInput
from agentloop.shared.runs.state import CARRIED_ANSWERED, REJECTED_SIGNALS_KEPT, LoopState, PendingStep
from agentloop.shared.runs.transcripts import transcript_hashes
from agentloop.workflows.decisions import requests
from tests.helpers.paths import HISTORIES

NOW = datetime(2026, 11, 23, tzinfo=UTC)


def state(**fields: object) -> LoopState:
    return LoopState(input_count=1, report=AgentRunReport(id="r", model="scripted:x", started_at=NOW),
                     messages=[Message.user("hi")], **fields)


def call(call_id: str, name: str = "write_file") -> ToolCallPart:
    return ToolCallPart(id=call_id, name=name, arguments={})


def approval(call_id: str) -> PendingApproval:
    return PendingApproval(call_id=call_id, tool_name="write_file", step=1, asked_at=NOW)


def action(call_id: str) -> PendingAction:
    return PendingAction(call_id=call_id, tool_name="ask_user", step=1, asked_at=NOW, reason="client_tool")


def waiting_step() -> PendingStep:
    return PendingStep(
        gates=[ToolGate(call=call("a"), approval=approval("a")), ToolGate(call=call("b"), approval=approval("b")),
               ToolGate(call=call("c", "ask_user"), action=action("c"))],
        report=StepReport(index=0, type="initial"),
    )


# The carry -----------------------------------------------------------------------------


def test_the_carry_leaves_out_what_one_temporal_run_owns() -> None:
    s = state(step=3, usage=Usage(input_tokens=5))
    s.running_calls["x"] = call("x")
    s.status = "awaiting_approval"
    carried = json.loads(s.model_dump_json())
    assert carried["step"] == 3 and carried["usage"]["input_tokens"] == 5
    for runtime in ("messages", "status", "reason", "error", "approvals", "actions", "running_calls",
                    "steps_this_run"):
        assert runtime not in carried


def test_a_carried_step_waits_again_for_what_has_not_arrived() -> None:
    s = state()
    s.decide(ApprovalDecision(call_id="a"))
    carried = s.carried(waiting_step())
    resumed = LoopState.model_validate_json(carried.model_dump_json())
    assert list(resumed.approvals) == ["b"] and list(resumed.actions) == ["c"]
    assert list(resumed.decisions) == ["a"] and resumed.was_answered("a")


def test_the_carry_keeps_the_most_recent_answered_ids_and_only_the_pending_decisions() -> None:
    s = state()
    for i in range(CARRIED_ANSWERED + 5):
        s.decide(ApprovalDecision(call_id=f"old{i}"))
    carried = s.carried(waiting_step())
    assert len(carried.answered) == CARRIED_ANSWERED and carried.answered[-1] == f"old{CARRIED_ANSWERED + 4}"
    assert carried.decisions == {}


def test_a_carry_from_a_run_in_flight_still_resumes() -> None:
    """The carry of tests/replay/histories/continue_as_new-2.json, as runs in flight send it."""
    history = json.loads((HISTORIES / "continue_as_new-2.json").read_text())
    started = history["events"][0]["workflowExecutionStartedEventAttributes"]
    payload = json.loads(__import__("base64").b64decode(started["input"]["payloads"][0]["data"]))
    run_input = AgentRunInput.model_validate(payload)
    assert run_input.carry is not None and run_input.carry.runs >= 1
    assert run_input.carry.report.id


# What people send ----------------------------------------------------------------------------


def test_decisions_and_outputs_are_taken_once() -> None:
    s = state()
    s.wait_for(waiting_step().gates)
    assert s.still_pending() == ["a", "b", "c"]
    s.decide(ApprovalDecision(call_id="a"))
    s.take_outputs(SubmitToolOutputs(tool_outputs=[ToolOutput(call_id="c", output="yes")]))
    assert s.still_pending() == ["b"] and s.answered == ["a", "c"]
    s.mark_answered("a")
    assert s.answered == ["a", "c"]


def test_the_first_stop_wins_and_notes_are_bounded() -> None:
    s = state()
    s.request_stop(StopRequest(reason="first"))
    s.request_stop(StopRequest(reason="second"))
    assert s.stop == StopRequest(reason="first")
    for i in range(REJECTED_SIGNALS_KEPT + 3):
        s.note(f"n{i}")
    assert len(s.rejected_signals) == REJECTED_SIGNALS_KEPT
    assert s.rejected_signals[-1].endswith(str(REJECTED_SIGNALS_KEPT + 2))


def test_usage_counts_every_attempt_as_a_request() -> None:
    s = state()
    counted = s.add_usage(Usage(input_tokens=10, requests=1), attempts=3)
    assert counted.requests == 3 and s.usage.requests == 3 and s.report.total_usage.input_tokens == 10


def test_steps_advance_and_count_in_this_run() -> None:
    s = state()
    s.ask_to_verify("Sure?")
    s.finish_step([(ToolResultPart(id="x", name="t", content="ok"), False)], failed_steps=0)
    assert (s.step, s.steps_this_run, s.verified) == (2, 2, True)
    assert [m.role for m in s.messages] == ["user", "user", "tool"]


def test_transcript_hashes_follow_appends_and_rewrites() -> None:
    s = state()
    s.messages.append(Message.assistant("a"))
    assert s.transcript_hashes() == transcript_hashes(s.messages)
    s.messages.append(Message.user("b"))
    assert s.transcript_hashes() == transcript_hashes(s.messages)
    s.replace_messages([Message.user("summary")])
    assert s.transcript_hashes() == transcript_hashes([Message.user("summary")])


# The checks of agentloop.workflows.decisions.requests ----------------------------------------------------


def waiting_state() -> LoopState:
    s = state()
    s.wait_for(waiting_step().gates)
    return s


def refusal(check, *args) -> requests.Refusal:
    with pytest.raises(requests.Refusal) as info:
        check(*args)
    return info.value


def test_a_decision_for_a_waiting_call_is_taken() -> None:
    assert requests.check_decision({"call_id": "a", "by": "ops"}, waiting_state(), "r").by == "ops"


def test_decisions_for_other_calls_are_refused_with_what_waits() -> None:
    s = waiting_state()
    unknown = refusal(requests.check_decision, {"call_id": "zz"}, s, "run-1")
    assert "no call 'zz' waits for approval in run run-1; waiting now: a, b" in str(unknown)
    client = refusal(requests.check_decision, {"call_id": "c"}, s, "run-1")
    assert "use submit_tool_outputs" in str(client)
    s.decide(ApprovalDecision(call_id="a"))
    assert "already decided" in str(refusal(requests.check_decision, {"call_id": "a"}, s, "r"))
    long = refusal(requests.check_decision, {"call_id": "x" * 5000}, s, "r")
    assert long.error_type == INVALID_REQUEST_ERROR_TYPE and len(str(long)) < 300


def test_a_denial_takes_no_result_and_malformed_payloads_show_an_example() -> None:
    s = waiting_state()
    deny = refusal(requests.check_decision, {"call_id": "a", "decision": "deny", "result": "x"}, s, "r")
    assert deny.error_type == INVALID_DECISION_ERROR_TYPE and "use decision 'skip'" in str(deny)
    malformed = refusal(requests.check_decision, {"call": "a"}, s, "r")
    assert malformed.error_type == INVALID_REQUEST_ERROR_TYPE and requests.EXAMPLES["approve"] in str(malformed)


def test_outputs_must_cover_every_waiting_call_once() -> None:
    s = state()
    s.wait_for([ToolGate(call=call("c", "ask_user"), action=action("c")),
                ToolGate(call=call("d", "ask_user"), action=action("d"))])
    both = [{"call_id": "c", "output": "1"}, {"tool_call_id": "d", "output": "2"}]
    assert len(requests.check_outputs(both, s, "r").tool_outputs) == 2
    assert "more than once" in str(refusal(requests.check_outputs, [both[0], both[0], both[1]], s, "r"))
    assert "missing for d" in str(refusal(requests.check_outputs, [both[0]], s, "r"))
    assert "no call 'e' waits" in str(refusal(requests.check_outputs, [*both, {"call_id": "e", "output": "3"}], s, "r"))
    s.take_outputs(SubmitToolOutputs.model_validate({"tool_outputs": both}))
    assert "already have their output" in str(refusal(requests.check_outputs, [both[0]], s, "r"))


def test_payload_shapes_and_sizes() -> None:
    assert requests.one_payload("stop", ()) is None
    assert "takes one JSON object, not 2 inputs" in str(refusal(requests.one_payload, "stop", ({}, {})))
    too_big = refusal(requests.update_payload, "approve", ({"call_id": "a", "result": "x" * 2_000_000},))
    assert too_big.error_type == REQUEST_TOO_LARGE_ERROR_TYPE and len(str(too_big)) < 300
    assert requests.parse_stop(None) == StopRequest()


def test_update_refusals_are_non_retryable_application_errors() -> None:
    with pytest.raises(ApplicationError) as info:
        requests.as_update_error(lambda: requests.check_decision({"call_id": "zz"}, waiting_state(), "r"))
    assert info.value.non_retryable and info.value.type == INVALID_DECISION_ERROR_TYPE


def test_transcript_ranges_are_clamped() -> None:
    wanted = requests.transcript_range(({"start": 2, "max_bytes": 10**9},))
    assert (wanted.start, wanted.max_bytes) == (2, requests.TRANSCRIPT_PAGE_BYTES)


def test_a_negative_transcript_start_is_refused() -> None:
    with pytest.raises(ValueError) as info:
        requests.transcript_range(({"start": -5},))
    assert str(info.value) == ('transcript start -5 is negative: messages are numbered from 0; expected e.g. '
                               '{"start": 0, "max_bytes": 1000000}')
    with pytest.raises(ValueError, match="takes one argument"):
        requests.transcript_range(({}, {}))


def test_only_a_small_first_step_carries_its_transcript_by_value() -> None:
    from agentloop.shared.definition.activity_io import ToolDefinition
    from agentloop.shared.runs.transcripts import ModelContext
    from agentloop.workflows.effects.activity_calls import SEED_MAX_BYTES, transcript_seed

    context = ModelContext(system_prompt="Be brief.", tools=[ToolDefinition(name="read_file")], context_hash="h")
    first = state()
    seed = transcript_seed(first, context)
    assert seed is not None and seed.messages == first.messages and seed.tools == context.tools
    first.advance()  # a later step names its transcript by reference only
    assert transcript_seed(first, context) is None
    big = state()
    big.messages = [Message.user("x" * SEED_MAX_BYTES)]
    assert transcript_seed(big, context) is None
