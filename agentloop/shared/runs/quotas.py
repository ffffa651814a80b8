"""Spend quotas per tenant: the ledger's data and its pure decisions.

A tenant's ledger is one long-lived workflow, ``agentloop-quota-<tenant>``
(:data:`QUOTA_WORKFLOW_NAME`). It holds the tenant's limits (tokens and/or
US dollars per window) and what the window has spent. A run of the tenant
reserves budget from it in chunks (update ``reserve``), reports what it used
each time it asks again, and gives back what it did not use when it ends
(signal ``release``, sent by the run's workflow itself). Every function here is pure: the ledger workflow and the
run dispatch on what they return.

Windows are fixed and aligned on the epoch (a ``1d`` window turns at
00:00 UTC), so every worker computes the same window from the same clock.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from pydantic import BaseModel, Field

#: The ledger's workflow type.
QUOTA_WORKFLOW_NAME = "AgentQuotaLedger"
#: The ledger's workflow id is this prefix and the tenant.
QUOTA_WORKFLOW_PREFIX = "agentloop-quota-"
#: Updates and query of the ledger.
RESERVE_UPDATE = "reserve"
RELEASE_UPDATE = "release"  # a signal: runs send it from their workflow
SET_LIMITS_UPDATE = "set_limits"
QUOTA_QUERY = "quota"
#: The activity a run reserves and releases through.
QUOTA_ACTIVITY = "quota_ledger"

#: A chunk is at most this share of the window's limit, so that many runs share it.
CHUNK_SHARE = 0.05
#: The ledger continues as new after this many updates.
UPDATES_PER_RUN = 1000
#: What a run does at the limit: wait for the window to turn, or fail (``quota_exceeded``).
QuotaPolicy = Literal["wait", "fail"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def ledger_id(tenant: str) -> str:
    """The workflow id of ``tenant``'s ledger."""
    return QUOTA_WORKFLOW_PREFIX + tenant


def parse_window(text: str) -> float:
    """Seconds in a window written ``30s``, ``5m``, ``1h``, ``1d`` or ``1w``.

    Raises:
        ValueError: With a sentence saying what is wrong.
    """
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text)
    if match is None or float(match.group(1)) <= 0:
        raise ValueError(f"window {text!r} is not a positive duration such as 2s, 5m, 1h, 1d or 1w")
    return float(match.group(1)) * _UNITS[match.group(2)]


class Amount(BaseModel):
    """Tokens and US dollars; None in a unit the quota does not limit."""

    tokens: int | None = None
    usd: float | None = None


class QuotaLimits(BaseModel):
    """A tenant's limits: ``tokens`` and/or ``usd`` per ``window_seconds``.

    Attributes:
        tokens: Most tokens (input plus output) per window; None: no limit.
        usd: Most US dollars per window, at the runs' prices; None: no limit.
        window_seconds: The window's length.
        at_limit: What a run does when the window is spent: ``wait`` for the
            next window (status ``waiting_for_quota``), or ``fail``
            (reason ``quota_exceeded``).
        chunk_tokens: How many tokens a run reserves at a time (None:
            :data:`CHUNK_SHARE` of ``tokens``).
        chunk_usd: How many dollars a run reserves at a time (None:
            :data:`CHUNK_SHARE` of ``usd``).
    """

    tokens: int | None = Field(default=None, gt=0)
    usd: float | None = Field(default=None, gt=0)
    window_seconds: float = Field(default=86400.0, gt=0)
    at_limit: QuotaPolicy = "wait"
    chunk_tokens: int | None = Field(default=None, gt=0)
    chunk_usd: float | None = Field(default=None, gt=0)

    @property
    def limited(self) -> bool:
        return self.tokens is not None or self.usd is not None


class Holding(BaseModel):
    """A run's reservation in the ledger: what it may still spend (``left``),
    the last request it made (``seq``) and the answer to it (for a retried request)."""

    left: Amount = Field(default_factory=Amount)
    seq: int = 0
    last_seen: datetime
    answer: QuotaAnswer | None = None


