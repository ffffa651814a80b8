"""benchmarks/sse_fanout at a few clients: it runs, with the SSE clients and
the direct reader in processes of their own (benchmarks/sse_fanout_clients),
every client sees every event once (reconnections included), and it prints
its measured rows."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.helpers.paths import ROOT


def test_the_fanout_benchmark_measures_every_client_count() -> None:
    done = subprocess.run([sys.executable, "-m", "benchmarks.streaming.sse_fanout", "--clients", "1,6", "--runs", "1",
                           "--chunks", "6"], capture_output=True, text=True, timeout=240, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    header = next(line for line in lines if line.startswith("clients "))
    assert header.split() == ["clients", "direct", "p50", "direct", "p95", "SSE", "p50", "SSE", "p95", "added", "p50",
                              "added", "p95", "lost/dup", "queries", "WFT", "CPU", "ms", "CPU", "ms/client",
                              "clients", "CPU", "ms", "clients", "CPU", "%"]
    rows = {line.split()[0]: line.split()[1:] for line in lines if re.match(r"\s+\d+ ", line)}
    assert sorted(rows, key=int) == ["1", "6"]
    for cells in rows.values():
        assert len(cells) == 13, cells
        latencies, lost, queries, tasks = [float(c) for c in cells[:4]], int(cells[6]), float(cells[7]), float(cells[8])
        assert all(v > 0 for v in latencies) and lost == 0 and queries > 0 and tasks > 0
        # The gateway's CPU, and the SSE clients' process's (ms, and % of its wall time: one core is 100).
        assert float(cells[9]) > 0 and float(cells[11]) >= 0 and 0 <= float(cells[12]) <= 200
    assert float(rows["6"][11]) > 0 and float(rows["6"][12]) > 0
    assert "events lost or duplicated: none (1 streams reconnected with Last-Event-ID mid-run)" in lines
    assert any(line.startswith("time to first token: over HTTP") for line in lines)
