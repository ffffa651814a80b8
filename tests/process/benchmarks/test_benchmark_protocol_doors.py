"""benchmarks/streaming/protocol_doors at one short run per reader: it runs,
every reader (SSE, MCP progress, A2A streaming) receives markers, and it
prints measured figures for each and each door's difference from SSE."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.helpers.paths import ROOT

NUMBER = r"([+-]?[\d.]+)"


def test_the_protocol_doors_benchmark_measures_both_doors_against_sse() -> None:
    done = subprocess.run([sys.executable, "-m", "benchmarks.streaming.protocol_doors", "--door", "both",
                           "--runs", "1", "--chunks", "6"],
                          capture_output=True, text=True, timeout=240, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    figures = rf"\s+(\d+)/6\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}"
    rows = {m.group(1): m for m in re.finditer(
        rf"^(SSE API|MCP|A2A){figures}(?:\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER})?$", done.stdout, re.MULTILINE)}
    assert sorted(rows) == ["A2A", "MCP", "SSE API"], done.stdout
    for row in rows.values():
        assert int(row.group(2)) > 0 and float(row.group(3)) > 0 and float(row.group(4)) > 0
    assert rows["SSE API"].group(6) is None  # the baseline: nothing added to itself
    for door in ("MCP", "A2A"):
        added_p50, ratio, ttft_added = rows[door].group(6), float(rows[door].group(8)), rows[door].group(9)
        assert added_p50 is not None and ttft_added is not None and ratio > 0, done.stdout


def test_the_protocol_doors_benchmark_measures_live_deltas_off_and_on_in_one_run() -> None:
    done = subprocess.run([sys.executable, "-m", "benchmarks.streaming.protocol_doors", "--door", "a2a",
                           "--live", "both", "--runs", "1", "--chunks", "6"],
                          capture_output=True, text=True, timeout=240, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    rows = {m.group(1): m for m in re.finditer(rf"^(SSE API|A2A|SSE API live|A2A live)\s+(\d+)/6\s+{NUMBER}",
                                               done.stdout, re.MULTILINE)}
    assert sorted(rows) == ["A2A", "A2A live", "SSE API", "SSE API live"], done.stdout
    assert all(int(row.group(2)) > 0 for row in rows.values()), done.stdout
