"""Runs of a tenant with a quota, on the real dev server: at the limit they
wait for the window to turn (status ``waiting_for_quota``, an event saying
until when) and go on; or they fail with ``quota_exceeded``. What they did not
use goes back to the ledger; a run without a tenant asks nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agentloop import AgentClient, AgentSpec
from agentloop.shared.base.usage import Usage
from agentloop.shared.runs.quotas import QuotaLimits
from agentloop.shared.runs.result import QuotaExceeded
from agentloop.testing import call, calls, reply, script

STEP = Usage(input_tokens=60, output_tokens=40)  # 100 tokens a step


def costed(response: Any) -> Any:
    return response.model_copy(update={"usage": STEP})


def three_steps() -> str:
    return script(costed(calls(call("list_dir", {"path": "."}))), costed(calls(call("list_dir", {"path": "."}))),
                  costed(reply("done")))


def scheduled(history: Any) -> list[str]:
    return [e.activity_task_scheduled_event_attributes.activity_type.name for e in history.events
            if e.HasField("activity_task_scheduled_event_attributes")]


async def events_of(agent_client: AgentClient, run_id: str) -> list[Any]:
    return [e async for e in agent_client.get_handle(run_id).events()]


async def test_at_the_limit_a_run_waits_for_the_window_then_goes_on(
    agent_client: AgentClient, worker: Callable[..., Any], task_queue: str
) -> None:
    tenant = f"wait-{task_queue}"
    async with worker():
        # One step's worth per 2-second window: three steps need three windows.
        await agent_client.quotas.set(tenant, QuotaLimits(tokens=100, window_seconds=2, at_limit="wait"))
        handle = await agent_client.start(AgentSpec(model=three_steps(), tools=["list_dir"]), "go", tenant=tenant)
        result = await handle.result()
        view = await agent_client.quotas.get(tenant)
        events = await events_of(agent_client, handle.run_id)
    assert result.status == "completed" and result.final_text == "done"
    waits = [e for e in events if e.type == "agent.run.quota.waiting"]
    assert waits and all(w.tenant == tenant and "spent its quota" in w.message for w in waits)
    statuses = [e.status for e in events if e.type == "agent.run.status.changed"]
    assert "waiting_for_quota" in statuses and statuses.count("waiting_for_quota") == len(waits)
    assert view is not None and view.holders == {}  # released at the end
    assert view.total_spent.tokens == result.usage.total_tokens == 300


async def test_tenant_spend_goes_to_the_metrics_the_tenant_label_opt_in(
    agent_client: AgentClient, worker: Callable[..., Any], task_queue: str
) -> None:
    from prometheus_client import generate_latest

    from agentloop.workers.metrics import AgentMetrics
    from agentloop.workers.telemetry import Telemetry

    tenant = f"metered-{task_queue}"
    labelled, plain = AgentMetrics(tenant_label=True), AgentMetrics(tenant_label=False)
    for metrics in (labelled, plain):
        async with worker(telemetry=Telemetry(traces=False, metrics=metrics)):
            await agent_client.quotas.set(tenant, QuotaLimits(tokens=10**6))
            await (await agent_client.start(AgentSpec(model=three_steps(), tools=["list_dir"]), "go",
                                            tenant=tenant)).result()
    assert f'agentloop_tenant_spend_tokens_total{{tenant="{tenant}"}} 300.0' in generate_latest(
        labelled.registry).decode()
    assert 'agentloop_tenant_spend_tokens_total{tenant=""} 300.0' in generate_latest(plain.registry).decode()


async def test_at_the_limit_a_run_fails_with_quota_exceeded_when_the_policy_says_so(
    agent_client: AgentClient, worker: Callable[..., Any], task_queue: str
) -> None:
    tenant = f"fail-{task_queue}"
    async with worker():
        await agent_client.quotas.set(tenant, QuotaLimits(tokens=100, window_seconds=86400, at_limit="fail"))
        handle = await agent_client.start(AgentSpec(model=three_steps(), tools=["list_dir"]), "go", tenant=tenant)
        with pytest.raises(QuotaExceeded) as info:
            await handle.result()
        view = await agent_client.quotas.get(tenant)
    assert info.value.reason == "quota_exceeded"
    assert f"tenant {tenant!r} has spent its quota (100 tokens of 100 tokens" in str(info.value)
    assert info.value.result is not None and info.value.result.report.step_count == 1
    assert view is not None and view.holders == {} and view.spent.tokens == 100


async def test_runs_without_a_tenant_or_a_quota_reserve_nothing(
    agent_client: AgentClient, worker: Callable[..., Any], task_queue: str
) -> None:
    async with worker():
        plain = await agent_client.start(AgentSpec(model=three_steps(), tools=["list_dir"]), "go")
        await plain.result()
        free = await agent_client.start(AgentSpec(model=three_steps(), tools=["list_dir"]), "go",
                                        tenant=f"free-{task_queue}")
        await free.result()
    plain_history = await agent_client.temporal.get_workflow_handle(plain.run_id).fetch_history()
    assert "quota_ledger" not in scheduled(plain_history)
    free_history = await agent_client.temporal.get_workflow_handle(free.run_id).fetch_history()
    # a tenant without a quota: asked once, answered unlimited, never again
    assert scheduled(free_history).count("quota_ledger") == 1
