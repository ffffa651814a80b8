"""benchmarks/streaming/doors_mcp at one short run per reader: it runs, both
readers (SSE and MCP progress) receive markers, and it prints measured
figures for both and their difference."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.helpers.paths import ROOT


def test_the_mcp_door_benchmark_measures_both_readers() -> None:
    done = subprocess.run([sys.executable, "-m", "benchmarks.streaming.doors_mcp", "--runs", "1", "--chunks", "6"],
                          capture_output=True, text=True, timeout=240, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    rows = {m.group(1): m for m in re.finditer(
        r"^(SSE|MCP)\s+ttft p50\s+([\d.]+) ms\s+per event p50\s+([\d.]+) ms\s+p95\s+([\d.]+) ms\s+n (\d+)/6$",
        done.stdout, re.MULTILINE)}
    assert sorted(rows) == ["MCP", "SSE"], done.stdout
    for row in rows.values():
        assert float(row.group(2)) > 0 and float(row.group(3)) > 0 and int(row.group(5)) > 0
    assert re.search(r"^per event p50: MCP added [+-][\d.]+ ms, ratio [\d.]+$", done.stdout, re.MULTILINE)
    assert re.search(r"^time to first token p50: MCP added [+-][\d.]+ ms, ratio [\d.]+$", done.stdout, re.MULTILINE)
