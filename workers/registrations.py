"""What :class:`~agentloop.workers.plugin.AgentLoopPlugin` registers on a
worker: agentloop's workflows, and the activities of each role (the run's
loop, guardrails, context, tool hooks, evals, quotas). A new workflow or
activity goes here, once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentloop.activities.agent_activities import AgentActivities


def agentloop_workflows() -> tuple[type, ...]:
    """The workflows a worker of role ``all`` or ``models`` (and a replayer) registers."""
    from agentloop.workflows.agent_run import AgentRunWorkflow
    from agentloop.workflows.eval_run import AgentEvalWorkflow
    from agentloop.workflows.quota_ledger import QuotaLedgerWorkflow
    from agentloop.workflows.schedule_feed import ScheduleFeedWorkflow

    return (AgentRunWorkflow, ScheduleFeedWorkflow, AgentEvalWorkflow, QuotaLedgerWorkflow)


def with_workflows(registered: Any) -> list[type]:
    """``registered`` (a config's workflows, or None) and agentloop's, each once."""
    workflows = list(registered or [])
    return workflows + [w for w in agentloop_workflows() if w not in workflows]


def tools_queue_activities(acts: AgentActivities) -> list[Callable[..., Any]]:
    """The activities of the tools queue (``<queue>-tools``): a worker of
    role ``tools``, and the tools sibling of one of role ``all``."""
    return [acts.resolve_tools, acts.execute_tool, acts.load_context, acts.run_tool_hooks]


def role_activities(acts: AgentActivities, role: str) -> list[Callable[..., Any]]:
    """The activities a worker of ``role`` registers on its own queue."""
    from agentloop.activities.quotas import quota_ledger
    from agentloop.activities.versioning import current_deployment_version

    by_role: dict[str, list[Callable[..., Any]]] = {
        "all": [acts.call_model, acts.resolve_tools, acts.resolve_tools_here, acts.execute_tool,
                acts.execute_tool_here, acts.resolve_guardrails, acts.run_guardrail, acts.load_context,
                acts.run_tool_hooks, current_deployment_version, acts.eval_score, quota_ledger],
        # The *_here local activities refuse on models (no tools here), and replays read them from history.
        "models": [acts.call_model, acts.resolve_tools_here, acts.execute_tool_here, acts.resolve_guardrails,
                   acts.run_guardrail, current_deployment_version, acts.eval_score, quota_ledger],
        "tools": tools_queue_activities(acts),
    }
    return by_role[role]
