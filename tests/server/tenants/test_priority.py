"""A run's priority and tenant on the real dev server (fairness on in its
dynamic config): they reach the workflow, its activities and its sub-agents
(read from the histories), and the server dispatches by them."""

from __future__ import annotations

from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from agentloop import AgentClient
from agentloop.shared.definition.spec import SubAgent
from agentloop.shared.runs.search_attributes import AGENT_TENANT
from agentloop.testing import call, calls, script
from agentloop.tools.registry import ToolRegistry
from tests.helpers.agents import echo_results, spec

SCHEDULED = {EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: "activity_task_scheduled_event_attributes",
             EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
                 "start_child_workflow_execution_initiated_event_attributes"}


async def priorities(client: Client, run_id: str) -> tuple[Any, list[tuple[str, Any]]]:
    """The priority a workflow started with, and that of each activity and
    child it scheduled (``(name, priority)``)."""
    history = await client.get_workflow_handle(run_id).fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes.priority
    scheduled = []
    for event in history.events:
        if event.event_type in SCHEDULED:
            attrs = getattr(event, SCHEDULED[event.event_type])
            name = attrs.activity_type.name if hasattr(attrs, "activity_type") else attrs.workflow_type.name
            scheduled.append((name, attrs.priority))
    return started, scheduled


async def test_priority_and_tenant_reach_every_activity_and_sub_agent(
        agent_client: AgentClient, worker, registry: ToolRegistry, temporal_client: Client) -> None:
    @registry.tool(read_only=True)
    async def my_priority() -> str:
        """Answers ok."""
        return "ok"

    child = SubAgent(spec=spec(script(calls(call("my_priority", {})), echo_results), name="helper",
                               tools=["my_priority"]), description="A helper.")
    lead = spec(script(calls(call("my_priority", {}), call("helper", {"task": "help"})), echo_results),
                name="lead", tools=["my_priority"], sub_agents={"helper": child}, priority=2)
    async with worker():
        handle = await agent_client.start(lead, "go", tenant="acme")
        result = await handle.result()
    assert result.status == "completed", result.error
    assert result.final_text == "my_priority:ok | helper:my_priority:ok"
    started, scheduled = await priorities(temporal_client, handle.run_id)
    assert (started.priority_key, started.fairness_key) == (2, "acme")
    # Every activity and the child leave their priority unset, which Temporal
    # reads as "the run's" (``temporalio.common.Priority``); the child's own
    # history shows what it got: the run's priority and tenant.
    # (quota_ledger: a tenant's run asks its tenant's quota before its first step.)
    assert sorted({name for name, _ in scheduled}) == ["AgentRunWorkflow", "call_model", "execute_tool",
                                                       "quota_ledger"]
    assert all(p.priority_key == 0 and not p.fairness_key for _, p in scheduled), scheduled
    child_id = f"{handle.run_id}-sub-call_0_1"
    child_started, child_scheduled = await priorities(temporal_client, child_id)
    assert (child_started.priority_key, child_started.fairness_key) == (2, "acme")
    assert child_scheduled and all(p.priority_key == 0 and not p.fairness_key for _, p in child_scheduled)
    for run_id in (handle.run_id, child_id):
        described = await temporal_client.get_workflow_handle(run_id).describe()
        assert described.typed_search_attributes.get(AGENT_TENANT) == "acme"
