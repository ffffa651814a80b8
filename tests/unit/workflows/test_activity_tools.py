"""Temporal activities as tools without a server: schemas from signatures and
the spec's checks (runs: tests/server/tools/test_activity_tools.py)."""


from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentloop import AgentSpec, activity_as_tool
from agentloop.shared.definition.activity_tools import (
    ActivityTool,
    activity_arguments,
    call_idempotency_key,
    result_text,
)
from tests.helpers.fixtures.activity_tool_worker import charge_card


def test_activity_as_tool_takes_the_schema_from_the_signature() -> None:
    tool = activity_as_tool(charge_card, task_queue="payments")
    assert (tool.name, tool.activity, tool.description) == ("charge_card", "charge_card", "Charge an account.")
    assert tool.arguments == ["account", "amount_cents", "idempotency_key", "currency"]
    assert tool.parameters["required"] == ["account", "amount_cents"]
    assert set(tool.parameters["properties"]) == {"account", "amount_cents", "currency"}  # no key
    assert tool.parameters["properties"]["currency"]["default"] == "EUR"
    assert tool.parameters["properties"]["account"]["description"] == 'The account id, e.g. "acct-1".'
    with pytest.raises(ValueError, match="is not a named @activity.defn function"):
        activity_as_tool(lambda: None, task_queue="q")


def test_arguments_by_position_and_as_one_object() -> None:
    tool = activity_as_tool(charge_card, task_queue="q")
    assert activity_arguments(tool, {"account": "a", "amount_cents": 5}, "K") == ["a", 5, "K", "EUR"]
    assert activity_arguments(tool, {"account": "a"}, "K").startswith(
        "Invalid arguments for tool 'charge_card': amount_cents is required.")
    assert activity_arguments(tool, {"account": "a", "amount_cents": 5, "x": 1}, "K").startswith(
        "Invalid arguments for tool 'charge_card': unexpected x.")
    lookup = ActivityTool(name="lookup", activity="Lookup", task_queue="go")
    assert activity_arguments(lookup, {"account": "a"}, "K") == [{"account": "a", "idempotency_key": "K"}]
    quiet = ActivityTool(name="lookup", activity="Lookup", task_queue="go", idempotency_key=None)
    assert activity_arguments(quiet, {"account": "a"}, "K") == [{"account": "a"}]
    assert call_idempotency_key("run", "r1", 3, "c9") == "run/r1/3/c9"
    assert result_text({"a": 1}) == '{"a": 1}' and result_text(None) == "" and result_text("x") == "x"


def test_the_spec_refuses_clashing_names() -> None:
    tool = ActivityTool(name="lookup", activity="Lookup", task_queue="go")
    with pytest.raises(ValidationError, match="lookup is both an activity tool"):
        AgentSpec(model="scripted:demo", tools=["lookup"], activity_tools=[tool])
    with pytest.raises(ValidationError, match="activity_tools declares lookup more than once"):
        AgentSpec(model="scripted:demo", activity_tools=[tool, tool])
    with pytest.raises(ValidationError, match="activity tool name 'a b' is not allowed"):
        ActivityTool(name="a b", activity="x", task_queue="q")


def test_schema_problems_are_short_and_the_schema_itself_is_checked() -> None:
    from agentloop.shared.definition.activity_tools import argument_problems

    tool = activity_as_tool(charge_card, task_queue="q")
    assert argument_problems(tool, {"account": "a", "amount_cents": 5}) is None
    problem = argument_problems(tool, {"account": "a", "amount_cents": "x" * 100_000, "extra": 1})
    assert problem is not None and len(problem) < 1_000
    assert "Additional properties are not allowed ('extra' was unexpected)" in problem
    lots = ActivityTool(name="t", activity="t", task_queue="q", parameters={
        "type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(8)}})
    problem = argument_problems(lots, {f"p{i}": "no" for i in range(8)})
    assert problem is not None and "; and 3 more." in problem
    with pytest.raises(ValidationError, match="parameters is not a valid JSON schema at properties/a/type"):
        ActivityTool(name="t", activity="t", task_queue="q",
                     parameters={"type": "object", "properties": {"a": {"type": "integr"}}})
    with pytest.raises(ValidationError, match="parameters must be a JSON schema of type 'object'"):
        ActivityTool(name="t", activity="t", task_queue="q", parameters={"type": "string"})
