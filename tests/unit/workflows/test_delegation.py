"""The sub-agent decisions (agentloop.workflows.decisions.delegation), without a server."""

from __future__ import annotations

import pytest

from agentloop import AgentSpec
from agentloop.shared.base.messages import Message, ToolCallPart
from agentloop.shared.base.usage import Usage
from agentloop.shared.definition.pricing import Budget, ModelPrice
from agentloop.shared.definition.spec import SubAgent, deepest_path, depth_problem
from agentloop.shared.runs.run import AgentRunInput, SubRunLink
from agentloop.workflows.decisions.budgets import OverBudget, WithinBudget, check_run_budget
from agentloop.workflows.decisions.delegation import (
    BadTask,
    ChildCompleted,
    ChildFailed,
    Task,
    child_budget,
    child_messages,
    child_run_id,
    delegation_result,
    input_problem,
    sub_agent_tools,
    task_of,
    waiting_on,
)


def sub(model: str = "scripted:demo", **kw) -> SubAgent:
    history = kw.pop("history", "none")
    return SubAgent(spec=AgentSpec(model=model, **kw), description="d", history=history)


def test_one_tool_per_sub_agent_taking_a_task() -> None:
    spec = AgentSpec(model="scripted:demo",
                     sub_agents={"researcher": sub(), "writer": SubAgent(spec=AgentSpec(model="scripted:demo"))})
    tools = sub_agent_tools(spec)
    assert [t.name for t in tools] == ["researcher", "writer"]
    assert tools[0].description == "d" and tools[1].description == "Delegate a task to the writer sub-agent."
    assert tools[0].parameters["properties"]["task"]["type"] == "string" and tools[0].read_only


def test_child_ids_are_derived_from_the_parent_and_the_call() -> None:
    assert child_run_id("run-1", "call_0_0") == "run-1-sub-call_0_0"
    assert child_run_id("run-1", "x" * 500) == "run-1-sub-" + "x" * 128


def test_the_task_argument() -> None:
    assert task_of(ToolCallPart(id="c", name="r", arguments={"task": "go"})) == Task("go")
    bad = task_of(ToolCallPart(id="c", name="r", arguments={"query": "go"}))
    assert isinstance(bad, BadTask) and "needs one argument, task" in bad.message and "['query']" in bad.message
    assert isinstance(task_of(ToolCallPart(id="c", name="r", arguments={"task": "  "})), BadTask)


def test_fork_copies_the_conversation_without_the_delegating_message() -> None:
    delegating = Message(role="assistant", content=[ToolCallPart(id="c", name="r", arguments={"task": "t"})])
    conversation = [Message.user("hello"), Message(role="assistant", content=[]), delegating]
    assert [m.text for m in child_messages(sub(), conversation, "t")] == ["t"]
    forked = child_messages(sub(history="fork"), conversation, "t")
    assert forked[:2] == conversation[:2] and forked[2].text == "t" and len(forked) == 3
    assert conversation[-1] is delegating  # the parent's list is untouched


def test_a_child_starts_with_what_remains_of_the_budget() -> None:
    price = ModelPrice(input_per_mtok=1, output_per_mtok=1)
    parent = AgentSpec(model="scripted:lead", budget=Budget(cost_limit_usd=1.0, max_total_tokens=1000,
                                                            prices={"scripted:x*": price}))
    used = Usage(input_tokens=300, output_tokens=100)
    child = AgentSpec(model="scripted:x", budget=Budget(max_total_tokens=100, max_input_tokens=50))
    budget = child_budget(parent, used, 0.25, child)
    assert budget.cost_limit_usd == 0.75
    assert budget.max_total_tokens == 100  # the child's own limit is lower
    assert budget.max_input_tokens == 50 and budget.max_output_tokens is None
    assert budget.prices == {"scripted:x*": price}
    assert child_budget(parent, used, 0.25, AgentSpec(model="scripted:x")).max_total_tokens == 600
    # Nothing left: the child still gets a valid (tiny) budget, and ends at its first step.
    assert child_budget(parent, Usage(input_tokens=2000), 2.0, AgentSpec(model="scripted:x")).max_total_tokens == 1


