"""AgentSpec refuses unknown keys, and a misspelt one names the field meant."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentloop import AgentSpec
from agentloop.shared.errors import describe_validation_error


def refusal(**fields: object) -> str:
    with pytest.raises(ValidationError) as caught:
        AgentSpec(model="scripted:demo", **fields)
    return describe_validation_error(caught.value)


def test_a_misspelt_key_suggests_the_field() -> None:
    assert refusal(max_step=5) == "max_step: Extra inputs are not permitted; did you mean max_steps?"
    with pytest.raises(ValidationError, match="did you mean max_steps"):
        AgentSpec.model_validate({"model": "scripted:demo", "max_step": 5})


def test_a_misspelt_key_of_a_sub_agent_suggests_the_field() -> None:
    text = refusal(sub_agents={"helper": {"spec": {"model": "scripted:demo", "sytem_prompt": "x"}}})
    assert text == "sub_agents.helper.spec.sytem_prompt: Extra inputs are not permitted; did you mean system_prompt?"


def test_a_key_like_no_field_is_refused_as_before() -> None:
    assert refusal(zzzz=1) == "zzzz: Extra inputs are not permitted"


def test_other_problems_are_kept_beside_the_suggestion() -> None:
    text = refusal(max_step=5, max_depth=0)
    assert "max_step: Extra inputs are not permitted; did you mean max_steps?" in text
    assert "max_depth: Input should be greater than or equal to 1" in text
