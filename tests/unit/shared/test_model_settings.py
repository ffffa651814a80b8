"""tool_choice and thinking: the spec's checks (each provider's mapping and
runs: tests/server/loop/test_model_settings.py)."""


from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentloop import AgentSpec
from agentloop.shared.base.model_settings import tool_choice_problem


def test_spec_refuses_bad_settings_with_a_sentence() -> None:
    with pytest.raises(ValidationError, match="tool_choice 'call it!' is neither 'auto', 'required', 'none' nor"):
        AgentSpec(model="scripted:demo", tool_choice="call it!")
    with pytest.raises(ValidationError, match="thinking needs an effort"):
        AgentSpec(model="scripted:demo", thinking={})
    with pytest.raises(ValidationError, match="thinking and temperature cannot be set together"):
        AgentSpec(model="openai:o4-mini", thinking={"effort": "low"}, temperature=0.2)
    with pytest.raises(ValidationError, match="extended thinking takes tool_choice 'auto' or 'none' only"):
        AgentSpec(model="anthropic:claude-x", thinking={"budget_tokens": 2048}, tool_choice="required")
    spec = AgentSpec(model="openai:o4-mini", thinking={"effort": "low"}, tool_choice="required")
    assert spec.tool_choice == "required"


def test_tool_choice_is_checked_against_the_runs_tools() -> None:
    assert tool_choice_problem("auto", []) is None and tool_choice_problem("none", []) is None
    assert tool_choice_problem("list_dir", ["list_dir", "read_file"]) is None
    assert "no tools for the model to call" in tool_choice_problem("required", [])
    assert tool_choice_problem("lst_dir", ["read_file", "list_dir"]) == (
        "tool_choice names 'lst_dir', which is not one of the run's tools (list_dir, read_file); name one of them, "
        "or use 'auto', 'required' or 'none'")
