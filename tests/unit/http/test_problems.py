"""422 problem documents name fields as the caller wrote them."""

from __future__ import annotations

from typing import Any

from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from agentloop.server.problems import validation_problem
from agentloop.server.runs import StartRun


def problem_for(body: dict[str, Any]) -> dict[str, Any]:
    try:
        StartRun.model_validate(body)
    except ValidationError as err:
        located = [{**e, "loc": ("body", *e["loc"])} for e in err.errors()]
        return validation_problem(RequestValidationError(located)).body()
    raise AssertionError(f"{body} is valid")


def test_a_misspelt_spec_field_is_named_as_written() -> None:
    problem = problem_for({"spec": {"model": "scripted:demo", "tool": ["read_file"]}, "input": "hi"})
    assert problem["errors"] == [
        {"field": "spec.tool", "reason": "Extra inputs are not permitted; did you mean tools?"}]
    assert problem["detail"] == ("the request is not valid: spec.tool: Extra inputs are not permitted; "
                                 "did you mean tools?")


def test_nested_fields_keep_their_path_and_the_name_branch_is_left_out() -> None:
    problem = problem_for({"spec": {"model": "scripted:demo", "permissions": [{"tool": "a", "action": "maybe"}]},
                           "input": "hi"})
    assert [e["field"] for e in problem["errors"]] == ["spec.permissions.0.action"]


def test_a_spec_that_is_neither_a_name_nor_an_object_is_one_field() -> None:
    problem = problem_for({"spec": 7, "input": "hi"})
    assert {e["field"] for e in problem["errors"]} == {"spec"}