class LedgerState(BaseModel):
    """A tenant's ledger, carried across continue-as-new.

    Attributes:
        tenant: Whose ledger.
        limits: The limits; None until set.
        window_start: The window the spend counts in.
        spent: What runs reported using in the window.
        holders: Runs holding a reservation, by run id.
        total_spent: Everything reported since the ledger began.
        updates: Updates taken since the ledger began.
    """

    tenant: str
    limits: QuotaLimits | None = None
    window_start: datetime | None = None
    spent: Amount = Field(default_factory=lambda: Amount(tokens=0, usd=0.0))
    holders: dict[str, Holding] = Field(default_factory=dict)
    total_spent: Amount = Field(default_factory=lambda: Amount(tokens=0, usd=0.0))
    updates: int = 0


class ReserveRequest(BaseModel):
    """A run asks for its next chunk.

    Attributes:
        run_id: The run.
        seq: Its request number (1, 2, ...): a request the ledger has answered is answered again, not twice.
        used: What it used since its last request (0 at the first).
        want: At most this much (what its own budget leaves); None in a unit: no cap.
    """

    run_id: str = Field(min_length=1)
    seq: int = Field(ge=1)
    used: Amount = Field(default_factory=Amount)
    want: Amount = Field(default_factory=Amount)


class ReleaseRequest(BaseModel):
    """A run ends: what it used since its last request; the rest of its reservation goes back."""

    run_id: str = Field(min_length=1)
    used: Amount = Field(default_factory=Amount)


class QuotaAnswer(BaseModel):
    """The ledger's answer to a reservation.

    Attributes:
        kind: ``granted``; ``wait`` (until ``until``); ``denied``
            (the policy is ``fail``); ``unlimited`` (no limit set: the run asks no more).
        left: What the run may spend before it asks again (None in a unit not limited).
        until: When the window turns (``wait`` and ``denied``).
        message: A sentence for the run's events and error.
    """

    kind: Literal["granted", "wait", "denied", "unlimited"]
    left: Amount = Field(default_factory=Amount)
    until: datetime | None = None
    message: str = ""


class QuotaCall(BaseModel):
    """The quota activity's input: a reservation or a release for ``tenant``."""

    tenant: str
    reserve: ReserveRequest | None = None
    release: ReleaseRequest | None = None


class QuotaView(BaseModel):
    """What ``agentloop quota show`` prints: the ledger and its window."""

    tenant: str
    limits: QuotaLimits | None = None
    window_start: datetime | None = None
    window_end: datetime | None = None
    spent: Amount = Field(default_factory=Amount)
    reserved: Amount = Field(default_factory=Amount)
    holders: dict[str, Amount] = Field(default_factory=dict)
    total_spent: Amount = Field(default_factory=Amount)


Holding.model_rebuild()


# Windows ----------------------------------------------------------------------------------


def window_of(now: datetime, seconds: float) -> tuple[datetime, datetime]:
    """The window ``now`` falls in: fixed windows of ``seconds`` from the epoch."""
    ts = now.timestamp()
    start = math.floor(ts / seconds) * seconds
    return datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(start + seconds, UTC)


def roll_window(state: LedgerState, now: datetime) -> LedgerState:
    """``state`` in the window of ``now``: a new window starts with nothing
    spent; reservations of runs not heard from since the window before are
    dropped (a run that was killed or cancelled gives nothing back)."""
    if state.limits is None:
        return state
    start, _ = window_of(now, state.limits.window_seconds)
    if state.window_start == start:
        return state
    stale = start - timedelta(seconds=state.limits.window_seconds)
    holders = {k: h for k, h in state.holders.items() if h.last_seen >= stale}
    return state.model_copy(update={"window_start": start, "spent": Amount(tokens=0, usd=0.0), "holders": holders})


# Amount arithmetic --------------------------------------------------------------------------


def _add(a: Amount, b: Amount) -> Amount:
    return Amount(tokens=(a.tokens or 0) + (b.tokens or 0), usd=(a.usd or 0.0) + (b.usd or 0.0))


def _less(left: Amount, used: Amount, limits: QuotaLimits) -> Amount:
    """``left`` minus ``used``, not below 0, in the limited units."""
    return Amount(
        tokens=max(0, (left.tokens or 0) - (used.tokens or 0)) if limits.tokens is not None else None,
        usd=max(0.0, (left.usd or 0.0) - (used.usd or 0.0)) if limits.usd is not None else None,
    )


def reserved(state: LedgerState) -> Amount:
    """What the runs hold, together."""
    total = Amount(tokens=0, usd=0.0)
    for holding in state.holders.values():
        total = _add(total, holding.left)
    return total


# Decisions --------------------------------------------------------------------------------


