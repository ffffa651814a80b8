"""benchmarks/fleet at tiny sizes: its provider keeps its rate with 429 and
``retry-after``, and the benchmark prints its table from measured runs."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request

from benchmarks.fleet.mock_provider import MockProvider
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
