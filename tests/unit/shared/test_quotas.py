"""The spend quota's pure decisions: windows, chunks, grant / wait / deny,
idempotent reservations, releases, and the run's side."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agentloop.shared.runs import quotas
from agentloop.shared.runs.quotas import (
    Amount,
    LedgerState,
    OutOfQuota,
    Proceed,
    QuotaLimits,
    ReleaseRequest,
    ReserveRequest,
    RunQuota,
    WaitForQuota,
)

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def ledger(**limits: object) -> LedgerState:
    return quotas.set_limits(LedgerState(tenant="acme"), QuotaLimits(**limits), T0)  # type: ignore[arg-type]


def reserve(
    state: LedgerState, run: str, seq: int, used: int = 0, now: datetime = T0
) -> tuple[LedgerState, quotas.QuotaAnswer]:
    return quotas.decide_reserve(state, ReserveRequest(run_id=run, seq=seq, used=Amount(tokens=used)), now)


def test_parse_window() -> None:
    assert quotas.parse_window("2s") == 2
    assert quotas.parse_window("1d") == 86400
    assert quotas.parse_window(" 1.5h ") == 5400
    for bad in ("", "0s", "1y", "-1d", "d"):
        with pytest.raises(ValueError, match="not a positive duration"):
            quotas.parse_window(bad)


def test_windows_are_fixed_from_the_epoch() -> None:
    start, end = quotas.window_of(T0 + timedelta(hours=3), 86400)
    assert start == datetime(2026, 1, 1, tzinfo=UTC) and end == datetime(2026, 1, 2, tzinfo=UTC)
    start, end = quotas.window_of(datetime(2026, 1, 1, 0, 0, 3, 500_000, tzinfo=UTC), 2)
    assert (start.second, end.second) == (2, 4)


def test_chunks_are_a_share_of_the_limit_capped_by_what_is_left_and_the_runs_budget() -> None:
    limits = QuotaLimits(tokens=10_000, usd=50)
    chunk = quotas.chunk_size(limits, Amount(tokens=10_000, usd=50), Amount())
    assert chunk == Amount(tokens=500, usd=2.5)
    assert quotas.chunk_size(limits, Amount(tokens=120, usd=0.5), Amount()) == Amount(tokens=120, usd=0.5)
    assert quotas.chunk_size(limits, Amount(tokens=10_000, usd=50), Amount(tokens=40, usd=None)).tokens == 40
    assert quotas.chunk_size(QuotaLimits(tokens=3), Amount(tokens=3), Amount()).tokens == 1
    assert quotas.chunk_size(QuotaLimits(tokens=10_000, chunk_tokens=7), Amount(tokens=10_000), Amount()).tokens == 7
    assert quotas.run_want(100, None, Amount(tokens=30)) == Amount(tokens=70, usd=None)


def test_grant_until_the_window_is_spent_then_wait_until_it_turns() -> None:
    state = ledger(tokens=1000, window_seconds=60)
    state, first = reserve(state, "r1", 1)
    assert first.kind == "granted" and first.left.tokens == 50 and first.left.usd is None
    for seq in range(2, 21):
        state, answer = reserve(state, "r1", seq, used=50)
    assert answer.kind == "granted"
    assert state.spent.tokens == 950 and quotas.reserved(state).tokens == 50
    state, answer = reserve(state, "r1", 21, used=50)
    assert answer.kind == "wait" and answer.until == datetime(2026, 1, 1, 12, 1, tzinfo=UTC)
    assert "spent its quota" in answer.message
    # the window turns: nothing spent, the run gets its chunk again
    state, answer = reserve(state, "r1", 22, now=T0 + timedelta(seconds=61))
    assert answer.kind == "granted" and state.spent.tokens == 0


def test_policy_fail_denies() -> None:
    state = ledger(tokens=100, at_limit="fail")
    state, _ = reserve(state, "r1", 1)
    state, answer = reserve(state, "r1", 2, used=100)
    assert answer.kind == "denied" and "spent its quota (100 tokens of 100 tokens" in answer.message


def test_a_retried_request_is_answered_again_and_reserves_nothing_more() -> None:
    state = ledger(tokens=1000)
    state, first = reserve(state, "r1", 1)
    again, second = reserve(state, "r1", 1)
    assert again == state and second == first
    state, _ = reserve(state, "r1", 2, used=50)
    again, _ = reserve(state, "r1", 2, used=50)
    assert again.spent.tokens == state.spent.tokens == 50


def test_many_runs_never_hold_more_than_the_limit() -> None:
    state = ledger(tokens=1000)
    granted = 0
    for i in range(300):
        state, answer = reserve(state, f"r{i}", 1)
        granted += answer.left.tokens or 0
    assert granted == 1000
    assert sum(h.left.tokens or 0 for h in state.holders.values()) == 1000


def test_release_spends_what_was_used_and_frees_the_rest() -> None:
    state = ledger(tokens=1000)
    state, _ = reserve(state, "r1", 1)
    state = quotas.decide_release(state, ReleaseRequest(run_id="r1", used=Amount(tokens=20)), T0)
    assert state.spent.tokens == 20 and not state.holders
    assert quotas.decide_release(state, ReleaseRequest(run_id="r1", used=Amount(tokens=20)), T0) == state


def test_stale_holders_are_dropped_when_the_window_turns() -> None:
    state = ledger(tokens=1000, window_seconds=10)
    state, _ = reserve(state, "gone", 1)
    state, _ = reserve(state, "alive", 1, now=T0 + timedelta(seconds=15))
    assert set(state.holders) == {"gone", "alive"}  # gone was seen in the window before
    state, _ = reserve(state, "alive", 2, now=T0 + timedelta(seconds=25))
    assert set(state.holders) == {"alive"}


def test_no_limits_is_unlimited_and_limits_need_a_unit() -> None:
    _, answer = reserve(LedgerState(tenant="acme"), "r1", 1)
    assert answer.kind == "unlimited"
    assert not QuotaLimits().limited
    with pytest.raises(ValueError):
        QuotaLimits(tokens=0)


def test_the_run_asks_at_first_and_when_its_chunk_is_used() -> None:
    quota = RunQuota()
    assert quotas.reservation_due(quota, Amount(tokens=0))
    quota, step = quotas.after_answer(quota.model_copy(update={"seq": 1}), Amount(tokens=0, usd=0.0),
                                      quotas.QuotaAnswer(kind="granted", left=Amount(tokens=50)))
    assert step == Proceed()
    assert not quotas.reservation_due(quota, Amount(tokens=49))
    assert quotas.reservation_due(quota, Amount(tokens=50))
    assert quotas.since_reported(quota, Amount(tokens=80)).tokens == 80
    until = T0 + timedelta(seconds=5)
    _, step = quotas.after_answer(quota, Amount(tokens=80), quotas.QuotaAnswer(kind="wait", until=until, message="m"))
    assert step == WaitForQuota(until, "m")
    _, step = quotas.after_answer(quota, Amount(tokens=80), quotas.QuotaAnswer(kind="denied", message="no"))
    assert step == OutOfQuota("no")
    quota, _ = quotas.after_answer(quota, Amount(tokens=0), quotas.QuotaAnswer(kind="unlimited"))
    assert not quotas.reservation_due(quota, Amount(tokens=10**9))
    assert quotas.wait_seconds(until, T0) == pytest.approx(5.05)
    assert quotas.wait_seconds(T0, until) == pytest.approx(0.05)


def test_view_shows_the_window_and_the_holders() -> None:
    state, _ = reserve(ledger(usd=50), "r1", 1)
    view = quotas.view_of(state)
    assert view.window_end == datetime(2026, 1, 2, tzinfo=UTC)
    assert view.reserved.usd == 2.5 and view.holders == {"r1": Amount(tokens=None, usd=2.5)}
