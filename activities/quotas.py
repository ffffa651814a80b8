"""The ``quota_ledger`` activity: a run reserves from its tenant's ledger
workflow (``agentloop.workflows.quota_ledger``) with the update ``reserve``
(a release the run signals itself). A workflow cannot send an update, so
this short activity does, with the worker's client.

Idempotent: the update id is the run id and the request number, and the
ledger answers a request it has answered again without reserving twice
(``agentloop.shared.runs.quotas.decide_reserve``), so a retried activity is safe.
A tenant without a ledger (no quota set) is answered ``unlimited``.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.service import RPCError, RPCStatusCode

from agentloop.shared.runs import quotas
from agentloop.shared.runs.quotas import QuotaAnswer, QuotaCall


@activity.defn(name=quotas.QUOTA_ACTIVITY)
async def quota_ledger(call: QuotaCall) -> QuotaAnswer:
    """Send ``call``'s reservation or release to the tenant's ledger."""
    handle = activity.client().get_workflow_handle(quotas.ledger_id(call.tenant))
    try:
        if call.reserve is not None:
            request = call.reserve
            return await handle.execute_update(quotas.RESERVE_UPDATE, request, result_type=QuotaAnswer,
                                               id=f"{request.run_id}-quota-{request.seq}")
        if call.release is not None:
            await handle.signal(quotas.RELEASE_UPDATE, call.release)
        return QuotaAnswer(kind="granted")
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return QuotaAnswer(kind="unlimited")  # no ledger: the tenant has no quota
        raise