def chunk_size(limits: QuotaLimits, remaining: Amount, want: Amount) -> Amount:
    """The next chunk: the limits' chunk, else a share of the window's limit (:data:`CHUNK_SHARE`),
    no more than the window has left nor than the run's own budget leaves
    (``want``). At least one token (or cent) while any remains."""
    tokens = usd = None
    if limits.tokens is not None:
        tokens = limits.chunk_tokens or max(1, math.ceil(limits.tokens * CHUNK_SHARE))
        tokens = min(tokens, remaining.tokens or 0, want.tokens if want.tokens is not None else tokens)
    if limits.usd is not None:
        usd = limits.chunk_usd or max(0.01, limits.usd * CHUNK_SHARE)
        usd = min(usd, remaining.usd or 0.0, want.usd if want.usd is not None else usd)
    return Amount(tokens=tokens, usd=usd)


def _remaining(state: LedgerState, limits: QuotaLimits) -> Amount:
    held = reserved(state)
    return Amount(
        tokens=limits.tokens - (state.spent.tokens or 0) - (held.tokens or 0) if limits.tokens is not None else None,
        usd=limits.usd - (state.spent.usd or 0.0) - (held.usd or 0.0) if limits.usd is not None else None,
    )


def _exhausted(remaining: Amount) -> bool:
    return (remaining.tokens is not None and remaining.tokens <= 0) or (
        remaining.usd is not None and remaining.usd <= 1e-9)


def _spend(state: LedgerState, used: Amount) -> LedgerState:
    return state.model_copy(update={"spent": _add(state.spent, used), "total_spent": _add(state.total_spent, used)})


def decide_reserve(state: LedgerState, request: ReserveRequest, now: datetime) -> tuple[LedgerState, QuotaAnswer]:
    """The ledger's answer to ``request`` and its state after it.

    A request already answered (same run, ``seq`` not newer) gets the same
    answer and changes nothing: a retried activity does not reserve twice.
    """
    holding = state.holders.get(request.run_id)
    if holding is not None and request.seq <= holding.seq and holding.answer is not None:
        return state, holding.answer
    limits = state.limits
    if limits is None or not limits.limited:
        return state, QuotaAnswer(kind="unlimited")
    state = _spend(roll_window(state, now), request.used)
    left = _less(holding.left if holding is not None else Amount(), request.used, limits)
    holders = dict(state.holders)
    holders[request.run_id] = Holding(left=left, seq=request.seq, last_seen=now)
    state = state.model_copy(update={"holders": holders})
    remaining = _remaining(state, limits)
    _, end = window_of(now, limits.window_seconds)
    if _exhausted(remaining):
        spent = _describe(_add_limited(state.spent, Amount(), limits))
        if limits.at_limit == "fail":
            answer = QuotaAnswer(kind="denied", left=left, until=end,
                                 message=f"tenant {state.tenant!r} has spent its quota ({spent} of "
                                         f"{_describe(Amount(tokens=limits.tokens, usd=limits.usd))} this window)")
        else:
            answer = QuotaAnswer(kind="wait", left=left, until=end,
                                 message=f"tenant {state.tenant!r} has spent its quota ({spent}); "
                                         f"waiting until {end.isoformat()}")
    else:
        chunk = chunk_size(limits, remaining, request.want)
        answer = QuotaAnswer(kind="granted", left=_add_limited(left, chunk, limits), until=end)
    holders[request.run_id] = Holding(left=answer.left, seq=request.seq, last_seen=now, answer=answer)
    return state.model_copy(update={"holders": holders, "updates": state.updates + 1}), answer


def _add_limited(a: Amount, b: Amount, limits: QuotaLimits) -> Amount:
    return Amount(tokens=(a.tokens or 0) + (b.tokens or 0) if limits.tokens is not None else None,
                  usd=(a.usd or 0.0) + (b.usd or 0.0) if limits.usd is not None else None)


def decide_release(state: LedgerState, request: ReleaseRequest, now: datetime) -> LedgerState:
    """The ledger after a run ends: what it used is spent, the rest of its
    reservation is free again. A release repeated (or of a run the ledger
    does not hold) spends nothing more."""
    if request.run_id not in state.holders:
        return state
    state = _spend(roll_window(state, now), request.used)
    holders = {k: h for k, h in state.holders.items() if k != request.run_id}
    return state.model_copy(update={"holders": holders, "updates": state.updates + 1})


