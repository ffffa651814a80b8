"""Whether the run's budget is spent and whether to continue as new: pure
decisions the workflow matches on (no I/O, clocks or randomness)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agentloop.shared.base.usage import Usage
from agentloop.shared.definition.pricing import check_budget, run_cost
from agentloop.shared.definition.spec import AgentSpec

# Budget ------------------------------------------------------------------------------


@dataclass(frozen=True)
class WithinBudget:
    """The run may go on. ``cost_usd`` is what it has cost so far (None when
    the model's price is unknown)."""

    cost_usd: float | None


@dataclass(frozen=True)
class OverBudget:
    """A limit of ``AgentSpec.budget`` is passed: the run fails (``cost_limit``)."""

    cost_usd: float | None
    message: str


BudgetVerdict = WithinBudget | OverBudget


def check_run_budget(
    usage: Usage, spec: AgentSpec, *, sub_usage: Usage | None = None, sub_cost_usd: float | None = 0.0
) -> BudgetVerdict:
    """The run's totals against ``spec.budget`` (checked after each LLM step,
    and after each step that delegated to sub-agents, so a run may overshoot
    by one step's usage).

    Args:
        usage: The run's usage, its sub-agents' included.
        spec: The agent.
        sub_usage: The part of ``usage`` its sub-agents used.
        sub_cost_usd: What they cost, each at its own model's price (None
            when one's price is unknown: the cost is then unknown too).
    """
    cost = run_cost(usage - sub_usage if sub_usage is not None else usage, spec.model, spec.budget)
    if sub_usage is not None and cost is not None:
        cost = None if sub_cost_usd is None else cost + sub_cost_usd
    over = check_budget(usage, cost, spec.budget)
    return OverBudget(cost, over) if over is not None else WithinBudget(cost)


# Continue-as-new --------------------------------------------------------------------------


@dataclass(frozen=True)
class ContinueAsNew:
    """Hand the run over to a new Temporal run now."""


@dataclass(frozen=True)
class NotDue:
    """Go on in this Temporal run."""


@dataclass(frozen=True)
class TooLargeToCarry:
    """Due, but what the next run's input must carry (the conversation, and
    the report) would pass Temporal's payload limit: go on in this run (and
    warn, once)."""

    size: int
    limit: int


CarryVerdict = ContinueAsNew | NotDue | TooLargeToCarry


def continue_as_new_due(
    *,
    steps_this_run: int,
    suggested: bool,
    every: int | None,
    carry_bytes: Callable[[], int],
    limit_bytes: int,
) -> CarryVerdict:
    """Whether to hand over now: Temporal suggests it, or this Temporal run
    has taken ``every`` steps (count the step under way when it waits for
    people). A run hands over at most once per step taken.

    Args:
        steps_this_run: Steps taken in this Temporal run.
        suggested: Temporal suggests continuing as new (history is large).
        every: ``AgentSpec.continue_as_new_every_steps``.
        carry_bytes: The size as JSON of what the next run's input must
            carry (the conversation, and the report), asked only when a
            hand-over is due.
        limit_bytes: The most the next run's input may carry of them.
    """
    if steps_this_run == 0:
        return NotDue()
    if not (suggested or (every is not None and steps_this_run >= every)):
        return NotDue()
    size = carry_bytes()
    if size > limit_bytes:
        return TooLargeToCarry(size, limit_bytes)
    return ContinueAsNew()


def newest_within(sizes: Sequence[int], *, most: int, budget: int) -> int:
    """How many of the newest items (the event stream's events, the
    report's steps) a hand-over carries to the next Temporal run: at most
    ``most``, and no more than fit in ``budget`` bytes (an event may hold a
    whole tool output or message, and the next run's input must stay under
    Temporal's payload limit).

    Args:
        sizes: Each item's size as carried, oldest first.
        most: The most items carried.
        budget: The most bytes they may take together.
    """
    kept, total = 0, 0
    for size in reversed(sizes[-most:] if most > 0 else []):
        if total + size > budget:
            break
        kept, total = kept + 1, total + size
    return kept
