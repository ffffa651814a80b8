"""The worker's ledger of completed tool calls, which keeps a call that
completed during a server outage from running again (the outage itself:
tests/process/workers/test_server_outage.py)."""


from __future__ import annotations

from agentloop.activities.tool_ledger import ToolLedger, idempotency_key
from agentloop.shared.definition.activity_io import ExecuteToolResult


def result_of(content: str) -> ExecuteToolResult:
    return ExecuteToolResult(call_id="c", content=content)


def test_ledger_returns_what_was_recorded_under_the_key() -> None:
    ledger = ToolLedger()
    key = idempotency_key("run-1", "a1b2", "7")
    assert key == "run-1/a1b2/7"
    assert ledger.lookup(key) is None
    ledger.record(key, result_of("out"), attempt=1)
    assert ledger.lookup(key) == (result_of("out"), 1)
    assert ledger.lookup(idempotency_key("run-1", "c3d4", "7")) is None  # after continue-as-new


def test_ledger_keeps_results_as_json_and_gives_them_back_whole() -> None:
    # A worker keeps up to 2048 results: as bytes, the garbage collector has
    # one object an entry to walk, however rich the result.
    import gc

    from agentloop.shared.base.messages import ImagePart

    rich = ExecuteToolResult(
        call_id="c", content="42 rows", is_error=False, truncated=True, latency_ms=12.5,
        metrics={"rows": 42, "nested": {"tables": ["a", "b"]}}, end_run=None,
        images=[ImagePart(media_type="image/png", data="iVBORw0KGgo=")],
    )
    ledger = ToolLedger()
    ledger.record("k", rich, attempt=2)

    assert ledger.lookup("k") == (rich, 2)
    entry = ledger._entries["k"]
    assert isinstance(entry.result, bytes) and not gc.is_tracked(entry.result)
    assert ledger.size_bytes == len(rich.model_dump_json())


def test_ledger_is_bounded_in_entries_bytes_and_age() -> None:
    now = [0.0]
    size = len(result_of("a").model_dump_json())
    by_count = ToolLedger(max_entries=2, clock=lambda: now[0])
    for key in "abc":
        by_count.record(key, result_of(key), attempt=1)
    assert [k for k in "abc" if by_count.lookup(k)] == ["b", "c"]  # the oldest went first

    ledger = ToolLedger(max_bytes=3 * size, ttl_seconds=60, clock=lambda: now[0])
    for key in "abcd":
        ledger.record(key, result_of(key), attempt=1)
    assert [k for k in "abcd" if ledger.lookup(k)] == ["b", "c", "d"]
    assert ledger.size_bytes == 3 * size
    ledger.record("huge", result_of("x" * 4 * size), attempt=1)
    assert ledger.lookup("huge") is None and len(ledger) == 3  # larger than the ledger: not kept

    now[0] = 61.0
    assert ledger.lookup("d") is None and len(ledger) == 0 and ledger.size_bytes == 0
