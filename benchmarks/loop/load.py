"""How a load of runs is driven and read, for ``benchmarks.loop.concurrency``: a
burst of N runs or N kept in flight (:func:`drive`), the gaps between a run's
model calls, and a system's row of figures (:func:`row_of`, :func:`median_row`)."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import statistics
import time
from collections.abc import Callable

from benchmarks.loop.cpu_split import rss_mb
from benchmarks.loop.floor_workflows import MODEL_CALLS as CALLS
from benchmarks.loop.floor_workflows import MODEL_SECONDS


def step_gaps(run_ids: list[str]) -> list[float]:
    """Gaps between a run's consecutive model calls, less the model's time (ms)."""
    gaps = []
    for run_id in run_ids:
        starts = CALLS.get(run_id, [])
        gaps += [(b - a - MODEL_SECONDS[0]) * 1000 for a, b in itertools.pairwise(starts)]
    return gaps


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]



@dataclasses.dataclass
class Sustained:
    """Keep N runs in flight and measure a window of ``window`` seconds;
    ``cpu()`` reads CPU seconds: the server's, the worker's, and the
    worker's parts (:class:`CpuSplit`)."""

    window: float
    cpu: Callable[[], tuple[float, ...]]


@dataclasses.dataclass
class Driven:
    """How a load went: runs/s, runs unfinished at the end, the runs whose
    figures count (a burst's all; sustained, those that finished in the
    window), every run started, and (sustained) the server's and the
    worker's CPU ms a run over the window (then the worker's parts,
    :class:`CpuSplit`)."""

    rate: float
    unfinished: int
    measured: list[str]
    started: list[str]
    cpu_ms: tuple[float, ...] | None = None


async def drive(start, prefix: str, n: int, timeout: float,
                sustained: Sustained | None = None) -> Driven:
    """One burst of ``n`` runs, or ``n`` kept in flight (``sustained``)."""
    if sustained is not None:
        return await sustain(start, prefix, n, timeout, sustained)
    ids = [f"{prefix}-{i}" for i in range(n)]
    rate, unfinished = await burst(start, ids, timeout)
    return Driven(rate, unfinished, ids, ids)


def report_failures(failures: list[BaseException]) -> None:
    if failures:
        print(f"  ({len(failures)} runs failed: {failures[0]})")


async def burst(start, ids: list[str], timeout: float) -> tuple[float, int]:
    """Start every run at once; runs/s and how many did not finish in time."""
    began = time.monotonic()
    handles = await asyncio.gather(*(start(run_id) for run_id in ids))
    results = await asyncio.wait([asyncio.ensure_future(h.result()) for h in handles], timeout=timeout)
    done, pending = results
    for task in pending:
        task.cancel()
    report_failures([t.exception() for t in done if t.exception() is not None])
    elapsed = time.monotonic() - began
    return len(done) / elapsed, len(pending)


async def sustain(start, prefix: str, n: int, timeout: float,
                  sustained: Sustained) -> Driven:
    """``n`` lanes, each starting a run as soon as its last one finished;
    the window opens once ``n`` runs have finished (each lane turned over
    about once) and lasts ``sustained.window`` seconds. Then no new run
    starts, and the runs in flight get ``timeout`` seconds to finish."""
    counter = itertools.count()
    started: list[str] = []
    finished: list[tuple[float, str]] = []
    failures: list[BaseException] = []
    warm, stop = asyncio.Event(), asyncio.Event()

    async def lane() -> None:
        while not stop.is_set():
            run_id = f"{prefix}-{next(counter)}"
            started.append(run_id)
            try:
                await (await start(run_id)).result()
            except Exception as exc:  # noqa: BLE001 (a failed run is counted and shown, as in a burst)
                failures.append(exc)
                return
            finished.append((time.monotonic(), run_id))
            if len(finished) >= n:
                warm.set()

    lanes = [asyncio.create_task(lane()) for _ in range(n)]
    warming = asyncio.create_task(warm.wait())
    await asyncio.wait([warming, *lanes], timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    warming.cancel()
    cpu_before, opened = sustained.cpu(), time.monotonic()
    await asyncio.sleep(sustained.window)
    cpu_after, closed = sustained.cpu(), time.monotonic()
    stop.set()
    _, pending = await asyncio.wait(lanes, timeout=timeout)
    for task in pending:
        task.cancel()
    report_failures(failures)
    measured = [run_id for at, run_id in finished if opened <= at < closed]
    count = len(measured) or 1
    cpu_ms = tuple((after - before) * 1000 / count for after, before in zip(cpu_after, cpu_before, strict=True))
    return Driven(len(measured) / (closed - opened), len(pending), measured, started, cpu_ms)


#: started (:meth:`CpuSplit.collections`), in the order ``measure``'s ``cpu()`` reads them.
CPU_COLUMNS = ("server_ms", "worker_ms", "workflow_ms", "activities_ms", "gc_ms", "full_gc_ms",
               "gcs_workflow", "gcs_activities", "gcs_elsewhere")


def cpu_columns(cpu_ms: tuple[float, ...]) -> dict[str, float]:
    """The CPU figures of a row, by column."""
    return dict(zip(CPU_COLUMNS, cpu_ms, strict=True))


def row_of(label: str, n: int, driven: Driven, queries: float | None) -> dict[str, object]:
    """A system's row from how its load went."""
    gaps = step_gaps(driven.measured)
    row: dict[str, object] = {"system": label, "n": n, "rate": driven.rate, "unfinished": driven.unfinished,
                              "p50": pct(gaps, 0.5), "p95": pct(gaps, 0.95), "rss": rss_mb()[0], "queries": queries}
    if driven.cpu_ms is not None:
        row.update(cpu_columns(driven.cpu_ms))
    return row


def median_row(rows: list[dict[str, object]]) -> dict[str, object]:
    """One row of medians over repetitions (most unfinished; RSS at its largest)."""
    row = dict(rows[0])
    for key in ("rate", "p50", "p95", *CPU_COLUMNS, "queries"):
        if row[key] is not None:
            row[key] = statistics.median(r[key] for r in rows)
    row["unfinished"] = max(r["unfinished"] for r in rows)
    row["rss"] = max(r["rss"] for r in rows)
    row["rates"] = [r["rate"] for r in rows]
    return row
