"""``/v1/quotas/{tenant}``: a tenant's spend quota (scope ``read`` to read
it, ``admin`` to set it). A token with a tenant reads (and, with ``admin``,
sets) its own tenant's quota only; another tenant's reads as no quota."""

from __future__ import annotations

from fastapi import APIRouter, Body, Path

from agentloop.server.access.auth import Caller
from agentloop.server.deps import Admin, Reader, ServerState, State
from agentloop.server.problems import Problem, problem_responses
from agentloop.shared.base.errors import UserError
from agentloop.shared.runs.quotas import QuotaLimits, QuotaView

router = APIRouter(tags=["quotas"], responses=problem_responses(401, 403, 422))

#: A tenant in a path: printable, no spaces (it names a workflow id).
_TENANT = r"^[^\s/\\]{1,200}$"


@router.get("/quotas/{tenant}", response_model=QuotaView, responses=problem_responses(404))
async def get_quota(tenant: str = Path(pattern=_TENANT), caller: Caller = Reader,
                    state: ServerState = State) -> QuotaView:
    """The tenant's limits, window, spend and the runs holding reservations."""
    # A tenant's token reads its own tenant's quota only; another's is answered as none.
    found = await state.client.quotas.get(tenant) if caller.tenant in (None, tenant) else None
    if found is None:
        raise Problem(404, "No quota", f"tenant {tenant!r} has no quota (PUT /v1/quotas/{tenant} sets one)")
    return found


@router.put("/quotas/{tenant}", response_model=QuotaView)
async def set_quota(tenant: str = Path(pattern=_TENANT), limits: QuotaLimits = Body(...), caller: Caller = Admin,
                    state: ServerState = State) -> QuotaView:
    """Set the tenant's limits (its ledger starts when it had none)."""
    if caller.tenant not in (None, tenant):
        raise Problem(403, "Tenant not allowed", f"token {caller.name!r} sets the quota of tenant "
                      f"{caller.tenant!r} only; it asked for {tenant[:80]!r}")
    try:
        return await state.client.quotas.set(tenant, limits)
    except UserError as err:
        raise Problem(422, "Quota refused", str(err)) from None
