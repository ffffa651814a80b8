"""Two runs aligned step by step (agentloop.shared.runs.diff, docs/diff.md),
and two specs compared field by field (agentloop.shared.definition.spec_diff):
pure functions on hand-made snapshots, no server; then the text the CLI
prints of them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from agentloop.cli.diff import render
from agentloop.shared.base.messages import Message, ToolCallPart, ToolResultPart
from agentloop.shared.base.usage import Usage
from agentloop.shared.definition.spec import AgentSpec
from agentloop.shared.definition.spec_diff import definition_diff
from agentloop.shared.runs.diff import Changed, OnlyA, OnlyB, Same, diff_runs, word_diff
from agentloop.shared.runs.report import AgentRunReport
from agentloop.shared.runs.snapshots import AgentSnapshot, load_snapshot

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def calling(*calls: tuple[str, dict[str, Any]], text: str = "", step: int = 0) -> Message:
    parts = [ToolCallPart(id=f"c{step}_{i}", name=name, arguments=args) for i, (name, args) in enumerate(calls)]
    return Message.assistant(text, parts)


def results(*contents: str, step: int = 0, error: bool = False) -> Message:
    return Message(role="tool", content=[ToolResultPart(id=f"c{step}_{i}", content=c, is_error=error)
                                         for i, c in enumerate(contents)])


def snap(run_id: str, messages: list[Message], *, prompt: str = "be brief", status: str = "completed",
         output: Any = None, steps: int | None = None, tokens: tuple[int, int] = (100, 10),
         cost: float | None = 0.001, **spec: Any) -> AgentSnapshot:
    assistant = [m for m in messages if m.role == "assistant"]
    report = AgentRunReport(
        id=run_id, model="scripted:x", started_at=T0, final_text=assistant[-1].text if assistant else "",
        output=output, step_count=len(assistant) if steps is None else steps,
        total_usage=Usage(input_tokens=tokens[0], output_tokens=tokens[1]), total_cost_usd=cost,
    )
    return AgentSnapshot(run_id=run_id, status=status, exported_at=T0,  # type: ignore[arg-type]
                         spec=AgentSpec(model="scripted:x", system_prompt=prompt, **spec),
                         messages=messages, input_count=1, report=report)


def order_run(run_id: str, tool: str = "lookup_order", answer: str = "Order 7 has shipped.",
              **kw: Any) -> AgentSnapshot:
    return snap(run_id, [Message.user("where is order 7?"), calling((tool, {"order_id": "7", "verbose": False})),
                         results("shipped"), Message.assistant(answer)], **kw)


def test_the_same_run_twice_is_all_same_rows_and_zero_deltas() -> None:
    diff = diff_runs(order_run("a"), order_run("b"))
    assert diff.changed == 0 and diff.same_tools and diff.definition.same
    assert [(r.type, r.part) for r in diff.rows] == [
        ("same", "input"), ("same", "tool_call"), ("same", "tool_result"), ("same", "message"), ("same", "output")]
    assert all(d.delta == 0 for d in diff.usage) and diff.notes == []
    # Arguments are canonical JSON: key order does not matter.
    assert diff.rows[1].text == 'lookup_order {"order_id": "7", "verbose": false}'  # type: ignore[union-attr]


def test_another_tool_and_answer_are_changed_rows_with_the_words_marked() -> None:
    a = order_run("a")
    b = order_run("b", tool="lookup_customer", answer="Order 7 has not shipped.", prompt="be very brief",
                  tokens=(150, 12), cost=0.0015)
    diff = diff_runs(a, b)
    call = diff.rows[1]
    assert isinstance(call, Changed) and call.part == "tool_call"
    assert (call.tool_a, call.tool_b, call.step_a, call.step_b) == ("lookup_order", "lookup_customer", 1, 1)
    answer = next(r for r in diff.rows if r.part == "message")
    assert isinstance(answer, Changed)
    assert [(s.op, s.text) for s in answer.words] == [
        ("same", "Order 7 has "), ("added", "not "), ("same", "shipped.")]
    assert not diff.same_tools and diff.changed == 3  # call, message, output
    assert not diff.definition.same and diff.definition.summary.prompt_changed
    assert [(f.part, f.field, f.a, f.b) for f in diff.definition.fields] == [
        ("prompt", "system_prompt", "be brief", "be very brief")]
    deltas = {d.name: d.delta for d in diff.usage}
    assert deltas["input_tokens"] == 50 and deltas["total_tokens"] == 52 and deltas["cost_usd"] == 0.0005
    text = "\n".join(render(diff))
    assert "agent definition changed" in text and "system prompt changed" in text
    assert "prompt system_prompt: be brief -> be very brief" in text
    assert "different tools: A lookup_order; B lookup_customer" in text
    assert "tool lookup_order -> lookup_customer: " in text
    assert "Order 7 has {+not +}shipped." in text and "\x1b[" not in text
    assert "\x1b[32mnot \x1b[0m" in "\n".join(render(diff, color=True))


def test_a_step_only_one_run_took_does_not_shift_the_steps_after_it() -> None:
    a = order_run("a")
    b = snap("b", [Message.user("where is order 7?"), calling(("search", {"q": "order 7"}), step=9),
                   results("found it", step=9), calling(("lookup_order", {"order_id": "7", "verbose": False})),
                   results("shipped"), Message.assistant("Order 7 has shipped.")])
    diff = diff_runs(a, b)
    kinds = [(r.type, r.part, r.step_a, r.step_b) for r in diff.rows]
    assert kinds == [
        ("same", "input", 0, 0),
        ("only_b", "tool_call", None, 1), ("only_b", "tool_result", None, 1),
        ("same", "tool_call", 1, 2), ("same", "tool_result", 1, 2),
        ("same", "message", 2, 3), ("same", "output", None, None)]
    assert {d.name: d.delta for d in diff.usage}["steps"] == 1
    assert "+ step ·|1" in "\n".join(render(diff))


def test_runs_of_different_lengths_and_a_run_still_going() -> None:
    going = snap("a", [Message.user("where is order 7?"), calling(("lookup_order", {"order_id": "7"}))],
                 status="awaiting_approval")
    done = order_run("b")
    diff = diff_runs(going, done)
    assert [(r.type, r.part) for r in diff.rows] == [
        ("same", "input"), ("changed", "tool_call"), ("changed", "tool_result"), ("only_b", "message"),
        ("changed", "output")]
    assert isinstance(diff.rows[2], Changed) and diff.rows[2].a == "(no result yet)"
    assert isinstance(diff.rows[-1], Changed) and diff.rows[-1].a == ""
    assert diff.notes == ["run A (a) is still going (awaiting_approval): compared on the steps it has taken so far"]
    reverse = diff_runs(done, going)
    assert any(isinstance(r, OnlyA) and r.part == "message" for r in reverse.rows)


def test_a_compacted_run_is_compared_on_what_it_holds_and_says_so() -> None:
    compacted = snap("a", [Message.user("where is order 7?"), Message.user("Summary: order 7 looked up, shipped."),
                           Message.assistant("Order 7 has shipped.")], steps=3)
    diff = diff_runs(compacted, order_run("b"))
    assert any(n.startswith("run A (a) took 3 steps but its conversation holds 1: the other 2 were compacted")
               for n in diff.notes)
    assert isinstance(diff.rows[1], OnlyA) and diff.rows[1].part == "user"
    assert diff.rows[-1].type == "same"  # the outputs agree


def test_thread_turns_are_steps_of_their_own_and_typed_outputs_are_compared_as_json() -> None:
    turns = [Message.user("hi"), Message.assistant("hello"), Message.user("order 7?"), Message.assistant("shipped")]
    a = snap("a", turns, output={"status": "shipped", "id": 7})
    b = snap("b", turns[:3] + [Message.assistant("lost")], output={"id": 7, "status": "lost"})
    diff = diff_runs(a, b)
    assert [(r.type, r.part) for r in diff.rows] == [
        ("same", "input"), ("same", "message"), ("same", "user"), ("changed", "message"), ("changed", "output")]
    out = diff.rows[-1]
    assert isinstance(out, Changed) and out.a == '{"id": 7, "status": "shipped"}'
    assert [s.op for s in out.words] == ["same", "removed", "added", "same"]


def test_the_diff_round_trips_through_json_as_a_tagged_union() -> None:
    diff = diff_runs(order_run("a"), order_run("b", tool="lookup_customer"))
    again = type(diff).model_validate_json(diff.model_dump_json())
    assert again == diff and {type(r) for r in again.rows} == {Same, Changed}
    assert load_snapshot(order_run("a").to_json()).run_id == "a"


def test_word_diff_and_definition_diff_by_part() -> None:
    assert word_diff("", "") == [] and [s.op for s in word_diff("a b", "a c")] == ["same", "removed", "added"]
    changed = definition_diff(AgentSpec(model="openai:gpt-4o", tools=["read_file"], max_steps=5, name="x"),
                              AgentSpec(model="openai:gpt-4o-mini", tools=["read_file", "grep_files"], name="y"))
    assert [(f.part, f.field) for f in changed.fields] == [("model", "model"), ("tools", "tools"),
                                                            ("limits", "max_steps")]
    assert changed.summary.tools_added == ["grep_files"] and changed.summary.model == ("openai:gpt-4o",
                                                                                       "openai:gpt-4o-mini")
    # The name is not part of the definition.
    assert definition_diff(AgentSpec(model="scripted:x", name="a"), AgentSpec(model="scripted:x", name="b")).same
    assert OnlyB(part="user", text="x").type == "only_b"
