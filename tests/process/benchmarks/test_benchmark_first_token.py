"""benchmarks/streaming/first_token as a user runs it, at one run of one
mode with its SSE client in a process of its own (``--client-process``,
``benchmarks.streaming.sse_timing``): it prints the floor, the mode's row
and the run's first delta, which came live (no ``h``), and a mode it does
not have is a sentence."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.helpers.paths import ROOT


def first_token(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "benchmarks.streaming.first_token", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_first_token_measures_the_streaming_start_with_its_client_in_a_process_of_its_own() -> None:
    done = first_token("--runs", "1", "--chunks", "5", "--follow", "0", "--client-process",
                       "--modes", "in memory + stream + eager")
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"floor \(bare workflow, start to activity running\): p50 \d+\.\d ms", done.stdout), done.stdout
    row = next(line for line in done.stdout.splitlines() if line.startswith("in memory + stream + eager "))
    assert len(re.findall(r"\d+\.\d+", row)) >= 10, row
    runs = next(line for line in done.stdout.splitlines() if line.strip().startswith("in memory + stream + eager")
                and "on its way" in line)
    # The first delta's journey, "at the worker+on its way", without "h": it came live, not from the history.
    assert re.search(r"on its way: \d+\+\d+ ", runs), runs


def test_first_token_refuses_a_mode_it_does_not_have() -> None:
    done = first_token("--modes", "live,bogus")
    assert done.returncode == 2
    assert "--modes: 'bogus' not among today," in done.stderr.splitlines()[-1]
