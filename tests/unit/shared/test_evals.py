"""The pure parts of evals: tool answers by policy, recorded decisions,
cases from snapshots and dataset lines, checks, totals, the JUnit XML."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agentloop.shared.base.errors import UserError
from agentloop.shared.base.messages import Message, ToolCallPart, ToolResultPart
from agentloop.shared.definition.spec import AgentSpec
from agentloop.shared.evals.cases import EvalCase, RecordedStats, case_from_snapshot, dataset_line, read_dataset
from agentloop.shared.evals.checks import (
    Candidate,
    Contains,
    CostWithin,
    JsonSchema,
    OutputEquals,
    Regex,
    SameTools,
    StepsWithin,
    parse_check,
    score,
)
from agentloop.shared.evals.output import junit_xml, report_table
from agentloop.shared.evals.report import EvalReport, outcome_of, percentile, totals_of
from agentloop.shared.runs.eval_tools import (
    EvalPlan,
    FromRecording,
    RecordedCall,
    RecordedDecision,
    Refused,
    RunLive,
    eval_approval,
    eval_tool_answer,
)
from agentloop.shared.runs.report import AgentRunReport, StepReport, ToolCallReport
from agentloop.shared.runs.snapshots import AgentSnapshot


def tool_call(name: str, **arguments) -> ToolCallPart:
    return ToolCallPart(id="c1", name=name, arguments=arguments)


PLAN = EvalPlan(eval_id="e", case_id="c", recorded=[
    RecordedCall(tool="lookup", arguments={"q": "a", "n": 1}, content="first"),
    RecordedCall(tool="lookup", arguments={"n": 1, "q": "a"}, content="second"),
])


def test_a_recorded_call_answers_once_matching_canonical_arguments() -> None:
    answer = eval_tool_answer(tool_call("lookup", n=1, q="a"), PLAN, used=set(), read_only=True)
    assert isinstance(answer, FromRecording) and (answer.index, answer.result.content) == (0, "first")
    again = eval_tool_answer(tool_call("lookup", q="a", n=1), PLAN, used={0}, read_only=True)
    assert isinstance(again, FromRecording) and again.result.content == "second"
    # Both used: the fallback (refuse by default) names the policy.
    spent = eval_tool_answer(tool_call("lookup", q="a", n=1), PLAN, used={0, 1}, read_only=True)
    assert isinstance(spent, Refused) and spent.result.is_error
    assert "eval tool policy 'recorded, then refuse'" in spent.result.content


@pytest.mark.parametrize(("policy", "read_only", "expected"), [
    ("live", False, RunLive), ("live-read-only", True, RunLive), ("live-read-only", False, Refused),
    ("refuse", True, Refused),
])
def test_the_policies(policy: str, read_only: bool, expected: type) -> None:
    plan = PLAN.model_copy(update={"policy": policy})
    answer = eval_tool_answer(tool_call("lookup", q="a", n=1), plan, used=set(), read_only=read_only)
    assert isinstance(answer, expected)
    if isinstance(answer, Refused):
        assert f"eval tool policy '{policy}'" in answer.result.content


def test_a_tool_s_own_policy_and_the_live_fallback() -> None:
    plan = PLAN.model_copy(update={"tools": {"write": "refuse"}, "fallback": "live-read-only"})
    assert isinstance(eval_tool_answer(tool_call("write"), plan, used=set(), read_only=False), Refused)
    assert isinstance(eval_tool_answer(tool_call("lookup", q="b"), plan, used=set(), read_only=True), RunLive)
    assert isinstance(eval_tool_answer(tool_call("other"), plan, used=set(), read_only=False), Refused)


def test_an_approval_is_the_recorded_decision_when_one_matches() -> None:
    plan = PLAN.model_copy(update={"decisions": [RecordedDecision(tool="write", arguments={"p": 1}, decision="deny",
                                                                  reason="no")]})
    decision = eval_approval(tool_call("write", p=1), plan)
    assert decision is not None and (decision.decision, decision.reason, decision.call_id) == ("deny", "no", "c1")
    assert eval_approval(tool_call("write", p=2), plan) is None


def snapshot() -> AgentSnapshot:
    calls = [ToolCallPart(id="a", name="lookup", arguments={"q": "x"}),
             ToolCallPart(id="b", name="write", arguments={"p": 1})]
    report = AgentRunReport(id="run-1", model="scripted:x", started_at=datetime(2026, 1, 1, tzinfo=UTC),
                            final_text="done", step_count=2, total_cost_usd=0.5, steps=[StepReport(
                                index=1, type="initial", tool_calls=[
                                    ToolCallReport(call_id="b", tool_name="write", arguments={"p": 1},
                                                   decision="override")])])
    return AgentSnapshot(run_id="run/1", status="completed", exported_at=datetime(2026, 1, 1, tzinfo=UTC),
                         spec=AgentSpec(model="scripted:x"), input_count=1, report=report, messages=[
                             Message.user("go"), Message.assistant("", calls),
                             Message(role="tool", content=[ToolResultPart(id="a", name="lookup", content="X"),
                                                           ToolResultPart(id="b", name="write", content="ok")]),
                             Message.assistant("done")])


def test_a_case_from_a_snapshot_and_back_through_a_dataset_line() -> None:
    case = case_from_snapshot(snapshot())
    assert case.id == "run-1" and case.recorded_run_id == "run/1"
    assert [m.text for m in case.input] == ["go"] and case.tools == ["lookup", "write"]
    assert [(c.tool, c.content) for c in case.recorded_calls] == [("lookup", "X"), ("write", "ok")]
    assert [(d.tool, d.decision) for d in case.decisions] == [("write", "approve")]
    assert case.recorded == RecordedStats(cost_usd=0.5, tokens=0, steps=2) and case.expected_text == "done"
    assert read_dataset([dataset_line(case)]) == [case]


def thread_snapshot() -> AgentSnapshot:
    """A thread of three turns: the second looked something up, the third is running."""
    from agentloop.shared.base.usage import Usage
    from agentloop.shared.runs.threads import TurnResult

    looked = Message.assistant("", [ToolCallPart(id="t2", name="lookup", arguments={"q": "b"})])
    messages = [Message.user("one"), Message.assistant("first"),
                Message.user("two"), looked,
                Message(role="tool", content=[ToolResultPart(id="t2", name="lookup", content="B")]),
                Message.assistant("second"), Message.user("three")]
    turns = [TurnResult(turn=1, status="completed", final_text="first", steps=1, first_message=0, end_message=2),
             TurnResult(turn=2, status="completed", final_text="second", steps=2, first_message=2, end_message=6,
                        usage=Usage(input_tokens=10, output_tokens=5)),
             TurnResult(turn=3, first_message=6)]
    return AgentSnapshot(run_id="th/1", thread_id="th/1", turn=3, status="running", exported_at=datetime.now(UTC),
                         spec=AgentSpec(model="scripted:x"), input_count=1, messages=messages,
                         report=AgentRunReport(id="th/1", model="scripted:x", started_at=datetime.now(UTC)),
                         turns=turns)


def test_a_case_at_a_threads_later_turn_starts_with_the_messages_before_it() -> None:
    from agentloop.shared.evals.cases import case_at_turn, cases_from_snapshot

    snap = thread_snapshot()
    second = case_at_turn(snap, 2)
    assert (second.id, second.turn, second.recorded_run_id) == ("th-1.turn-2", 2, "th/1")
    assert [m.text for m in second.messages] == ["one", "first"] and [m.text for m in second.input] == ["two"]
    assert second.tools == ["lookup"] and [c.content for c in second.recorded_calls] == ["B"]
    assert second.expected_text == "second" and second.recorded == RecordedStats(cost_usd=0.0, tokens=15, steps=2)
    first = case_at_turn(snap, 1)
    assert first.messages == [] and [m.text for m in first.input] == ["one"] and first.tools == []
    # Every completed turn (the running one is not a case); a dataset line keeps the earlier messages.
    assert [c.turn for c in cases_from_snapshot(snap)] == [1, 2]
    assert read_dataset([dataset_line(second)]) == [second]
    with pytest.raises(UserError, match="thread th/1, turn 3 is running: only a completed turn is a case"):
        case_at_turn(snap, 3)
    with pytest.raises(UserError, match=r"thread th/1 holds no turn 9 \(turns kept: 1, 2, 3\)"):
        cases_from_snapshot(snap, 9)
    moved = snap.model_copy(update={"messages": snap.messages[1:]})
    with pytest.raises(UserError, match="turn 2: its messages are no longer in the thread's conversation"):
        case_at_turn(moved, 2)
    # A run is one case; it has no turn 2. A thread's snapshot without turns (before 1.1): its first turn.
    assert [c.turn for c in cases_from_snapshot(snapshot())] == [None]
    with pytest.raises(UserError, match="is not a thread"):
        cases_from_snapshot(snapshot(), 2)
    old = snap.model_copy(update={"turns": []})
    assert [(c.id, [m.text for m in c.input]) for c in cases_from_snapshot(old)] == [("th-1", ["one"])]


def test_a_case_runs_tally_stands_in_for_its_omitted_steps() -> None:
    from agentloop.shared.base.usage import Usage
    from agentloop.shared.evals.report import candidate_of
    from agentloop.shared.runs.eval_tools import EvalTally, tally_of
    from agentloop.shared.runs.result import AgentRunResult

    calls = [ToolCallReport(call_id="a", tool_name="lookup", eval_answer="recorded"),
             ToolCallReport(call_id="b", tool_name="write", eval_answer="refused")]
    assert tally_of(calls) == EvalTally(tools=["lookup", "write"], recorded=1, refused=1)
    report = AgentRunReport(id="r", model="scripted:x", started_at=datetime.now(UTC), step_count=2)
    result = AgentRunResult(run_id="r", status="completed", reason="done", usage=Usage(), report=report,
                            report_steps_omitted=True, eval_tally=tally_of(calls))
    got = candidate_of("r", result)
    assert (got.tools, got.recorded, got.live, got.refused, got.steps) == (["lookup", "write"], 1, 0, 1, 2)
    # A case run of an earlier version has no tally: its report's steps count.
    full = report.model_copy(update={"steps": [StepReport(index=0, type="initial", tool_calls=calls)]})
    older = candidate_of("r", result.model_copy(update={"eval_tally": None, "report": full}))
    assert (older.tools, older.recorded, older.refused) == (["lookup", "write"], 1, 1)


def test_a_dataset_line_may_be_short_and_name_its_checks_and_bad_lines_are_sentences() -> None:
    (case,) = read_dataset(['# a comment', '', '{"id": "greet", "input": "hi", "checks": [{"kind": "contains", '
                            '"text": "hello"}]}'])
    assert case.input[0].text == "hi" and case.checks == [Contains(text="hello")]
    with pytest.raises(UserError, match="suite.jsonl, line 1: not JSON"):
        read_dataset(["{"], source="suite.jsonl")
    with pytest.raises(UserError, match="line 2: not an eval case"):
        read_dataset(['{"id": "a", "input": "x"}', '{"input": "x"}'])
    assert EvalCase.model_json_schema()["required"] == ["id", "input"]


CASE = EvalCase(id="c", input="q", expected_text="the answer", expected_output={"a": {"b": 1}, "c": 2},
                tools=["x", "y"], recorded=RecordedStats(cost_usd=1.0, tokens=100, steps=2))
GOT = Candidate(run_id="r", status="completed", final_text='{"n": 3} the answer', output={"a": {"b": 1}, "c": 3},
                tools=["y", "x", "x"], cost_usd=1.2, tokens=90, steps=5)


def test_the_pure_checks() -> None:
    assert score(OutputEquals(field="a.b"), CASE, GOT).passed
    miss = score(OutputEquals(), CASE, GOT)
    assert not miss.passed and miss.reason.startswith('expected {"a": {"b": 1}, "c": 2}, got')
    assert score(Contains(text="answer"), CASE, GOT).passed
    assert score(Regex(pattern=r"\bn\b"), CASE, GOT).passed
    assert "bad pattern" in score(Regex(pattern="("), CASE, GOT).reason
    assert score(JsonSchema(schema={"type": "object", "required": ["a"]}), CASE, GOT).passed
    assert "not valid" in score(JsonSchema(schema={"type": "array"}), CASE, GOT).reason
    assert score(SameTools(), CASE, GOT).passed
    order = score(SameTools(order=True), CASE, GOT)
    assert not order.passed and order.reason == "expected calls ['x', 'y'], got ['y', 'x', 'x']"
    assert score(CostWithin(factor=1.5), CASE, GOT).passed
    steps = score(StepsWithin(factor=2), CASE, GOT)
    assert not steps.passed and steps.reason == "steps 5 is over 2 x recorded 2"


def test_checks_from_the_command_line() -> None:
    assert parse_check("same_tools:order") == SameTools(order=True)
    assert parse_check("judge:openai:gpt-4.1:Is it polite?").model == "openai:gpt-4.1"
    assert parse_check('{"kind": "regex", "pattern": "x"}') == Regex(pattern="x")
    with pytest.raises(ValueError, match="unknown check 'nope'"):
        parse_check("nope")


def test_outcomes_totals_table_and_junit() -> None:
    passed = outcome_of(CASE, GOT.model_copy(update={"steps": 2}), [score(SameTools(), CASE, GOT)])
    failed = outcome_of(CASE.model_copy(update={"id": "d"}), GOT.model_copy(update={"status": "failed",
                        "error": "boom"}), [score(SameTools(order=True), CASE, GOT)])
    assert passed.passed and not failed.passed
    assert failed.reasons[0] == "the run failed: boom" and failed.reasons[1].startswith("same_tools(order): ")
    totals = totals_of([passed, failed])
    assert (totals.passed, totals.pass_rate, totals.steps.p50, totals.steps.recorded_p95) == (1, 0.5, 2, 2)
    assert percentile([], 50) is None and percentile([1, 2, 3, 4], 95) == 4
    report = EvalReport(eval_id="e", cases=[passed, failed], totals=totals)
    assert "1/2 passed (50%)" in report_table(report)
    xml = junit_xml(report)
    assert '<testcase classname="e" name="d"><properties>' in xml and 'type="EvalCaseFailed"' in xml


def test_a_threads_turn_by_id_and_an_eval_runs_approvals_never_wait() -> None:
    from agentloop.client.evals import run_and_turn
    from agentloop.shared.definition.approvals import PendingApproval, ToolGate
    from agentloop.shared.runs.eval_tools import gates_that_wait

    assert run_and_turn("run-1") == ("run-1", None) and run_and_turn("support~42~3") == ("support~42", 3)
    for bad in ("th~0", "th~x", "~3"):
        with pytest.raises(UserError, match="give RUN or THREAD~TURN"):
            run_and_turn(bad)
    asked = ToolGate(call=tool_call("write"), approval=PendingApproval(call_id="c1", tool_name="write", step=1,
                                                                         asked_at=datetime.now(UTC)))
    plain = ToolGate(call=tool_call("lookup"))
    assert gates_that_wait([asked, plain], eval_run=False) == [asked, plain]
    waiting = gates_that_wait([asked, plain], eval_run=True)
    assert [g.approval for g in waiting] == [None, None] and waiting[0].call == asked.call


def test_a_judge_reads_the_conversation_before_a_later_turn() -> None:
    from agentloop.activities.evals import judge_text
    from agentloop.shared.evals.report import EvalScoreInput

    got = Candidate(run_id="r", status="completed", final_text="new answer")
    case = EvalCase(id="t", input="third?", messages=[Message.user("first?"), Message.assistant("one")],
                    expected_text="old answer")
    text = judge_text(EvalScoreInput(case=case, candidate=got, checks=[]))
    assert text.startswith("Conversation before the input:\nuser: first?\nassistant: one\n\nInput:\nthird?")
    assert text.endswith("Recorded answer:\nold answer\n\nAnswer to grade:\nnew answer")
    assert judge_text(EvalScoreInput(case=CASE, candidate=got, checks=[])).startswith("Input:\nq")
