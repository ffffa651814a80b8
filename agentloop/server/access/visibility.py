"""Which runs a token may see. A token with a tenant
(``name:scope:secret:tenant=acme``) sees the runs and threads of its tenant
only; a token with an agent list (``...:agents=a|b``) sees the runs of those
agents and of their sub-agents only. A token without either sees every run.

One pure decision, :func:`decide`, on what the run's search attributes say
(:class:`RunFacts`); one loader, :func:`find_run`, that describes the run
and applies it, used by every door (the JSON API, AG-UI, the console's
calls, MCP and A2A). A run the token may not see is answered exactly as an
unknown id, so that ids of other tenants cannot be probed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from temporalio.service import RPCError, RPCStatusCode

from agentloop.server.access.auth import Caller
from agentloop.server.settings import ServerSettings
from agentloop.shared.base.contracts import WORKFLOW_NAME
from agentloop.shared.runs.search_attributes import AGENT_NAME, AGENT_ROOT_RUN, AGENT_TENANT

if TYPE_CHECKING:
    from agentloop.client.agent_client import AgentClient


@dataclass(frozen=True)
class RunFacts:
    """What decides who sees a run: its ``AgentTenant``, ``AgentName`` and,
    for a sub-agent's run, ``AgentRootRun`` (the top run of its tree)."""

    tenant: str | None = None
    agent: str | None = None
    root_run: str | None = None


@dataclass(frozen=True)
class Visible:
    """The token may see the run."""


@dataclass(frozen=True)
class Hidden:
    """The token may not see the run: answer as for an unknown id."""

    why: str


@dataclass(frozen=True)
class AskRoot:
    """A sub-agent's run of an agent the token does not name: it may see the
    run if it may see the top run of its tree (``root_run``)."""

    root_run: str


Decision = Visible | Hidden | AskRoot


def allowed_agents(settings: ServerSettings, caller: Caller) -> frozenset[str] | None:
    """The agent names whose runs ``caller`` may see (None: any): the agents
    its token names, by the name they are registered under and their spec's
    name."""
    if caller.agents is None:
        return None
    agents = settings.agents
    return frozenset(caller.agents) | {agents[name].name for name in caller.agents if name in agents}


def unscoped(caller: Caller) -> bool:
    """The caller sees every run (no tenant, no agent list): nothing to check."""
    return caller.tenant is None and caller.agents is None


def decide(caller: Caller, agents: frozenset[str] | None, facts: RunFacts) -> Decision:
    """Whether ``caller`` (allowed ``agents``, see :func:`allowed_agents`) may
    see the run ``facts`` describe. A tenant token sees its tenant's runs
    only (not runs of no tenant); an agent list sees its agents' runs, and
    their sub-agents' runs when the tree's top run is one of them."""
    if caller.tenant is not None and facts.tenant != caller.tenant:
        return Hidden("another tenant's run")
    if agents is None or (facts.agent is not None and facts.agent in agents):
        return Visible()
    if facts.root_run:
        return AskRoot(facts.root_run)
    return Hidden("another agent's run")


def facts_of(description: Any) -> RunFacts:
    """The :class:`RunFacts` of a Temporal workflow description (or a listed execution)."""
    attrs = description.typed_search_attributes
    return RunFacts(tenant=attrs.get(AGENT_TENANT), agent=attrs.get(AGENT_NAME), root_run=attrs.get(AGENT_ROOT_RUN))


@dataclass(frozen=True)
class Found:
    """The run, and its Temporal description."""

    description: Any


@dataclass(frozen=True)
class Unknown:
    """No run has this id."""


@dataclass(frozen=True)
class NotYours:
    """A run has this id, but the token may not see it."""


@dataclass(frozen=True)
class NotARun:
    """A workflow has this id, but it is not an agent run (a tenant's quota
    ledger, an eval, a user's own workflow): the run routes do not serve it."""

    reason: str


Lookup = Found | Unknown | NotYours | NotARun


def not_a_run(run_id: str, workflow_type: str | None) -> str | None:
    """Why the workflow ``run_id`` of ``workflow_type`` is not served as a
    run, or None for a run. The namespace holds other workflows too: a
    tenant's quota ledger (an ``act`` token that could cancel it would lift
    the quota only ``admin`` sets), evals, the user's own."""
    if workflow_type == WORKFLOW_NAME:
        return None
    return (f"{run_id[:200]!r} is not a run (its workflow is a {str(workflow_type)[:80]!r}): the run routes "
            "serve agent runs only")


async def _describe(client: AgentClient, run_id: str) -> Any | None:
    try:
        return await client.temporal.get_workflow_handle(run_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise


async def find_run(client: AgentClient, settings: ServerSettings, caller: Caller, run_id: str) -> Lookup:
    """Run ``run_id`` as ``caller`` may know it: :class:`Found` with its
    description, :class:`Unknown`, :class:`NotARun`, or :class:`NotYours` (callers answer it
    as :class:`Unknown`, or as an id in use where an id would be taken).

    Raises:
        RPCError: Temporal failed otherwise than "not found".
    """
    description = await _describe(client, run_id)
    if description is None:
        return Unknown()
    refused = not_a_run(run_id, description.workflow_type)
    if refused is not None:
        return NotARun(refused)
    agents = allowed_agents(settings, caller)
    decision = decide(caller, agents, facts_of(description))
    if isinstance(decision, AskRoot):  # one more describe, for sub-agents of agent-limited tokens only
        root = await _describe(client, decision.root_run)
        decision = decide(caller, agents, RunFacts(facts_of(description).tenant,
                                                   facts_of(root).agent if root is not None else None))
    return Found(description) if isinstance(decision, Visible) else NotYours()


def _quoted(value: str) -> str:
    """A visibility query's string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def list_clause(caller: Caller, agents: frozenset[str] | None) -> str | None:
    """The visibility query clause that lists only the runs ``caller`` may
    see (None: every run): its tenant, and its agents (a sub-agent's run of
    another agent is listed by its tree's top run, not by itself)."""
    clauses = []
    if caller.tenant is not None:
        clauses.append(f"{AGENT_TENANT.name}={_quoted(caller.tenant)}")
    if agents is not None:
        clauses.append(f"{AGENT_NAME.name} IN ({', '.join(_quoted(a) for a in sorted(agents))})")
    return " AND ".join(clauses) or None


def listed(caller: Caller, agents: frozenset[str] | None, rows: Iterable[tuple[RunFacts, Any]]) -> list[Any]:
    """The rows whose run ``caller`` may see: the list query's clause again,
    on what Temporal returned."""
    return [row for facts, row in rows if isinstance(decide(caller, agents, facts), Visible)]
