"""Provider lanes: which queue a model call goes to, the lanes a worker
polls, the waits runs tell of, and the metric's labels (no server)."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from prometheus_client import generate_latest
from pydantic import ValidationError

from agentloop import AgentSpec
from agentloop.activities.agent_activities import queue_wait_ms
from agentloop.cli.lanes import key_weight, rate
from agentloop.shared.base.errors import UserError
from agentloop.shared.definition.fingerprint import agent_fingerprint
from agentloop.shared.definition.lanes import (
    KNOWN_LANES,
    LANE_WAIT_NOTICE_MS,
    lane_in_queue,
    lane_of,
    lane_of_queue,
    lane_queue,
    lane_wait,
    parse_lanes,
)
from agentloop.workers.config import lanes_from_env
from agentloop.workers.metrics import AgentMetrics, tenant_label_from_env


def test_a_model_call_goes_to_its_providers_lane_unless_the_spec_names_one() -> None:
    assert lane_of("openai:gpt-4.1-mini") == "openai"
    assert lane_of("anthropic:claude-sonnet-4-5") == "anthropic"
    assert lane_of("scripted:demo") == "scripted"
    assert lane_of("openai:gpt-4.1-mini", "eu-proxy") == "eu-proxy"
    assert lane_of("openai:gpt-4.1-mini", "") is None  # no lane: the run's own queue
    assert lane_of("no-provider") is None
    assert lane_queue("agentloop", "openai") == "agentloop-llm-openai"
    assert lane_in_queue("agentloop", "agentloop-llm-openai") == "openai"
    assert lane_in_queue("agentloop", "other-llm-openai") is None
    assert lane_of_queue("prod-llm-eu-proxy") == "eu-proxy"
    assert lane_of_queue("prod") is None and lane_of_queue("prod-tools") is None


def test_a_specs_lane_is_checked_and_is_not_part_of_its_definition() -> None:
    assert AgentSpec(model="openai:x", lane="cheap.eu_1").lane == "cheap.eu_1"
    assert AgentSpec(model="openai:x", lane="").lane == ""
    with pytest.raises(ValidationError, match="lane 'Bad Lane' is not a lane name"):
        AgentSpec(model="openai:x", lane="Bad Lane")
    # Where a run's calls go is not what the agent is.
    plain, laned = AgentSpec(model="openai:x"), AgentSpec(model="openai:x", lane="cheap")
    assert agent_fingerprint(laned) == agent_fingerprint(plain)


def test_the_lanes_a_worker_polls() -> None:
    assert parse_lanes("") == KNOWN_LANES == parse_lanes("all")
    assert parse_lanes("all, eu-proxy, openai") == (*KNOWN_LANES, "eu-proxy")
    assert parse_lanes("openai") == ("openai",)
    assert parse_lanes("none") == ()
    assert lanes_from_env({}) == KNOWN_LANES
    with pytest.raises(UserError, match=r"^lane 'EU' is not a lane name.*\(--lanes or AGENTLOOP_LANES\)$"):
        lanes_from_env({"AGENTLOOP_LANES": "openai,EU"})


def test_a_wait_is_told_of_only_in_a_lane_and_past_the_notice() -> None:
    assert lane_wait("openai", LANE_WAIT_NOTICE_MS + 0.4) == round(LANE_WAIT_NOTICE_MS)
    assert lane_wait("openai", 2345.6) == 2346
    assert lane_wait("openai", LANE_WAIT_NOTICE_MS - 1) is None
    assert lane_wait(None, 5000) is None
    assert lane_wait("openai", None) is None
    scheduled = datetime(2026, 1, 1, tzinfo=UTC)
    info = SimpleNamespace(current_attempt_scheduled_time=scheduled, started_time=scheduled + timedelta(seconds=1.5))
    assert queue_wait_ms(info) == 1500  # type: ignore[arg-type]
    unknown = SimpleNamespace(current_attempt_scheduled_time=None, started_time=scheduled)
    assert queue_wait_ms(unknown) is None  # type: ignore[arg-type]


def test_lane_limits_on_the_command_line_are_checked() -> None:
    assert rate("20") == 20 and rate("0.5") == 0.5 and rate("default") is None and rate("none") is None
    for bad, words in (("-1", "a rate is 0 or more"), ("fast", "is not a rate"), ("inf", "a rate is 0 or more")):
        with pytest.raises(argparse.ArgumentTypeError, match=words):
            rate(bad)
    assert key_weight("acme=2") == ("acme", 2.0)
    assert key_weight("a=b=0.5") == ("a=b", 0.5)
    assert key_weight("acme=default") == ("acme", None)
    for bad in ("acme", "=2", "acme=0", "acme=-1", "acme=x"):
        with pytest.raises(argparse.ArgumentTypeError, match="KEY=WEIGHT"):
            key_weight(bad)


def test_the_tenant_label_is_opt_in() -> None:
    assert not tenant_label_from_env({}) and tenant_label_from_env({"AGENTLOOP_METRICS_TENANT_LABEL": "1"})
    plain = AgentMetrics(tenant_label=False)
    plain.lane_waited("openai", 1.5, "acme", cost=0.25)
    text = generate_latest(plain.registry).decode()
    assert 'agentloop_lane_wait_seconds_count{lane="openai"} 1.0' in text
    assert "acme" not in text and "agentloop_tenant_llm_cost_usd" not in text
    labelled = AgentMetrics(tenant_label=True)
    labelled.lane_waited("openai", 1.5, "acme", cost=0.25)
    labelled.lane_waited("openai", 0.5, "", cost=None)
    text = generate_latest(labelled.registry).decode()
    assert 'agentloop_lane_wait_seconds_count{lane="openai",tenant="acme"} 1.0' in text
    assert 'agentloop_lane_wait_seconds_count{lane="openai",tenant="none"} 1.0' in text
    assert 'agentloop_tenant_llm_cost_usd_total{tenant="acme"} 0.25' in text