def test_the_tree_budget_counts_children_at_their_own_price() -> None:
    spec = AgentSpec(model="scripted:lead", budget=Budget(cost_limit_usd=1.0, prices={
        "scripted:lead": ModelPrice(input_per_mtok=1_000_000, output_per_mtok=0)}))
    own, children = Usage(input_tokens=0), Usage(input_tokens=10)
    # Ten child tokens priced at the lead's price would be $10; the child said $0.5.
    verdict = check_run_budget(own + children, spec, sub_usage=children, sub_cost_usd=0.5)
    assert verdict == WithinBudget(0.5)
    assert isinstance(check_run_budget(own + children, spec, sub_usage=children, sub_cost_usd=1.5), OverBudget)
    assert check_run_budget(own + children, spec, sub_usage=children, sub_cost_usd=None).cost_usd is None


def test_what_the_delegating_model_sees() -> None:
    c = ToolCallPart(id="c", name="researcher", arguments={"task": "t"})
    assert delegation_result(c, "r-1", ChildCompleted("completed", "42")).content == "42"
    stopped = delegation_result(c, "r-1", ChildCompleted("stopped", "half", "stopped by request"))
    assert not stopped.is_error and "was stopped before it finished: stopped by request" in stopped.content
    failed = delegation_result(c, "r-1", ChildFailed("failed", "max_steps", "out of steps"))
    assert failed.is_error
    assert failed.content == "The sub-agent 'researcher' (run r-1) did not finish: max_steps: out of steps"
    assert waiting_on({"a": ("researcher", "r-1"), "b": ("writer", "r-2")}) == (
        "waiting on researcher (run r-1), writer (run r-2)")


def test_depth() -> None:
    leaf = AgentSpec(model="scripted:demo", name="leaf")
    mid = AgentSpec(model="scripted:demo", name="mid", sub_agents={"leaf": SubAgent(spec=leaf)})
    top = AgentSpec(model="scripted:demo", name="top", sub_agents={"mid": SubAgent(spec=mid)}, max_depth=2)
    assert deepest_path(top) == ["top", "mid", "leaf"]
    assert depth_problem(top) is None
    assert "past max_depth=1" in depth_problem(top, max_depth=1)
    # A sub-agent's run keeps the top agent's limit.
    link = SubRunLink(parent_run_id="p", root_run_id="p", name="mid", call_id="c", depth=2, max_depth=2)
    with pytest.raises(ValueError, match="nest 3 levels deep .* below a run at depth 2"):
        AgentRunInput(spec=mid, messages=[Message.user("x")], parent=link)


def test_a_child_input_over_the_payload_limit_is_refused_with_a_sentence() -> None:
    spec = AgentSpec(model="scripted:demo")
    small = AgentRunInput(spec=spec, messages=[Message.user("task")])
    assert input_problem("critic", small) is None
    forked = AgentRunInput(spec=spec, messages=[Message.user("x" * 2_000_000), Message.user("task")])
    assert input_problem("critic", forked) == (
        "The sub-agent 'critic' cannot start: its input (a forked copy of the conversation) is 2.0 MB, over the "
        "1.5 MB a run starts with. Give it a shorter task, or declare it with history \"none\".")


def test_a_sub_agents_workspace_lies_inside_its_parents() -> None:
    from agentloop.workflows.decisions.delegation import child_workspace

    assert child_workspace("/w/a", None) == "/w/a"  # none named: the parent's
    assert child_workspace(None, "/w/b") == "/w/b"  # the parent has the worker's: the worker checks the child's
    assert child_workspace(None, None) is None
    assert child_workspace("/w/a", "/w/a/sub") == "/w/a/sub"
    assert child_workspace("/w/a", "/w/a") == "/w/a"
    for wider in ("/w", "/", "/w/ab", "/w/a/../b", "/w/a/sub/../../x"):
        with pytest.raises(ValueError, match=f"its workspace {wider} is not inside its parent's workspace /w/a"):
            child_workspace("/w/a", wider)
    with pytest.raises(ValueError, match="not both absolute paths"):
        child_workspace("/w/a", "sub")
    assert child_workspace(".", "sub/x") == "sub/x"
    with pytest.raises(ValueError, match="not inside its parent's"):
        child_workspace(".", "../x")
