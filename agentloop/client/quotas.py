"""Spend quotas per tenant, from backend code: set a tenant's limits and
read its ledger (``agentloop quota``, ``/v1/quotas/{tenant}``).

A tenant's ledger is the workflow ``agentloop-quota-<tenant>``
(``agentloop.workflows.quota_ledger``); setting limits starts it on the
client's task queue when it is not running yet (update-with-start), so a
tenant has a ledger once it has a quota, and runs of a tenant without one
reserve nothing.
"""

from __future__ import annotations

from typing import Any

from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode

from agentloop.shared.base.errors import UserError
from agentloop.shared.base.priority import tenant_problem
from agentloop.shared.runs import quotas
from agentloop.shared.runs.quotas import QuotaLimits, QuotaView


class AgentQuotas:
    """Tenants' spend quotas (``AgentClient.quotas``)."""

    def __init__(self, client: Client, task_queue: str) -> None:
        self.temporal, self.task_queue = client, task_queue

    async def set(self, tenant: str, limits: QuotaLimits) -> QuotaView:
        """Set ``tenant``'s limits (its ledger starts if it was not running);
        the ledger as it is after.

        Raises:
            UserError: The ledger refused the limits (none given).
        """
        check_tenant(tenant)
        if not limits.limited:
            raise UserError(f"the quota of {tenant!r} was not set: a quota limits tokens (--tokens) or US "
                            "dollars (--usd), or both")
        start: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
            quotas.QUOTA_WORKFLOW_NAME, {"tenant": tenant}, id=quotas.ledger_id(tenant), task_queue=self.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )
        try:
            return await self.temporal.execute_update_with_start_workflow(
                quotas.SET_LIMITS_UPDATE, limits, start_workflow_operation=start, result_type=QuotaView)
        except WorkflowUpdateFailedError as err:
            cause = err.cause
            raise UserError(f"the quota of {tenant!r} was not set: {getattr(cause, 'message', cause)}") from None

    async def get(self, tenant: str) -> QuotaView | None:
        """``tenant``'s ledger; None when it has no quota (no ledger)."""
        check_tenant(tenant)
        handle = self.temporal.get_workflow_handle(quotas.ledger_id(tenant))
        try:
            return await handle.query(quotas.QUOTA_QUERY, result_type=QuotaView)
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return None
            raise


def check_tenant(tenant: str) -> str:
    """``tenant``, checked as a run's tenant is (a workflow id is made of it)."""
    problem = tenant_problem(tenant)
    if problem is not None:
        raise UserError(f"{problem}: {tenant[:80]!r}")
    return tenant