def set_limits(state: LedgerState, limits: QuotaLimits, now: datetime) -> LedgerState:
    """The ledger with new limits; a new window length starts a new window."""
    keep = state.limits is not None and state.limits.window_seconds == limits.window_seconds
    update: dict[str, object] = {"limits": limits, "updates": state.updates + 1}
    if not keep:
        update["window_start"] = None
    state = state.model_copy(update=update)
    return roll_window(state, now)


def view_of(state: LedgerState) -> QuotaView:
    """The ledger as ``agentloop quota show`` prints it."""
    end = None
    if state.limits is not None and state.window_start is not None:
        end = state.window_start + timedelta(seconds=state.limits.window_seconds)
    return QuotaView(tenant=state.tenant, limits=state.limits, window_start=state.window_start, window_end=end,
                     spent=state.spent, reserved=reserved(state), total_spent=state.total_spent,
                     holders={k: h.left for k, h in state.holders.items()})


def _describe(amount: Amount) -> str:
    parts = []
    if amount.tokens is not None:
        parts.append(f"{amount.tokens} tokens")
    if amount.usd is not None:
        parts.append(f"${amount.usd:.4f}")
    return " and ".join(parts) or "nothing"


# The run's side ------------------------------------------------------------------------------


class RunQuota(BaseModel):
    """What a run of a tenant with a quota knows of its reservation (carried
    across continue-as-new in ``LoopState.quota``).

    Attributes:
        seq: Requests made.
        left: What it may spend since ``reported`` before it asks again.
        reported: Its usage (tokens, dollars) when it last asked.
        unlimited: The tenant has no quota: the run asks no more.
    """

    seq: int = 0
    left: Amount = Field(default_factory=Amount)
    reported: Amount = Field(default_factory=lambda: Amount(tokens=0, usd=0.0))
    unlimited: bool = False


def since_reported(quota: RunQuota, used: Amount) -> Amount:
    """The run's usage since its last request (``used``: its total so far)."""
    return Amount(tokens=max(0, (used.tokens or 0) - (quota.reported.tokens or 0)),
                  usd=max(0.0, (used.usd or 0.0) - (quota.reported.usd or 0.0)))


def reservation_due(quota: RunQuota, used: Amount) -> bool:
    """Whether the run asks the ledger before its next LLM step: its first
    step, or it has used what it was granted (in a limited unit)."""
    if quota.unlimited:
        return False
    if quota.seq == 0:
        return True
    since = since_reported(quota, used)
    return ((quota.left.tokens is not None and (since.tokens or 0) >= quota.left.tokens)
            or (quota.left.usd is not None and (since.usd or 0.0) >= quota.left.usd))


@dataclass(frozen=True)
class Proceed:
    """The step may go on."""


@dataclass(frozen=True)
class WaitForQuota:
    """Wait until the window turns, then ask again."""

    until: datetime
    message: str


@dataclass(frozen=True)
class OutOfQuota:
    """Fail the run, reason ``quota_exceeded``."""

    message: str


QuotaStep = Proceed | WaitForQuota | OutOfQuota


def after_answer(quota: RunQuota, used: Amount, answer: QuotaAnswer) -> tuple[RunQuota, QuotaStep]:
    """The run's reservation after the ledger's ``answer`` to a request made
    with usage ``used`` (its total), and what the run does next."""
    quota = quota.model_copy(update={"reported": used, "left": answer.left,
                                     "unlimited": answer.kind == "unlimited"})
    match answer.kind:
        case "wait":
            assert answer.until is not None
            return quota, WaitForQuota(answer.until, answer.message)
        case "denied":
            return quota, OutOfQuota(answer.message)
        case _:
            return quota, Proceed()


def wait_seconds(until: datetime, now: datetime) -> float:
    """How long to sleep until the window turns (a little after, so the ledger's clock is past it too)."""
    return max(0.0, (until - now).total_seconds()) + 0.05


def run_want(budget_tokens: int | None, budget_usd: float | None, used: Amount) -> Amount:
    """The most a run asks for: what its own budget (``AgentSpec.budget``'s
    ``max_total_tokens``, ``cost_limit_usd``) leaves; None where it has none."""
    return Amount(
        tokens=max(1, budget_tokens - (used.tokens or 0)) if budget_tokens is not None else None,
        usd=max(0.01, budget_usd - (used.usd or 0.0)) if budget_usd is not None else None,
    )
