"""A run's place in Temporal's queues: its priority and its tenant.

``AgentSpec.priority`` (1 runs first, 5 last) and the run's tenant become the
workflow's :class:`temporalio.common.Priority`: the priority as its
``priority_key``, the tenant as its ``fairness_key``. Temporal hands the same
Priority to every activity and child workflow the run starts (sub-agents,
thread turns, model and tool calls), so one tenant's backlog cannot starve
another's and a priority-1 run goes ahead of a backlog of priority-3 ones,
across every worker (docs/many-tenants.md). Pure functions: no I/O.
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel
from temporalio.common import Priority

from agentloop.shared.base.errors import UserError, checked

_T = TypeVar("_T", bound=BaseModel)
_V = TypeVar("_V")

#: Priority levels: 1 (first) to 5 (last), the Temporal server's default
#: range (``matching.priorityLevels``). A run without one gets the server's
#: default, the middle level (3).
HIGHEST_PRIORITY = 1
LOWEST_PRIORITY = 5

#: Most bytes of a tenant name (Temporal's limit on a fairness key).
MAX_TENANT_BYTES = 64

#: The fairness weights Temporal accepts (it clamps others to this range).
MIN_FAIRNESS_WEIGHT = 0.001
MAX_FAIRNESS_WEIGHT = 1000.0


def priority_problem(value: object) -> str | None:
    """Why ``value`` is not a run priority, or None when it is one (or None)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        return f"priority must be a whole number from {HIGHEST_PRIORITY} (first) to {LOWEST_PRIORITY} (last)"
    if not HIGHEST_PRIORITY <= value <= LOWEST_PRIORITY:
        return (f"priority {value} is out of range: use {HIGHEST_PRIORITY} (runs first) to "
                f"{LOWEST_PRIORITY} (runs last); leave it unset for the default, 3")
    return None


def tenant_problem(value: object) -> str | None:
    """Why ``value`` is not a tenant name, or None when it is one (or None).

    A tenant is a short name (at most 64 bytes of UTF-8) without spaces or
    control characters: it is a Temporal fairness key and a search attribute."""
    if value is None:
        return None
    if not isinstance(value, str):
        return "tenant must be a string"
    if not value:
        return "tenant must not be empty (leave it unset for runs of no tenant)"
    if len(value.encode()) > MAX_TENANT_BYTES:
        return f"tenant is {len(value.encode())} bytes long; the limit is {MAX_TENANT_BYTES} (a Temporal fairness key)"
    if any(ch.isspace() or not ch.isprintable() for ch in value):
        return "tenant must not contain spaces or control characters"
    return None


def fairness_weight_problem(value: object) -> str | None:
    """Why ``value`` is not a fairness weight, or None when it is one (or None)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "fairness weight must be a number"
    if not MIN_FAIRNESS_WEIGHT <= value <= MAX_FAIRNESS_WEIGHT:
        return f"fairness weight {value} is out of range: use {MIN_FAIRNESS_WEIGHT} to {MAX_FAIRNESS_WEIGHT:g}"
    return None


def run_priority(priority: int | None, tenant: str | None,
                 fairness_weight: float | None = None) -> Priority:
    """The Temporal Priority of a run of ``priority`` (``AgentSpec.priority``)
    for ``tenant``: ``Priority.default`` when all are None (the server's
    default level, no fairness key).

    The tenant is the fairness key: tasks of each tenant are dispatched in
    turn, in proportion to their weights. A weight set on the task queue
    (``temporal task-queue config set --fairness-key-weight``) overrides
    ``fairness_weight``.

    Raises:
        ValueError: A value is out of range (the message says which).
    """
    for problem in (priority_problem(priority), tenant_problem(tenant), fairness_weight_problem(fairness_weight)):
        if problem:
            raise ValueError(problem)
    if priority is None and tenant is None and fairness_weight is None:
        return Priority.default
    return Priority(priority_key=priority, fairness_key=tenant,
                    fairness_weight=float(fairness_weight) if fairness_weight is not None else None)


def with_tenant(input: _T, tenant: str | None) -> _T:
    """``input`` (a pydantic model with a ``tenant`` field: the run's input)
    for ``tenant``; ``input`` itself when ``tenant`` is None.

    Raises:
        UserError: ``tenant`` is not a tenant name (the message says why).
    """
    if tenant is None:
        return input
    problem = tenant_problem(tenant)
    if problem:
        raise UserError(f"{problem}: {tenant!r}" if isinstance(tenant, str) and len(tenant) <= 100 else problem)
    return input.model_copy(update={"tenant": tenant})


def checked_tenant(value: _V) -> _V:
    """``value`` when it is a tenant name or None (a field validator's body).

    Raises:
        ValueError: With :func:`tenant_problem`'s sentence.
    """
    return checked(value, tenant_problem)


def checked_priority(value: _V) -> _V:
    """``value`` when it is a run priority or None (a field validator's body).

    Raises:
        ValueError: With :func:`priority_problem`'s sentence.
    """
    return checked(value, priority_problem)
