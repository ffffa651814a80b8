"""Model prices, run cost and budgets (a cost limit ends a run).

Pure and deterministic, so workflow code may call it after every LLM step.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentloop.shared.base.usage import Usage


class ModelPrice(BaseModel):
    """What a model costs, in USD per million tokens.

    Attributes:
        input_per_mtok: Input (prompt) tokens not served from cache.
        output_per_mtok: Output (completion) tokens, reasoning included.
        cached_input_per_mtok: Input tokens read from the provider's prompt
            cache; None bills them at ``input_per_mtok``.
    """

    model_config = ConfigDict(extra="forbid")

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)
    cached_input_per_mtok: float | None = Field(default=None, ge=0)


def _price(input_: float, cached: float, output: float) -> ModelPrice:
    return ModelPrice(input_per_mtok=input_, output_per_mtok=output, cached_input_per_mtok=cached)


#: List prices, by ``provider:model``, as of this code's writing (late 2025):
#: (input, cached input, output) USD per million tokens. Prices change, and
#: batch, priority, regional and long-context (over 200k tokens) rates
#: differ: set ``AgentSpec.budget.prices`` to correct or add any model.
#: Anthropic bills cache writes at 1.25x the input rate; :class:`Usage` does
#: not tell them apart, so they count at the input rate.
DEFAULT_PRICES: dict[str, ModelPrice] = {
    # OpenAI
    "openai:gpt-5": _price(1.25, 0.125, 10.00),
    "openai:gpt-5-mini": _price(0.25, 0.025, 2.00),
    "openai:gpt-5-nano": _price(0.05, 0.005, 0.40),
    "openai:gpt-4.1": _price(2.00, 0.50, 8.00),
    "openai:gpt-4.1-mini": _price(0.40, 0.10, 1.60),
    "openai:gpt-4.1-nano": _price(0.10, 0.025, 0.40),
    "openai:gpt-4o": _price(2.50, 1.25, 10.00),
    "openai:gpt-4o-mini": _price(0.15, 0.075, 0.60),
    "openai:o3": _price(2.00, 0.50, 8.00),
    "openai:o4-mini": _price(1.10, 0.275, 4.40),
    # Anthropic
    "anthropic:claude-opus-4-5": _price(5.00, 0.50, 25.00),
    "anthropic:claude-opus-4-1": _price(15.00, 1.50, 75.00),
    "anthropic:claude-opus-4-0": _price(15.00, 1.50, 75.00),
    "anthropic:claude-opus-4": _price(15.00, 1.50, 75.00),
    "anthropic:claude-sonnet-4-5": _price(3.00, 0.30, 15.00),
    "anthropic:claude-sonnet-4-0": _price(3.00, 0.30, 15.00),
    "anthropic:claude-sonnet-4": _price(3.00, 0.30, 15.00),
    "anthropic:claude-3-7-sonnet": _price(3.00, 0.30, 15.00),
    "anthropic:claude-haiku-4-5": _price(1.00, 0.10, 5.00),
    "anthropic:claude-3-5-haiku": _price(0.80, 0.08, 4.00),
}

#: What a ``scripted:`` model costs: nothing.
FREE = ModelPrice(input_per_mtok=0, output_per_mtok=0, cached_input_per_mtok=0)

# What may follow a known model name for a snapshot of the same model at the
# same price: a date (``-20250929``, ``-2025-04-14``, Vertex's ``@20250929``)
# or ``-latest``. Anything else (``o3`` -> ``o3-pro``, ``gpt-5`` ->
# ``gpt-5-pro``) is a different model, often at a very different price, and
# stays unknown rather than silently mispriced.
_SNAPSHOT_SUFFIX = re.compile(r"[-@](\d{8}|\d{4}-\d{2}-\d{2}|latest)")


def lookup_price(model: str, prices: dict[str, ModelPrice]) -> ModelPrice | None:
    """The price of ``model`` in ``prices``, or None.

    An exact key wins; otherwise the longest key that ``model`` extends by a
    snapshot suffix (``openai:gpt-4.1-mini-2025-04-14`` finds
    ``openai:gpt-4.1-mini``), or the longest key ending in ``*`` whose text
    before the ``*`` starts ``model`` (``openai:ft:gpt-4.1-mini*`` covers
    every fine-tune of it).
    """
    if model in prices:
        return prices[model]
    best: str | None = None
    for key in prices:
        if key.endswith("*"):
            matches = model.startswith(key[:-1])
        else:
            matches = model.startswith(key) and _SNAPSHOT_SUFFIX.fullmatch(model[len(key) :]) is not None
        if matches and (best is None or len(key) > len(best)):
            best = key
    return None if best is None else prices[best]


def _check_price_key(key: str) -> str:
    provider, sep, name = key.partition(":")
    if not sep or not provider or not name or name == "*":
        raise ValueError(
            f"price key {key!r} must be 'provider:model' (e.g. 'openai:gpt-4.1-mini'), "
            "optionally ending in '*' to cover every model starting with it"
        )
    return key


class Budget(BaseModel):
    """Limits on what one run may spend; the run fails with reason
    ``cost_limit`` once it goes over one.

    Limits are checked after each LLM step, so a run can overshoot by one
    step's usage.

    Attributes:
        cost_limit_usd: Most a run may cost, in USD, from the model's price
            (see ``prices``). Setting it for a model whose price is unknown
            is a configuration error.
        max_input_tokens: Most input tokens over all the run's LLM calls.
        max_output_tokens: Most output tokens over all the run's LLM calls.
        max_total_tokens: Most input plus output tokens.
        prices: Prices by ``provider:model`` that override or add to the
            built-in list prices (:data:`DEFAULT_PRICES`); a key may end in
            ``*`` to cover every model starting with it.
    """

    model_config = ConfigDict(extra="forbid")

    cost_limit_usd: float | None = Field(default=None, gt=0)
    max_input_tokens: int | None = Field(default=None, ge=1)
    max_output_tokens: int | None = Field(default=None, ge=1)
    max_total_tokens: int | None = Field(default=None, ge=1)
    prices: dict[str, ModelPrice] = Field(default_factory=dict)

    @field_validator("prices")
    @classmethod
    def _check_prices(cls, value: dict[str, ModelPrice]) -> dict[str, ModelPrice]:
        for key in value:
            _check_price_key(key)
        return value


def price_for(model: str, budget: Budget | None = None) -> ModelPrice | None:
    """The price of ``model`` (``provider:model``), or None when unknown
    (the run's cost is then not computed).

    ``budget.prices`` is searched first, then :data:`DEFAULT_PRICES`, each
    as :func:`lookup_price` does; a ``scripted:`` model not priced there is
    free.
    """
    if budget is not None and budget.prices:
        price = lookup_price(model, budget.prices)
        if price is not None:
            return price
    price = lookup_price(model, DEFAULT_PRICES)
    if price is None and model.startswith("scripted:"):
        return FREE
    return price


def validate_budget(model: str, budget: Budget | None) -> None:
    """Check at spec validation that ``budget`` can be enforced for ``model``.

    Raises:
        ValueError: A cost limit is set but the model's price is unknown, so
            the run's cost could not be computed; the message says how to fix it.
    """
    if budget is None or budget.cost_limit_usd is None or price_for(model, budget) is not None:
        return
    raise ValueError(
        f"budget.cost_limit_usd is set but the price of {model!r} is unknown, so the run's cost "
        f"cannot be computed; add it to budget.prices, e.g. "
        f"prices={{{model!r}: {{'input_per_mtok': 1.0, 'output_per_mtok': 4.0, "
        "'cached_input_per_mtok': 0.25}} (USD per million tokens), or remove cost_limit_usd "
        "and limit tokens with max_total_tokens instead"
    )


def cost_of(usage: Usage, price: ModelPrice) -> float:
    """The cost of ``usage`` in USD: cached input tokens at the cached rate,
    the rest of the input at the input rate, output at the output rate."""
    cached = min(max(usage.cached_input_tokens, 0), usage.input_tokens)
    uncached = usage.input_tokens - cached
    cached_rate = price.input_per_mtok if price.cached_input_per_mtok is None else price.cached_input_per_mtok
    return (
        uncached * price.input_per_mtok + cached * cached_rate + usage.output_tokens * price.output_per_mtok
    ) / 1_000_000


def run_cost(usage: Usage, model: str, budget: Budget | None = None) -> float | None:
    """The cost of ``usage`` with ``model``, or None when its price is unknown."""
    price = price_for(model, budget)
    return None if price is None else cost_of(usage, price)


def _usd(amount: float) -> str:
    return f"${amount:,.2f}" if round(amount, 2) == amount else f"${amount:,.4f}"


def check_budget(usage: Usage, cost_usd: float | None, budget: Budget | None) -> str | None:
    """None while the run is within ``budget``, else why not.

    Args:
        usage: The run's total usage so far.
        cost_usd: The run's cost so far, or None when unknown (the cost
            limit is then not checked; :func:`validate_budget` prevents that
            when a cost limit is set).
        budget: The limits; None means none.

    Returns:
        A message naming the limit, the value reached and how to raise it,
        for the first limit exceeded (cost, then input, output and total
        tokens), or None.
    """
    if budget is None:
        return None
    fix = "raise the limit or narrow the task"
    if budget.cost_limit_usd is not None and cost_usd is not None and cost_usd > budget.cost_limit_usd:
        return (
            f"the run cost ${cost_usd:,.4f}, over AgentSpec.budget.cost_limit_usd="
            f"{_usd(budget.cost_limit_usd)}; {fix}"
        )
    token_limits = (
        ("input tokens", usage.input_tokens, "max_input_tokens", budget.max_input_tokens),
        ("output tokens", usage.output_tokens, "max_output_tokens", budget.max_output_tokens),
        ("tokens (input plus output)", usage.total_tokens, "max_total_tokens", budget.max_total_tokens),
    )
    for what, used, field, limit in token_limits:
        if limit is not None and used > limit:
            return f"the run used {used:,} {what}, over AgentSpec.budget.{field}={limit:,}; {fix}"
    return None
