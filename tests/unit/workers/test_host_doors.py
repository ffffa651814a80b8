"""The ``Host`` checks of the worker's listeners: the metrics endpoint (a
page that rebinds its own name to the worker's address reads nothing;
Prometheus, by IP address or a listed name, scrapes as before) and the
door of ``agentloop dev``'s Temporal UI (loopback names only)."""

from __future__ import annotations

import httpx
import pytest

from agentloop.workers import ui_door
from agentloop.workers.metrics import (
    AgentMetrics,
    MetricsServer,
    metrics_allowed_hosts,
    metrics_host_refusal,
)

ALLOWED = frozenset({"localhost", "worker-0"})


@pytest.mark.parametrize("host", [None, "", "127.0.0.1:9464", "10.4.0.17:9464", "[::1]:9464", "[fe80::1]",
                                  "localhost:9464", "LOCALHOST", "worker-0:9464"])
def test_addresses_and_allowed_names_are_scraped(host: str | None) -> None:
    assert metrics_host_refusal(host, ALLOWED) is None


@pytest.mark.parametrize("host", ["evil.example:9464", "127.0.0.1.nip.io:9464", "localhost.evil.example",
                                  "worker-0.evil.example"])
def test_other_names_are_refused_with_the_variable_to_set(host: str) -> None:
    refused = metrics_host_refusal(host, ALLOWED)
    assert refused is not None and "AGENTLOOP_METRICS_ALLOWED_HOSTS" in refused and host in refused


def test_the_variable_adds_names() -> None:
    assert {"prom-target", "other"} <= metrics_allowed_hosts({"AGENTLOOP_METRICS_ALLOWED_HOSTS": "Prom-Target, other"})


def test_a_rebound_name_reads_no_metrics_from_the_endpoint() -> None:
    metrics = AgentMetrics()
    metrics.tool_call("secret_tool_name", error=False, seconds=0.1)
    server = MetricsServer(metrics, 0, host="127.0.0.1", allowed_hosts=["localhost", "scrape.internal"]).start()
    try:
        url = f"http://127.0.0.1:{server.port}/metrics"
        assert "secret_tool_name" in httpx.get(url).text
        assert "secret_tool_name" in httpx.get(url, headers={"Host": f"scrape.internal:{server.port}"}).text
        rebound = httpx.get(url, headers={"Host": f"evil.example:{server.port}"})
        assert rebound.status_code == 403 and "secret_tool_name" not in rebound.text
        assert "AGENTLOOP_METRICS_ALLOWED_HOSTS" in rebound.text
    finally:
        server.stop()


@pytest.mark.parametrize("host", ["127.0.0.1:8233", "localhost:8233", "LOCALHOST", "[::1]:8233", "127.0.0.1"])
def test_the_ui_door_lets_loopback_names_in(host: str) -> None:
    assert ui_door.host_refusal(host) is None


@pytest.mark.parametrize("host", [None, "", "evil.example:8233", "127.0.0.1.nip.io:8233", "localhost.evil.example",
                                  "[::1].evil.example", "10.0.0.5:8233"])
def test_the_ui_door_refuses_other_names_with_a_sentence(host: str | None) -> None:
    refused = ui_door.host_refusal(host)
    assert refused is not None and "DNS rebinding" in refused
