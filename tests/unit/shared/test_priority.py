"""A run's priority and tenant become its Temporal Priority
(``agentloop.shared.base.priority``); bad values are refused with a sentence."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from temporalio.common import Priority

from agentloop.shared.base.messages import Message
from agentloop.shared.base.priority import priority_problem, run_priority, tenant_problem
from agentloop.shared.definition.fingerprint import agent_fingerprint
from agentloop.shared.definition.spec import AgentSpec
from agentloop.shared.runs.run import AgentRunInput
from agentloop.shared.runs.search_attributes import AGENT_TENANT, start_search_attributes


def test_priority_and_tenant_map_to_temporal_priority() -> None:
    assert run_priority(None, None) is Priority.default
    assert run_priority(1, None) == Priority(priority_key=1)
    assert run_priority(None, "acme") == Priority(fairness_key="acme")
    assert run_priority(5, "acme", 2) == Priority(priority_key=5, fairness_key="acme", fairness_weight=2.0)
    proto = run_priority(2, "acme")._to_proto()
    assert (proto.priority_key, proto.fairness_key) == (2, "acme")


@pytest.mark.parametrize(("priority", "tenant", "weight", "says"), [
    (0, None, None, "priority 0 is out of range: use 1 .runs first. to 5"),
    (6, None, None, "priority 6 is out of range"),
    (None, "", None, "tenant must not be empty"),
    (None, "a b", None, "must not contain spaces"),
    (None, "x" * 65, None, "65 bytes long; the limit is 64"),
    (None, "acme", 0, "fairness weight 0 is out of range"),
])
def test_out_of_range_values_are_refused_with_a_sentence(priority, tenant, weight, says) -> None:
    with pytest.raises(ValueError, match=says):
        run_priority(priority, tenant, weight)


def test_the_checks_accept_the_edges_and_none() -> None:
    assert [priority_problem(v) for v in (None, 1, 5)] == [None] * 3
    assert priority_problem(True) and priority_problem(2.0) and priority_problem("2")
    assert tenant_problem(None) is None and tenant_problem("é" * 32) is None
    assert tenant_problem("é" * 33) and tenant_problem(7) and tenant_problem("a\x00")


def test_the_spec_takes_a_priority_from_1_to_5_outside_its_fingerprint() -> None:
    spec = AgentSpec(model="scripted:x", priority=1)
    assert spec.priority == 1 and AgentSpec(model="scripted:x").priority is None
    assert agent_fingerprint(spec) == agent_fingerprint(AgentSpec(model="scripted:x"))
    with pytest.raises(ValidationError, match="priority 9 is out of range: use 1"):
        AgentSpec(model="scripted:x", priority=9)


def test_the_run_input_takes_a_tenant_and_old_inputs_have_none() -> None:
    messages = [Message.user("hi")]
    spec = AgentSpec(model="scripted:x")
    assert AgentRunInput(spec=spec, messages=messages).tenant is None
    assert AgentRunInput.model_validate({"spec": {"model": "scripted:x"}, "messages": [
        m.model_dump(mode="json") for m in messages], "tenant": "acme"}).tenant == "acme"
    with pytest.raises(ValidationError, match="tenant must not contain spaces"):
        AgentRunInput(spec=spec, messages=messages, tenant="two words")


def test_a_tenants_run_is_indexed_by_tenant_from_its_start() -> None:
    spec = AgentSpec(model="scripted:x")
    assert start_search_attributes(spec, "acme")[AGENT_TENANT] == "acme"
    assert AGENT_TENANT not in start_search_attributes(spec)
