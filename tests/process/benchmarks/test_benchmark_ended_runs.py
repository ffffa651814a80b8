"""benchmarks/ended_runs at a few hundred runs: what it prints is measured
on the real cache, parked runs hold next to nothing for the collector, and
its command line says what was wrong with bad options."""

from __future__ import annotations

import subprocess
import sys

from benchmarks.durability import ended_runs


async def test_parked_runs_hold_a_tracked_object_each_and_collect_faster() -> None:
    row = await ended_runs.measure(300, steps=2, repeat=1)

    # A live run of 6 messages is dozens of tracked objects; a parked one, its entry.
    assert row["live_objects"] >= 300 * 30
    assert row["parked_objects"] <= 300 * 2
    assert row["live_ms"] > 0 and row["parked_ms"] > 0 and row["floor_ms"] > 0
    assert row["parked_bytes"] >= row["live_bytes"] > 0  # the answers were added
    assert row["park_us"] > 0


async def test_the_costs_of_parking_are_measured_on_parked_runs() -> None:
    calling, final, unpark = await ended_runs.record_costs(steps=1, n=20)
    assert calling > 0 and final > 0 and unpark > 0


def test_the_command_prints_its_table_and_refuses_bad_options() -> None:
    ran = subprocess.run([sys.executable, "-m", "benchmarks.durability.ended_runs", "--runs", "50", "--repeat", "1"],
                         check=False, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert lines[2].split()[0] == "50" and lines[3].startswith("recording a run's answer:")

    bad = subprocess.run([sys.executable, "-m", "benchmarks.durability.ended_runs", "--runs", "many"],
                         check=False, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--runs takes numbers separated by commas" in bad.stderr
    assert "Traceback" not in bad.stderr
