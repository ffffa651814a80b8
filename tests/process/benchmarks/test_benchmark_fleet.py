"""benchmarks/fleet at tiny sizes: its provider keeps its rate with 429 and
``retry-after``, the benchmark prints its table from measured runs, and the
bare baseline (a plain Temporal workflow on the same lane) reports where
each request was dispatched and when it arrived."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request

from benchmarks.fleet.mock_provider import MockProvider, bucket_rejections
from tests.helpers.paths import ROOT


def post(url: str) -> tuple[int, dict[str, str]]:
    request = urllib.request.Request(url + "/chat/completions", data=json.dumps({"model": "m"}).encode(),
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers)
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers)


def test_the_mock_provider_answers_429_with_retry_after_above_its_rate() -> None:
    provider = MockProvider(rate=3, service_seconds=0).start()
    try:
        answers = [post(provider.base_url) for _ in range(5)]
    finally:
        provider.shutdown()
        provider.server_close()
    assert [status for status, _ in answers][:3] == [200, 200, 200]
    throttled = [headers for status, headers in answers if status == 429]
    assert throttled and all(int(h["retry-after"]) >= 1 for h in throttled)
    assert provider.throttled == len(throttled) and len(provider.ok_times) == 5 - len(throttled)


def test_the_benchmark_prints_its_table_at_tiny_sizes() -> None:
    done = subprocess.run([sys.executable, "-m", "benchmarks.fleet.fleet", "--a", "6", "--b", "2", "--priority", "1",
                           "--rate", "20"], capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    header = next(line for line in lines if line.startswith("mode"))
    assert header.split()[:6] == ["mode", "requests", "429s", "429", "%", "failed"]
    rows = {line.split()[0]: line.split()[1:] for line in lines if line.split()[:1] in (["off"], ["on"])}
    assert sorted(rows) == ["off", "on"]
    for cells in rows.values():
        assert int(cells[0]) >= 6 + 2 + 1  # every run asked the provider at least once
    assert rows["on"][3] == "0"  # no run failed with lanes on
    assert any(line.startswith("B alone: p50 ") for line in lines)


def test_a_limiter_with_a_one_second_burst_lets_one_more_through_than_a_one_second_bucket() -> None:
    # The server's queue limiter (a GCRA with a one-second burst) lets rps + 1
    # tasks go at once after a pause; the provider's bucket holds rps.
    assert bucket_rejections([0.0] * 21, rate=20) == 1
    assert bucket_rejections([0.0] * 20, rate=20) == 0
    assert bucket_rejections([0.0] * 20 + [i / 19 for i in range(1, 100)], rate=20) == 0  # then 19 a second
    assert bucket_rejections([0.0] * 20 + [i / 21 for i in range(1, 100)], rate=20) > 0  # 21 a second


def test_the_bare_baseline_stamps_every_request_with_its_dispatch_time() -> None:
    done = subprocess.run([sys.executable, "-m", "benchmarks.fleet.bare_burst", "--a", "6", "--b", "2",
                           "--priority", "1", "--rate", "20"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    rows = {row["scenario"]: row for row in (json.loads(line) for line in done.stdout.splitlines()
                                              if line.startswith("{"))}
    assert sorted(rows) == ["B alone", "burst"]
    assert rows["burst"]["failed"] == 0 and rows["burst"]["requests"] >= 6 + 2 + 1
    assert rows["burst"]["stamped"] == rows["burst"]["requests"]
    assert rows["burst"]["lag p50 ms"] >= 0 and "429s at dispatch" in rows["burst"]
