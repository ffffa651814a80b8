"""A tenant's quota ledger on the real dev server: limits set with
update-with-start, reservations through the quota activity's update (a
retried one reserves once), continue-as-new that keeps the state."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agentloop import AgentClient
from agentloop.shared.base.errors import UserError
from agentloop.shared.runs import quotas
from agentloop.shared.runs.quotas import Amount, QuotaAnswer, QuotaLimits, ReleaseRequest, ReserveRequest
from agentloop.workflows.quota_ledger import LedgerInput
from tests.helpers.polling import eventually


async def reserve(agent_client: AgentClient, tenant: str, run_id: str, seq: int, used: int = 0) -> QuotaAnswer:
    # What the quota_ledger activity sends, with its update id.
    handle = agent_client.temporal.get_workflow_handle(quotas.ledger_id(tenant))
    request = ReserveRequest(run_id=run_id, seq=seq, used=Amount(tokens=used))
    return await handle.execute_update(quotas.RESERVE_UPDATE, request, result_type=QuotaAnswer,
                                       id=f"{run_id}-quota-{seq}")


async def test_the_ledger_keeps_its_state_across_continue_as_new(
    agent_client: AgentClient, worker: Callable[..., Any], task_queue: str
) -> None:
    tenant = f"acme-{task_queue}"
    assert await agent_client.quotas.get(tenant) is None
    async with worker():
        # as `quota set` starts it, but continuing as new after five updates
        await agent_client.temporal.start_workflow(
            quotas.QUOTA_WORKFLOW_NAME, LedgerInput(tenant=tenant, updates_per_run=5), id=quotas.ledger_id(tenant),
            task_queue=task_queue)
        view = await agent_client.quotas.set(tenant, QuotaLimits(tokens=1000, window_seconds=86400))
        assert view.limits is not None and view.limits.tokens == 1000 and view.window_end is not None
        first_run = (await agent_client.temporal.get_workflow_handle(quotas.ledger_id(tenant)).describe()).run_id
        answers = [await reserve(agent_client, tenant, "run-a", seq, used=10 if seq > 1 else 0) for seq in range(1, 13)]
        assert {a.kind for a in answers} == {"granted"}
        # retried after it was applied (a new Temporal run forgot the update id): answered, not reserved again
        again = await reserve(agent_client, tenant, "run-a", 12, used=10)
        assert again == answers[-1]
        handle = agent_client.temporal.get_workflow_handle(quotas.ledger_id(tenant))
        await handle.signal(quotas.RELEASE_UPDATE, ReleaseRequest(run_id="run-a", used=Amount(tokens=5)))

        async def shown() -> Any:
            view = await agent_client.quotas.get(tenant)
            return view if view is not None and not view.holders else None

        view = await eventually(shown, "the release")
        assert view.spent.tokens == 11 * 10 + 5 and view.reserved.tokens == 0
        assert view.total_spent.tokens == 115
        described = await handle.describe()
        assert described.run_id != first_run  # it continued as new, at least once, with its state
        with pytest.raises(UserError, match="limits tokens"):
            await agent_client.quotas.set(tenant, QuotaLimits())


async def test_a_tenant_without_a_ledger_is_unlimited(agent_client: AgentClient) -> None:
    from temporalio.testing import ActivityEnvironment

    from agentloop.activities.quotas import quota_ledger
    from agentloop.shared.runs.quotas import QuotaCall

    env = ActivityEnvironment(client=agent_client.temporal)
    answer = await env.run(quota_ledger, QuotaCall(tenant="nobody-has-set-this",
                                                   reserve=ReserveRequest(run_id="r", seq=1)))
    assert answer.kind == "unlimited"
