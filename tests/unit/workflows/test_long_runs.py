"""Long runs without a server: the budget's price check and cutting long
strings (the runs: tests/server/loop/test_long_runs.py)."""


from __future__ import annotations

import pytest

from agentloop import (
    AgentSpec,
)
from agentloop.shared.definition.pricing import Budget
from agentloop.shared.runs.report import REPORT_TEXT_LIMIT, cut_strings, report_text


def test_cost_limit_needs_a_known_price() -> None:
    with pytest.raises(ValueError, match="budget"):
        AgentSpec(model="openai:some-unpriced-model", budget=Budget(cost_limit_usd=1))


def test_cut_strings_cuts_every_long_string_and_nothing_else() -> None:
    limit = REPORT_TEXT_LIMIT
    values = {"path": "a.txt", "content": "x" * (limit + 1), "n": 3,
              "nested": {"lines": ["short", "y" * 50_000], "flag": True}}
    kept, cut = cut_strings(values)
    assert cut and kept["path"] == "a.txt" and kept["n"] == 3 and kept["nested"]["flag"] is True
    assert kept["nested"]["lines"][0] == "short"
    for text in (kept["content"], kept["nested"]["lines"][1]):
        assert len(text) <= limit and "characters cut]" in text
    assert values["content"] == "x" * (limit + 1)  # the call's own arguments are not touched
    small = {"content": "x" * limit, "list": [1, 2, 3]}
    assert cut_strings(small) == (small, False) and cut_strings(small)[0] is small
    assert report_text("y" * 10) == "y" * 10 and len(report_text("y" * 10_000)) <= limit
