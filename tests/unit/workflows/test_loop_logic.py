"""The loop's pure decisions and the permission policy, without a server:
every branch of decide_next_step, gate_call, resolve_approval,
resolve_output, decide_after_tools, continue_as_new_due and
check_run_budget."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import partial

import pytest

from agentloop.shared.base.messages import Message, ToolCallPart, ToolResultPart
from agentloop.shared.base.usage import Usage
from agentloop.shared.definition.activity_io import ModelResponse, ToolDefinition
from agentloop.shared.definition.approvals import (
    ApprovalDecision,
    PermissionRule,
    ToolGate,
    ToolOutput,
    check_permission,
)
from agentloop.shared.definition.pricing import Budget, ModelPrice
from agentloop.workflows.decisions.budgets import (
    ContinueAsNew,
    NotDue,
    OverBudget,
    TooLargeToCarry,
    WithinBudget,
    check_run_budget,
    continue_as_new_due,
    newest_within,
)
from agentloop.workflows.decisions.next_step import (
    Continue,
    FailRun,
    FinalAnswer,
    RequireAction,
    RunTools,
    Stopped,
    Verify,
    count_failed_steps,
    decide_after_tools,
    decide_next_step,
)
from agentloop.workflows.decisions.tool_gates import (
    Answered,
    AskApproval,
    AwaitClient,
    Execute,
    decision_of,
    gate_call,
    gate_calls,
    gate_of,
    pending_action,
    resolve_approval,
    resolve_output,
)
from agentloop.workflows.decisions.tool_messages import clip_output, missing_tools_message
from tests.helpers import agents

#: A spec whose calls follow the default permission (auto: writes ask).
spec = partial(agents.spec, "scripted:x", default_permission="auto")

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
READ = ToolDefinition(name="read_file", read_only=True)
WRITE = ToolDefinition(name="write_file")


def tool_call(name: str = "read_file", call_id: str = "c1", **arguments: object) -> ToolCallPart:
    return ToolCallPart(id=call_id, name=name, arguments=dict(arguments))


def response(
    text: str = "", calls: list[ToolCallPart] | None = None, finish: str = "stop", raw: str | None = None
) -> ModelResponse:
    return ModelResponse(
        message=Message.assistant(text, calls or []), finish_reason=finish, raw_finish_reason=raw
    )


# decide_next_step ------------------------------------------------------------------


def test_stop_is_a_final_answer() -> None:
    assert decide_next_step(response("done"), spec=spec(), continuations=0) == FinalAnswer("done")


def test_tool_calls_finish_without_calls_is_a_final_answer() -> None:
    assert decide_next_step(response("ok", finish="tool_calls"), spec=spec(), continuations=0) == FinalAnswer("ok")


def test_tool_calls_run() -> None:
    calls = [tool_call()]
    assert decide_next_step(response(calls=calls, finish="tool_calls"), spec=spec(), continuations=3) == RunTools(calls)


def test_past_the_continuation_limit_the_client_acts() -> None:
    calls = [tool_call()]
    decision = decide_next_step(response(calls=calls), spec=spec(max_tool_call_continuations=2), continuations=2)
    assert decision == RequireAction(calls)


def test_past_the_continuation_limit_old_runs_fail() -> None:
    decision = decide_next_step(
        response(calls=[tool_call()]), spec=spec(max_tool_call_continuations=2), continuations=2,
        limit_requires_action=False,
    )
    assert isinstance(decision, FailRun) and decision.reason == "max_tool_call_continuations"
    assert "max_tool_call_continuations=2" in decision.message


def test_under_the_continuation_limit_tools_run() -> None:
    calls = [tool_call()]
    decision = decide_next_step(response(calls=calls), spec=spec(max_tool_call_continuations=2), continuations=1)
    assert decision == RunTools(calls)


def test_length_fails_with_the_limit_named() -> None:
    decision = decide_next_step(response("cut", finish="length"), spec=spec(max_tokens=50), continuations=0)
    assert decision == FailRun(
        "length",
        "the model stopped because it reached its output token limit (max_tokens=50); "
        "raise AgentSpec.max_tokens or ask for less",
    )


def test_length_names_the_limit_the_provider_sent() -> None:
    # The spec sets no limit; the provider sent its default (Anthropic's and
    # OpenAI's 4096). Before, the message said "max_tokens=None".
    cut = response("cut", finish="length").model_copy(update={"max_tokens": 4096})
    decision = decide_next_step(cut, spec=spec(), continuations=0)
    assert decision == FailRun(
        "length",
        "the model stopped because it reached its output token limit (max_tokens=4096, the provider's "
        "default while AgentSpec.max_tokens is unset); raise AgentSpec.max_tokens (agentloop run "
        "--max-tokens) or ask for less",
    )
    decision = decide_next_step(cut.model_copy(update={"max_tokens": 512}), spec=spec(max_tokens=512), continuations=0)
    assert isinstance(decision, FailRun)
    assert "(max_tokens=512, from AgentSpec.max_tokens)" in decision.message
    decision = decide_next_step(response("cut", finish="length"), spec=spec(), continuations=0)
    assert isinstance(decision, FailRun)
    assert "(the server's own: no max_tokens was sent); set AgentSpec.max_tokens" in decision.message


def test_content_filter_fails() -> None:
    decision = decide_next_step(response(finish="content_filter"), spec=spec(), continuations=0)
    assert isinstance(decision, FailRun) and decision.reason == "content_filter"


def test_other_finish_reasons_fail_with_the_raw_reason() -> None:
    decision = decide_next_step(response(finish="other", raw="pause_turn"), spec=spec(), continuations=0)
    assert decision == FailRun("error", "the model stopped for an unexpected reason (pause_turn)")


def test_verification_is_asked_once_when_allowed() -> None:
    s = spec(verify_before_completing=True, verification_prompt="Sure?")
    assert decide_next_step(response("a"), spec=s, continuations=0, may_verify=True) == Verify("Sure?")
    assert decide_next_step(response("a"), spec=s, continuations=0, may_verify=False) == FinalAnswer("a")


def test_no_verification_on_the_last_step_or_when_not_asked_for() -> None:
    s = spec(verify_before_completing=True)
    assert decide_next_step(response("a"), spec=s, continuations=0, may_verify=True, last_step=True) == FinalAnswer("a")
    assert decide_next_step(response("a"), spec=spec(), continuations=0, may_verify=True) == FinalAnswer("a")


# check_run_budget --------------------------------------------------------------------


def test_within_budget_reports_the_cost() -> None:
    s = agents.spec("openai:gpt-x", default_permission="auto", budget=Budget(
        cost_limit_usd=1.0, prices={"openai:gpt-x": ModelPrice(input_per_mtok=1, output_per_mtok=2)}))
    verdict = check_run_budget(Usage(input_tokens=1_000_000), s)
    assert verdict == WithinBudget(1.0)


def test_over_budget_names_the_limit() -> None:
    s = spec(budget=Budget(max_total_tokens=100))
    verdict = check_run_budget(Usage(input_tokens=80, output_tokens=30), s)
    assert isinstance(verdict, OverBudget) and "max_total_tokens" in verdict.message


# gate_call ---------------------------------------------------------------------------


def test_unknown_tool_is_a_failed_answer() -> None:
    decision = gate_call(tool_call("launch"), spec=spec(), tools=[READ], step=1, now=NOW)
    assert isinstance(decision, Answered) and decision.failed and decision.result.is_error
    assert decision.result.content.startswith("Unknown tool 'launch'. Available tools: read_file.")


def test_bad_arguments_are_a_failed_answer() -> None:
    call = ToolCallPart(id="c1", name="read_file", arguments={}, arguments_error="not JSON", raw_arguments="{oops")
    decision = gate_call(call, spec=spec(), tools=[READ], step=1, now=NOW)
    assert isinstance(decision, Answered) and decision.failed
    assert "Invalid arguments for tool 'read_file': not JSON" in decision.result.content


def test_read_only_tools_run_under_auto() -> None:
    decision = gate_call(tool_call(), spec=spec(), tools=[READ], step=1, now=NOW)
    assert isinstance(decision, Execute) and decision.permission is not None
    assert decision.permission.action == "allow"


def test_other_tools_ask_under_auto_with_an_expiry() -> None:
    decision = gate_call(tool_call("write_file"), spec=spec(approval_timeout_seconds=60), tools=[WRITE], step=3,
                         now=NOW)
    assert isinstance(decision, AskApproval)
    assert decision.approval.step == 3 and decision.approval.asked_at == NOW
    assert decision.approval.expires_at == NOW + timedelta(seconds=60)


def test_asking_without_a_timeout_never_expires() -> None:
    decision = gate_call(tool_call("write_file"), spec=spec(), tools=[WRITE], step=1, now=NOW)
    assert isinstance(decision, AskApproval) and decision.approval.expires_at is None


def test_a_deny_rule_answers_without_counting_a_failure() -> None:
    s = spec(permissions=[PermissionRule(tool="write_*", action="deny", reason="frozen")])
    decision = gate_call(tool_call("write_file"), spec=s, tools=[WRITE], step=1, now=NOW)
    assert isinstance(decision, Answered) and not decision.failed
    assert decision.result.content.startswith("The call to 'write_file' was denied: frozen.")


def test_an_allow_rule_runs() -> None:
    s = spec(permissions=[PermissionRule(tool="write_file", action="allow")])
    assert isinstance(gate_call(tool_call("write_file"), spec=s, tools=[WRITE], step=1, now=NOW), Execute)


def test_client_tools_await_the_client() -> None:
    s = spec(client_tools=[ToolDefinition(name="ask_user")])
    decision = gate_call(tool_call("ask_user"), spec=s, tools=[], step=2, now=NOW)
    assert isinstance(decision, AwaitClient)
    assert decision.action.reason == "client_tool" and decision.action.step == 2


def test_client_calls_with_bad_arguments_are_answered() -> None:
    s = spec(client_tools=[ToolDefinition(name="ask_user")])
    call = ToolCallPart(id="c1", name="ask_user", arguments={}, arguments_error="not JSON", raw_arguments="x")
    assert isinstance(gate_call(call, spec=s, tools=[], step=1, now=NOW), Answered)
    # Runs recorded before that rule sent them to the client anyway.
    old = gate_call(call, spec=s, tools=[], step=1, now=NOW, strict_client_arguments=False)
    assert isinstance(old, AwaitClient)


def test_runs_before_the_policy_execute_everything_known() -> None:
    s = spec(client_tools=[ToolDefinition(name="ask_user")])
    assert gate_call(tool_call("write_file"), spec=s, tools=[WRITE], step=1, now=NOW, hitl=False) == Execute()
    unknown = gate_call(tool_call("ask_user"), spec=s, tools=[WRITE], step=1, now=NOW, hitl=False)
    assert isinstance(unknown, Answered) and unknown.failed


# resolve_approval / resolve_output -----------------------------------------------------


def decision(**fields: object) -> ApprovalDecision:
    return ApprovalDecision(call_id="c1", **fields)


def test_approve_runs_the_call() -> None:
    r = resolve_approval(tool_call(), decision(by="ops"), spec=spec())
    assert r.label == "approve" and r.result is None and r.by == "ops"


def test_deny_answers_with_the_reason_or_a_default() -> None:
    r = resolve_approval(tool_call(), decision(decision="deny", reason="no"), spec=spec())
    assert r.label == "deny" and r.result is not None and r.result.is_error and "was denied: no." in r.result.content
    r = resolve_approval(tool_call(), decision(decision="deny"), spec=spec())
    assert "was denied: an operator denied it." in r.result.content


def test_skip_answers_with_the_result_or_a_note() -> None:
    r = resolve_approval(tool_call(), decision(decision="skip", result="42"), spec=spec())
    assert r.label == "skip" and r.result == ToolResultPart(id="c1", name="read_file", content="42")
    r = resolve_approval(tool_call(), decision(decision="skip"), spec=spec())
    assert r.result is not None and "skipped by the operator" in r.result.content


def test_an_override_is_cut_to_the_output_limit() -> None:
    r = resolve_approval(tool_call(), decision(result="x" * 1000), spec=spec(tool_output_limit=300))
    assert r.label == "override" and r.result is not None and not r.result.is_error
    assert "characters cut: the answer exceeded tool_output_limit" in r.result.content


def test_timeout_and_stop_answer_without_running() -> None:
    r = resolve_approval(tool_call(), None, spec=spec(approval_timeout_seconds=90), timed_out=True)
    assert r.label == "timeout" and "no decision within 90s (approval timeout)" in r.result.content
    r = resolve_approval(tool_call(), None, spec=spec())
    assert r.label == "stopped" and "did not run: the run was stopped" in r.result.content


def test_client_outputs_keep_their_error_flag_and_are_cut() -> None:
    out = resolve_output(tool_call(), ToolOutput(call_id="c1", output="y" * 500, is_error=True),
                         spec=spec(tool_output_limit=256))
    assert out.is_error and len(out.content) < 500
    stopped = resolve_output(tool_call(), None, spec=spec())
    assert stopped.is_error and "did not run" in stopped.content


def test_clip_output_keeps_head_and_tail() -> None:
    assert clip_output("short", 10) == "short"
    mark = "…[110 characters cut: the answer exceeded tool_output_limit]"
    clipped = clip_output("a" * 100 + "b" * 100, 90 + len(mark))
    assert clipped == "a" * 60 + mark + "b" * 30


# decide_after_tools ---------------------------------------------------------------------


def result(content: str = "ok", error: bool = False) -> ToolResultPart:
    return ToolResultPart(id="c1", name="read_file", content=content, is_error=error)


def test_failed_step_counting() -> None:
    assert count_failed_steps([True, True], 0) == 1
    assert count_failed_steps([True, True], 1) == 2
    assert count_failed_steps([True, False], 1) == 0
    assert count_failed_steps([], 1) == 0


def test_every_call_failed_fails_the_run_at_the_limit() -> None:
    after = decide_after_tools([result("boom", True)], spec=spec(), step=2, failed_tool_steps=1, stop_requested=True)
    assert after == FailRun("tool_error", "every tool call of step 2 failed (read_file: boom)")


def test_failures_under_the_limit_continue() -> None:
    s = spec(max_consecutive_failed_tool_steps=3)
    after = decide_after_tools([result("boom", True)], spec=s, step=1, failed_tool_steps=2, stop_requested=False)
    assert after == Continue()


def test_stop_ends_the_run_after_the_step() -> None:
    after = decide_after_tools([result()], spec=spec(max_steps=2), step=2, failed_tool_steps=0, stop_requested=True)
    assert after == Stopped()


def test_the_last_step_fails_with_max_steps() -> None:
    after = decide_after_tools([result()], spec=spec(max_steps=2), step=2, failed_tool_steps=0, stop_requested=False)
    assert isinstance(after, FailRun) and after.reason == "max_steps" and "all 2 steps" in after.message


def test_otherwise_continue() -> None:
    after = decide_after_tools([result()], spec=spec(max_steps=3), step=2, failed_tool_steps=0, stop_requested=False)
    assert after == Continue()


# continue_as_new_due ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("steps", "suggested", "every", "size", "expected"),
    [
        (0, True, 1, 10, NotDue()),  # nothing taken yet in this Temporal run
        (3, False, None, 10, NotDue()),  # never asked for
        (3, False, 5, 10, NotDue()),  # not yet
        (5, False, 5, 10, ContinueAsNew()),  # every N steps
        (1, True, None, 10, ContinueAsNew()),  # Temporal suggests it
        (5, True, 5, 2_000, TooLargeToCarry(2_000, 1_000)),  # would pass the payload limit
    ],
)
def test_continue_as_new_due(steps: int, suggested: bool, every: int | None, size: int, expected: object) -> None:
    verdict = continue_as_new_due(
        steps_this_run=steps, suggested=suggested, every=every, carry_bytes=lambda: size, limit_bytes=1_000
    )
    assert verdict == expected


def test_the_carry_is_measured_only_when_a_hand_over_is_due() -> None:
    def measured() -> int:
        raise AssertionError("measured though not due")

    assert continue_as_new_due(steps_this_run=1, suggested=False, every=5, carry_bytes=measured,
                               limit_bytes=1_000) == NotDue()


@pytest.mark.parametrize(
    ("sizes", "most", "budget", "kept"),
    [
        ([], 1000, 100, 0),  # nothing to carry
        ([10, 10, 10], 1000, 100, 3),  # all of them fit
        ([10, 10, 10], 2, 100, 2),  # at most ``most``, the newest
        ([50, 10, 30, 40], 1000, 75, 2),  # the newest that fit: 40 + 30
        ([10, 10, 500], 1000, 100, 0),  # the newest alone is too large: none, not older ones past it
        ([10, 10, 10], 0, 100, 0),
        ([30, 30], 1000, 60, 2),  # exactly the budget
    ],
)
def test_newest_within_keeps_the_newest_within_count_and_bytes(
    sizes: list[int], most: int, budget: int, kept: int
) -> None:
    assert newest_within(sizes, most=most, budget=budget) == kept


# The permission policy -------------------------------------------------------------------


def test_first_matching_rule_wins_with_its_reason() -> None:
    rules = [
        PermissionRule(tool="shell_command", action="deny", arguments={"command": r"rm .*"}, reason="no rm"),
        PermissionRule(tool="shell_*", action="allow"),
    ]
    rm = check_permission(tool_call("shell_command", command="rm -rf x"), rules=rules, default="ask", read_only=False)
    ls = check_permission(tool_call("shell_command", command="ls"), rules=rules, default="ask", read_only=False)
    assert (rm.action, rm.reason) == ("deny", "no rm")
    assert (ls.action, ls.reason) == ("allow", "permission rule 2 (shell_*: allow)")


def test_argument_patterns_match_in_full_and_need_the_argument() -> None:
    rule = PermissionRule(tool="*", action="allow", arguments={"command": "ls"})
    assert rule.matches(tool_call("x", command="ls"))
    assert not rule.matches(tool_call("x", command="ls; rm -rf /"))
    assert not rule.matches(tool_call("x"))


def test_non_text_arguments_match_as_json() -> None:
    rule = PermissionRule(tool="*", action="allow", arguments={"depth": "[12]", "opts": r'\{"a": 1\}'})
    assert rule.matches(tool_call("x", depth=2, opts={"a": 1}))
    assert not rule.matches(tool_call("x", depth=3, opts={"a": 1}))


def test_defaults_apply_when_no_rule_matches() -> None:
    for default, read_only, action in [("auto", True, "allow"), ("auto", False, "ask"), ("deny", True, "deny"),
                                       ("allow", False, "allow")]:
        check = check_permission(tool_call(), rules=[], default=default, read_only=read_only)
        assert check.action == action


def test_an_invalid_pattern_is_refused_when_the_rule_is_built() -> None:
    with pytest.raises(ValueError, match="not a valid regular expression"):
        PermissionRule(tool="x", action="allow", arguments={"command": "("})


# gate_calls and the carried gate form ---------------------------------------------------


def test_gate_calls_gates_each_call() -> None:
    s = spec(permissions=[PermissionRule(tool="write_file", action="deny", reason="no")])
    gates = gate_calls(RunTools([tool_call("read_file", "a"), tool_call("write_file", "b"), tool_call("x", "c")]),
                       spec=s, tools=[READ, WRITE], step=2, now=NOW)
    assert [decision_of(g).__class__ for g in gates] == [Execute, Answered, Answered]
    assert [g.call.id for g in gates] == ["a", "b", "c"]


def test_past_the_limit_every_call_goes_to_the_client() -> None:
    gates = gate_calls(RequireAction([tool_call("read_file", "a")]), spec=spec(), tools=[READ], step=4, now=NOW)
    assert gates[0].action is not None and gates[0].action.reason == "max_tool_call_continuations"
    assert gates[0].action.step == 4


@pytest.mark.parametrize(
    "decision",
    [
        Answered(ToolResultPart(id="c1", name="x", content="no", is_error=True), failed=True),
        Answered(ToolResultPart(id="c1", name="x", content="denied", is_error=True), failed=False,
                 permission=check_permission(tool_call(), rules=[], default="deny", read_only=False)),
        Execute(),
        Execute(check_permission(tool_call(), rules=[], default="allow", read_only=False)),
        AskApproval(
            gate_call(tool_call("write_file"), spec=spec(), tools=[WRITE], step=1, now=NOW).approval,
            check_permission(tool_call("write_file"), rules=[], default="auto", read_only=False),
        ),
        AwaitClient(pending_action(tool_call(), step=1, now=NOW, reason="client_tool")),
    ],
    ids=["unknown", "denied", "execute", "execute-allowed", "ask", "client"],
)
def test_a_carried_gate_holds_its_decision(decision: object) -> None:
    gate = gate_of(tool_call(), decision)
    assert decision_of(ToolGate.model_validate(gate.model_dump(mode="json"))) == decision


def test_missing_tools_say_what_to_register() -> None:
    message = missing_tools_message(["lookup_order"], ["read_file"])
    assert "lookup_order" in message and "Available: read_file" in message and "--import" in message


def test_bad_arguments_message_cuts_long_raw_arguments() -> None:
    from agentloop.shared.base.messages import ToolCallPart
    from agentloop.workflows.decisions.tool_messages import bad_arguments_message

    call = ToolCallPart(id="c1", name="read_file", raw_arguments="{" * 10_000, arguments_error="not valid JSON")
    message = bad_arguments_message(call)
    assert "…[9,5" in message and "characters cut]" in message and len(message) < 700
