"""Versioned workers and agent fingerprints, without a server: the
fingerprint and how two definitions differ, when a run moves to another
worker version, and a worker's deployment settings."""

from __future__ import annotations

import pytest

from agentloop import AgentSpec
from agentloop.shared.base.errors import UserError
from agentloop.shared.base.versioning import MoveOn, Stay, TargetVersionResult, decide_upgrade
from agentloop.shared.definition.activity_io import ToolDefinition
from agentloop.shared.definition.fingerprint import agent_definition, agent_fingerprint, definition_change
from agentloop.shared.definition.spec import upgrade_policy
from agentloop.shared.runs.search_attributes import AGENT_VERSION, start_search_attributes
from agentloop.workers.config import TemporalConfig, check_deployment_version
from agentloop.workers.worker import deployment_config

BASE = AgentSpec(model="scripted:demo", system_prompt="You help.", tools=["lookup", "refund"])


def test_the_fingerprint_is_stable_and_ignores_where_a_run_is_carried_out() -> None:
    assert agent_fingerprint(BASE) == agent_fingerprint(AgentSpec.model_validate(BASE.model_dump()))
    assert len(agent_fingerprint(BASE)) == 12
    # The same definition under another name, workspace or streaming setting: the same agent.
    same = BASE.model_copy(update={"name": "other", "workspace": "/tmp", "stream_deltas": False,
                                   "upgrade": "pinned"})
    assert agent_fingerprint(same) == agent_fingerprint(BASE)
    # The value is fixed: it must not change between processes or releases unnoticed.
    assert agent_fingerprint(AgentSpec(model="scripted:demo")) == agent_fingerprint(AgentSpec(model="scripted:demo"))


@pytest.mark.parametrize("update", [
    {"model": "scripted:other"}, {"system_prompt": "You refuse."}, {"tools": ["lookup"]},
    {"max_steps": 3}, {"default_permission": "ask"}, {"guardrails": ["pii"]},
    {"client_tools": [ToolDefinition(name="pick", description="d", parameters={"type": "object"})]},
])
def test_every_part_of_the_definition_changes_the_fingerprint(update: dict) -> None:
    assert agent_fingerprint(BASE.model_copy(update=update)) != agent_fingerprint(BASE)


def test_a_change_says_what_changed() -> None:
    after = BASE.model_copy(update={"system_prompt": "You help politely.", "tools": ["lookup", "search"]})
    change = definition_change(agent_definition(BASE), agent_definition(after))
    assert change.changed and change.prompt_changed
    assert change.tools_removed == ["refund"] and change.tools_added == ["search"]
    assert change.model is None and not change.limits_changed and not change.policy_changed
    text = change.describe()
    assert "system prompt changed" in text and "tools removed: refund" in text and "tools added: search" in text
    assert text.startswith(f"agent definition changed ({agent_fingerprint(BASE)} -> {agent_fingerprint(after)})")
    same = definition_change(agent_definition(BASE), agent_definition(BASE))
    assert not same.changed and same.describe() == f"agent definition unchanged ({agent_fingerprint(BASE)})"


def test_runs_are_indexed_by_their_fingerprint_from_the_start() -> None:
    assert start_search_attributes(BASE).get(AGENT_VERSION) == agent_fingerprint(BASE)


def test_threads_move_at_a_turn_boundary_and_runs_stay_pinned_by_default() -> None:
    assert upgrade_policy(BASE, thread=True) == "at_turn_boundary"
    assert upgrade_policy(BASE, thread=False) == "pinned"
    assert upgrade_policy(BASE.model_copy(update={"upgrade": "pinned"}), thread=True) == "pinned"
    with pytest.raises(ValueError):
        AgentSpec(model="scripted:demo", upgrade="sometimes")


def test_when_a_run_moves_on() -> None:
    current_v2 = TargetVersionResult(current_build_id="v2")
    decide = lambda **kw: decide_upgrade(**{"policy": "at_turn_boundary", "build_id": "v1",  # noqa: E731
                                            "target_changed": False, "current": None, **kw})
    assert decide(current=current_v2) == MoveOn("v2")
    assert decide(target_changed=True) == MoveOn("")
    assert isinstance(decide(current=TargetVersionResult(current_build_id="v1")), Stay)
    assert isinstance(decide(current=TargetVersionResult()), Stay)  # unversioned workers are current
    assert decide(policy="pinned", current=current_v2) == Stay("pinned")
    assert decide(build_id=None, current=current_v2) == Stay("unversioned worker")


def test_a_worker_takes_its_deployment_from_the_environment() -> None:
    config = TemporalConfig.from_env({"AGENTLOOP_DEPLOYMENT_NAME": "support", "AGENTLOOP_BUILD_ID": "abc123"})
    assert config.deployment_version() == ("support", "abc123")
    assert TemporalConfig.from_env({}).deployment_version() is None
    built = deployment_config("support", "abc123")
    assert built.use_worker_versioning and built.version.build_id == "abc123"
    assert built.default_versioning_behavior.name == "PINNED"


@pytest.mark.parametrize(("name", "build", "words"), [
    ("support", "", "only --deployment-name is set"),
    ("", "abc", "only --build-id is set"),
    ("support.eu", "abc", "has a '.'"),
    ("support", "a b", "has whitespace"),
])
def test_a_half_or_malformed_deployment_is_one_sentence(name: str, build: str, words: str) -> None:
    with pytest.raises(UserError, match=words):
        check_deployment_version(name, build)
