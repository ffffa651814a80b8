"""Which runs a token may see (``agentloop.server.access.visibility``): the
pure decision, the list clause and the filter on listed rows."""

from __future__ import annotations

from agentloop.server import ServerSettings
from agentloop.server.access.auth import Caller
from agentloop.server.access.visibility import (
    AskRoot,
    Hidden,
    RunFacts,
    Visible,
    allowed_agents,
    decide,
    list_clause,
    listed,
    unscoped,
)
from agentloop.testing import reply, script
from tests.helpers.agents import spec

OPEN = Caller("ops", "act")
ACME = Caller("acme", "read", tenant="acme")
TRIAGE = Caller("triage", "act", agents=("triage",))
BOTH = Caller("acme-triage", "act", agents=("triage",), tenant="acme")


def test_a_token_without_tenant_or_agents_sees_every_run() -> None:
    assert unscoped(OPEN) and not unscoped(ACME) and not unscoped(TRIAGE)
    for facts in (RunFacts(), RunFacts("acme", "x"), RunFacts("globex", "y", "root")):
        assert decide(OPEN, None, facts) == Visible()


def test_a_tenant_token_sees_its_tenant_only() -> None:
    assert decide(ACME, None, RunFacts("acme", "any")) == Visible()
    assert decide(ACME, None, RunFacts("globex", "any")) == Hidden("another tenant's run")
    # A run of no tenant is not the tenant's either.
    assert decide(ACME, None, RunFacts(None, "any")) == Hidden("another tenant's run")


def test_an_agent_list_sees_its_agents_and_their_sub_agents() -> None:
    agents = frozenset({"triage"})
    assert decide(TRIAGE, agents, RunFacts(None, "triage")) == Visible()
    assert decide(TRIAGE, agents, RunFacts(None, "billing")) == Hidden("another agent's run")
    # A sub-agent's run of another agent: seen when its tree's top run is seen.
    assert decide(TRIAGE, agents, RunFacts(None, "helper", "top-run")) == AskRoot("top-run")
    # The tenant is checked first: no root lookup for another tenant's run.
    assert decide(BOTH, agents, RunFacts("globex", "helper", "top-run")) == Hidden("another tenant's run")
    assert decide(BOTH, agents, RunFacts("acme", "triage")) == Visible()


def test_allowed_agents_adds_the_registered_agents_spec_names() -> None:
    settings = ServerSettings(agents={"triage": spec(script(reply("x")), name="triage-v2")})
    assert allowed_agents(settings, OPEN) is None
    assert allowed_agents(settings, TRIAGE) == {"triage", "triage-v2"}


def test_the_list_clause_and_the_filter_on_listed_rows() -> None:
    assert list_clause(OPEN, None) is None
    assert list_clause(ACME, None) == 'AgentTenant="acme"'
    assert list_clause(BOTH, frozenset({"b", "a"})) == 'AgentTenant="acme" AND AgentName IN ("a", "b")'
    # A quote or backslash in a tenant cannot end the literal.
    assert list_clause(Caller("q", "read", tenant='a"b\\'), None) == 'AgentTenant="a\\"b\\\\"'
    rows = [(RunFacts("acme", "a"), 1), (RunFacts("globex", "a"), 2), (RunFacts(None, "a"), 3),
            (RunFacts("acme", "c"), 4)]
    assert listed(ACME, None, rows) == [1, 4]
    assert listed(BOTH, frozenset({"a"}), rows) == [1]
    assert listed(OPEN, None, rows) == [1, 2, 3, 4]
