"""Prices, cost and budget checks (pure)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentloop.shared.base.usage import Usage
from agentloop.shared.definition.pricing import (
    DEFAULT_PRICES,
    FREE,
    Budget,
    ModelPrice,
    check_budget,
    cost_of,
    lookup_price,
    price_for,
    run_cost,
    validate_budget,
)


def test_default_prices_are_sane() -> None:
    assert DEFAULT_PRICES
    for key, price in DEFAULT_PRICES.items():
        provider, _, name = key.partition(":")
        assert provider in ("openai", "anthropic") and name
        assert price.output_per_mtok >= price.input_per_mtok > 0
        assert price.cached_input_per_mtok is not None and price.cached_input_per_mtok < price.input_per_mtok


def test_exact_match() -> None:
    assert price_for("openai:gpt-4.1-mini") == DEFAULT_PRICES["openai:gpt-4.1-mini"]
    assert price_for("anthropic:claude-sonnet-4-5") == DEFAULT_PRICES["anthropic:claude-sonnet-4-5"]


@pytest.mark.parametrize(
    ("model", "key"),
    [
        ("openai:gpt-4.1-mini-2025-04-14", "openai:gpt-4.1-mini"),
        ("openai:gpt-4.1-2025-04-14", "openai:gpt-4.1"),
        ("openai:gpt-4o-mini-2024-07-18", "openai:gpt-4o-mini"),
        ("openai:gpt-4o-2024-08-06", "openai:gpt-4o"),
        ("anthropic:claude-sonnet-4-5-20250929", "anthropic:claude-sonnet-4-5"),
        ("anthropic:claude-opus-4-1-20250805", "anthropic:claude-opus-4-1"),
        ("anthropic:claude-opus-4-20250514", "anthropic:claude-opus-4"),
        ("anthropic:claude-3-5-haiku-latest", "anthropic:claude-3-5-haiku"),
        ("anthropic:claude-sonnet-4-5@20250929", "anthropic:claude-sonnet-4-5"),
    ],
)
def test_longest_prefix_with_snapshot_suffix(model: str, key: str) -> None:
    assert price_for(model) is DEFAULT_PRICES[key]


@pytest.mark.parametrize(
    "model",
    ["openai:o3-pro", "openai:gpt-5-pro", "openai:gpt-4o-audio-preview", "openai:llama3", "anthropic:claude-2"],
)
def test_other_models_are_unknown_not_mispriced(model: str) -> None:
    assert price_for(model) is None
    assert run_cost(Usage(input_tokens=10), model) is None


def test_scripted_models_are_free() -> None:
    assert price_for("scripted:anything") == FREE
    assert run_cost(Usage(input_tokens=10**6, output_tokens=10**6), "scripted:x") == 0


def test_budget_prices_override_and_extend() -> None:
    mine = ModelPrice(input_per_mtok=1, output_per_mtok=2)
    budget = Budget(prices={"openai:gpt-4.1": mine, "openai:llama3": mine, "scripted:paid": mine})
    assert price_for("openai:gpt-4.1", budget) is mine
    assert price_for("openai:gpt-4.1-2025-04-14", budget) is mine
    assert price_for("openai:gpt-4.1-mini", budget) is DEFAULT_PRICES["openai:gpt-4.1-mini"]
    assert price_for("openai:llama3", budget) is mine
    assert price_for("scripted:paid", budget) is mine
    assert price_for("openai:llama3", None) is None


def test_wildcard_keys_take_the_longest() -> None:
    broad = ModelPrice(input_per_mtok=1, output_per_mtok=1)
    narrow = ModelPrice(input_per_mtok=2, output_per_mtok=2)
    prices = {"openai:ft:*": broad, "openai:ft:gpt-4.1-mini*": narrow}
    assert lookup_price("openai:ft:gpt-4.1-mini-2025-04-14:org::abc", prices) is narrow
    assert lookup_price("openai:ft:gpt-4o:org::abc", prices) is broad
    assert lookup_price("openai:gpt-4o", prices) is None


def test_price_keys_are_validated() -> None:
    price = {"input_per_mtok": 1, "output_per_mtok": 1}
    for bad in ("gpt-4.1", ":gpt", "openai:", "openai:*"):
        with pytest.raises(ValidationError, match="provider:model"):
            Budget(prices={bad: price})
    with pytest.raises(ValidationError):
        ModelPrice(input_per_mtok=-1, output_per_mtok=1)
    with pytest.raises(ValidationError):
        Budget(cost_limit=1.0)
    with pytest.raises(ValidationError):
        Budget(cost_limit_usd=0)


def test_cost_of_bills_cached_input_at_cached_rate() -> None:
    price = ModelPrice(input_per_mtok=2.0, output_per_mtok=8.0, cached_input_per_mtok=0.5)
    usage = Usage(input_tokens=1_000_000, cached_input_tokens=400_000, output_tokens=250_000)
    assert cost_of(usage, price) == pytest.approx(0.6 * 2.0 + 0.4 * 0.5 + 0.25 * 8.0)
    no_cache_rate = ModelPrice(input_per_mtok=2.0, output_per_mtok=8.0)
    assert cost_of(usage, no_cache_rate) == pytest.approx(2.0 + 2.0)
    assert cost_of(Usage(), price) == 0
    # Cached tokens beyond the input (inconsistent report) are capped.
    assert cost_of(Usage(input_tokens=100, cached_input_tokens=500), price) == pytest.approx(100 * 0.5 / 1e6)


def test_run_cost_of_a_real_model() -> None:
    usage = Usage(input_tokens=10_000, cached_input_tokens=8_000, output_tokens=1_000)
    expected = (2_000 * 0.40 + 8_000 * 0.10 + 1_000 * 1.60) / 1e6
    assert run_cost(usage, "openai:gpt-4.1-mini-2025-04-14") == pytest.approx(expected)


def test_check_budget_within_limits() -> None:
    usage = Usage(input_tokens=100, output_tokens=50)
    assert check_budget(usage, 0.5, None) is None
    assert check_budget(usage, 0.5, Budget()) is None
    limits = Budget(cost_limit_usd=0.5, max_input_tokens=100, max_output_tokens=50, max_total_tokens=150)
    assert check_budget(usage, 0.5, limits) is None  # at the limit is within it


def test_check_budget_cost_message() -> None:
    message = check_budget(Usage(), 0.51234, Budget(cost_limit_usd=0.5))
    assert message == (
        "the run cost $0.5123, over AgentSpec.budget.cost_limit_usd=$0.50; raise the limit or narrow the task"
    )
    odd = check_budget(Usage(), 0.002, Budget(cost_limit_usd=0.0015))
    assert odd is not None and "cost_limit_usd=$0.0015" in odd
    # Unknown cost: the cost limit cannot be checked, token limits still are.
    assert check_budget(Usage(input_tokens=10**6), None, Budget(cost_limit_usd=0.01)) is None


@pytest.mark.parametrize(
    ("usage", "budget", "expected"),
    [
        (Usage(input_tokens=120_000), Budget(max_input_tokens=100_000),
         "the run used 120,000 input tokens, over AgentSpec.budget.max_input_tokens=100,000"),
        (Usage(output_tokens=5_001), Budget(max_output_tokens=5_000),
         "the run used 5,001 output tokens, over AgentSpec.budget.max_output_tokens=5,000"),
        (Usage(input_tokens=600, output_tokens=500), Budget(max_total_tokens=1_000),
         "the run used 1,100 tokens (input plus output), over AgentSpec.budget.max_total_tokens=1,000"),
    ],
)
def test_check_budget_token_messages(usage: Usage, budget: Budget, expected: str) -> None:
    assert check_budget(usage, 0.0, budget) == f"{expected}; raise the limit or narrow the task"


def test_check_budget_reports_cost_first() -> None:
    budget = Budget(cost_limit_usd=1.0, max_total_tokens=10)
    message = check_budget(Usage(input_tokens=100), 2.0, budget)
    assert message is not None and "cost_limit_usd" in message


def test_validate_budget() -> None:
    validate_budget("openai:llama3", None)
    validate_budget("openai:llama3", Budget(max_total_tokens=1000))
    validate_budget("openai:gpt-4.1-mini-2025-04-14", Budget(cost_limit_usd=1.0))
    validate_budget("scripted:x", Budget(cost_limit_usd=1.0))
    with pytest.raises(ValueError, match=r"price of 'openai:llama3' is unknown.*budget\.prices"):
        validate_budget("openai:llama3", Budget(cost_limit_usd=1.0))
    price = ModelPrice(input_per_mtok=0.1, output_per_mtok=0.2)
    validate_budget("openai:llama3", Budget(cost_limit_usd=1.0, prices={"openai:llama3": price}))


def test_budget_round_trips_json() -> None:
    budget = Budget(cost_limit_usd=2.5, prices={"openai:x": ModelPrice(input_per_mtok=1, output_per_mtok=2)})
    assert Budget.model_validate_json(budget.model_dump_json()) == budget
