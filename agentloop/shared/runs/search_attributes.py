"""The search attributes a run keeps up to date, for operators' queries::

    temporal workflow list --query 'AgentStatus="awaiting_approval"'

A cluster must know them before a worker runs (the embedded dev server
registers them itself); docs/operating.md shows the ``temporal operator
search-attribute create`` command.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

if TYPE_CHECKING:
    from agentloop.shared.definition.spec import AgentSpec

#: The run's status (``agentloop.shared.runs.run.RunStatus``).
AGENT_STATUS = SearchAttributeKey.for_keyword("AgentStatus")
#: ``AgentSpec.name``.
AGENT_NAME = SearchAttributeKey.for_keyword("AgentName")
#: ``AgentSpec.model``, ``provider:model``.
AGENT_MODEL = SearchAttributeKey.for_keyword("AgentModel")
#: Names of the tools whose calls wait for approval or client outputs.
AGENT_PENDING_TOOLS = SearchAttributeKey.for_keyword_list("AgentPendingTools")
#: A sub-agent's run: the run that delegated to it.
AGENT_PARENT_RUN = SearchAttributeKey.for_keyword("AgentParentRun")
#: A sub-agent's run: the top run of its tree (``AgentRootRun="<run id>"``
#: finds every run below it).
AGENT_ROOT_RUN = SearchAttributeKey.for_keyword("AgentRootRun")

#: A forked run: the run it was forked from (``AgentForkedFrom="<run id>"``
#: finds every fork of a run).
AGENT_FORKED_FROM = SearchAttributeKey.for_keyword("AgentForkedFrom")

#: A thread's run: the thread id (``AgentThread="<thread id>"`` finds every
#: run of a thread, across continue-as-new).
AGENT_THREAD = SearchAttributeKey.for_keyword("AgentThread")

#: A run started by a schedule (``agentloop schedule``): the schedule's name
#: (``AgentSchedule="<name>"`` finds every firing's run).
AGENT_SCHEDULE = SearchAttributeKey.for_keyword("AgentSchedule")

#: The fingerprint of the run's agent definition (``agentloop.shared.definition.fingerprint``):
#: ``AgentVersion="<fingerprint>"`` finds every run of one definition.
AGENT_VERSION = SearchAttributeKey.for_keyword("AgentVersion")

#: A case run of an eval (``agentloop eval``, docs/evals.md): the eval's id
#: (``AgentEval="<eval id>"`` finds every case run of an eval). A
#: KeywordList of one value: a SQL visibility store has 10 Keyword columns,
#: and the other ten attributes take them (a list matches ``=`` as well).
AGENT_EVAL = SearchAttributeKey.for_keyword_list("AgentEval")
#: The run's tenant (``AgentRunInput.tenant``): ``AgentTenant="<tenant>"``
#: finds every run of one tenant (docs/many-tenants.md).
AGENT_TENANT = SearchAttributeKey.for_keyword("AgentTenant")

#: Every attribute, by name, with its Temporal type (as the CLI spells it).
SEARCH_ATTRIBUTES: dict[str, str] = {
    AGENT_STATUS.name: "Keyword",
    AGENT_NAME.name: "Keyword",
    AGENT_MODEL.name: "Keyword",
    AGENT_PENDING_TOOLS.name: "KeywordList",
    AGENT_PARENT_RUN.name: "Keyword",
    AGENT_ROOT_RUN.name: "Keyword",
    AGENT_THREAD.name: "Keyword",
    AGENT_FORKED_FROM.name: "Keyword",
    AGENT_SCHEDULE.name: "Keyword",
    AGENT_VERSION.name: "Keyword",
    AGENT_EVAL.name: "KeywordList",
    AGENT_TENANT.name: "Keyword",
}


def create_commands(namespace: str = "default") -> list[str]:
    """The ``temporal`` commands that register the attributes on a cluster."""
    return [
        f"temporal operator search-attribute create --namespace {namespace} --name {name} --type {kind}"
        for name, kind in SEARCH_ATTRIBUTES.items()
    ]


def registration_script() -> str:
    """A POSIX shell script for the ``temporal`` CLI that registers the
    attributes in ``$TEMPORAL_NAMESPACE`` (default ``default``) of the server
    it is configured for (``TEMPORAL_ADDRESS``, ``TEMPORAL_TLS_*``, ...), once
    the namespace exists, leaving those already registered alone.
    ``deploy/register-search-attributes.sh`` is this script (``python
    deploy/generate.py`` writes it) and deploy/kubernetes/ carries it."""
    lines = [
        "#!/bin/sh",
        "# Generated from agentloop/shared/runs/search_attributes.py by `python deploy/generate.py`:",
        "# edit those, not this file. Registers agentloop's search attributes in",
        "# $TEMPORAL_NAMESPACE (default: default) of the Temporal server the temporal CLI",
        "# is configured for (TEMPORAL_ADDRESS, TEMPORAL_TLS_*, ...), once the namespace",
        "# exists; attributes already registered are left alone. Exits non-zero unless",
        "# every one is registered at the end.",
        "set -u",
        'namespace="${TEMPORAL_NAMESPACE:-default}"',
        "tries=0",
        'until temporal operator namespace describe --namespace "$namespace" >/dev/null 2>&1; do',
        "  tries=$((tries + 1))",
        '  if [ "$tries" -ge 90 ]; then',
        '    echo "namespace $namespace is not reachable after 3 minutes: check TEMPORAL_ADDRESS" >&2',
        "    exit 1",
        "  fi",
        "  sleep 2",
        "done",
        'registered() { temporal operator search-attribute list --namespace "$namespace" | grep -qw "$1"; }',
    ]
    for name, kind in SEARCH_ATTRIBUTES.items():
        lines.append(f"registered {name} || temporal operator search-attribute create "
                     f'--namespace "$namespace" --name {name} --type {kind}')
    lines.append("missing=0")
    for name in SEARCH_ATTRIBUTES:
        lines.append(f'registered {name} || {{ echo "{name} is not registered" >&2; missing=1; }}')
    lines += ['[ "$missing" -eq 0 ] && echo "agentloop search attributes registered in namespace $namespace"',
              'exit "$missing"']
    return "\n".join(lines) + "\n"


def start_search_attributes(spec: AgentSpec, tenant: str | None = None) -> TypedSearchAttributes:
    """What a run is indexed with from its start, so ``temporal workflow
    list`` finds it at once (the run keeps them current from then on); a
    run of a tenant carries ``AgentTenant`` too."""
    from agentloop.shared.definition.fingerprint import agent_fingerprint

    pairs: list[SearchAttributePair[Any]] = [
        SearchAttributePair(AGENT_STATUS, "running"),
        SearchAttributePair(AGENT_NAME, spec.name),
        SearchAttributePair(AGENT_MODEL, spec.model),
        SearchAttributePair(AGENT_VERSION, agent_fingerprint(spec)),
    ]
    if tenant is not None:
        pairs.append(SearchAttributePair(AGENT_TENANT, tenant))
    return TypedSearchAttributes(pairs)
