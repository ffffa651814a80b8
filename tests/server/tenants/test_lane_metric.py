"""The lane-wait metric's ``tenant`` label (opt-in) names the run's tenant:
the run hands its tenant to the model call, since Temporal reports an
inherited priority as unset inside the activity."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from agentloop import AgentClient
from agentloop.testing import reply, script
from tests.helpers import agents


async def test_the_lane_wait_metric_names_the_runs_tenant(
    agent_client: AgentClient, worker: Callable[..., Any], task_queue: str
) -> None:
    from prometheus_client import generate_latest

    from agentloop.workers.metrics import AgentMetrics
    from agentloop.workers.telemetry import Telemetry

    tenant = f"lane-{task_queue}"
    labelled = AgentMetrics(tenant_label=True)
    async with worker(telemetry=Telemetry(traces=False, metrics=labelled)):
        result = await agent_client.run(agents.spec(script(reply("one"))), "go", tenant=tenant)
        await agent_client.run(agents.spec(script(reply("two"))), "go")
    # The model call's input carries the tenant (the label's source when the priority reads as unset).
    history = await agent_client.temporal.get_workflow_handle(result.run_id).fetch_history()
    (scheduled,) = [e.activity_task_scheduled_event_attributes for e in history.events
                    if e.HasField("activity_task_scheduled_event_attributes")
                    and e.activity_task_scheduled_event_attributes.activity_type.name == "call_model"]
    assert json.loads(scheduled.input.payloads[0].data)["tenant"] == tenant
    text = generate_latest(labelled.registry).decode()
    assert f'agentloop_lane_wait_seconds_count{{lane="scripted",tenant="{tenant}"}} 1.0' in text, text
    assert 'agentloop_lane_wait_seconds_count{lane="scripted",tenant="none"} 1.0' in text
