"""AgentQuotaLedger: one tenant's spend quota, one long-lived workflow per
tenant (id ``agentloop-quota-<tenant>``).

Runs reserve budget through the validated update ``reserve``, give back what
they did not use with ``release``; ``set_limits`` sets the limits; the query
``quota`` shows it all. The decisions are the pure functions of
:mod:`agentloop.shared.runs.quotas`; this class only keeps the state and
continues as new, with it, before its history grows large. Deterministic.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel, Field

    from agentloop.shared.runs import quotas
    from agentloop.shared.runs.quotas import (
        LedgerState,
        QuotaAnswer,
        QuotaLimits,
        QuotaView,
        ReleaseRequest,
        ReserveRequest,
    )
    from agentloop.workflows.workflow_sandbox import workflow_sandbox_from_env


class LedgerInput(BaseModel):
    """The ledger's input: its tenant, (after continue-as-new) its state, and
    how many updates it takes before it continues as new (in its input, so
    that a replay decides as the run did)."""

    tenant: str
    state: LedgerState | None = None
    updates_per_run: int = Field(default=quotas.UPDATES_PER_RUN, ge=1)


@workflow.defn(name=quotas.QUOTA_WORKFLOW_NAME, sandboxed=workflow_sandbox_from_env())
class QuotaLedgerWorkflow:
    """A tenant's spend ledger (docs/many-tenants.md)."""

    @workflow.init
    def __init__(self, input: LedgerInput) -> None:
        self._state = input.state or LedgerState(tenant=input.tenant)
        self._updates = 0  # in this Temporal run

    @workflow.run
    async def run(self, input: LedgerInput) -> None:
        await workflow.wait_condition(
            lambda: self._updates >= input.updates_per_run or workflow.info().is_continue_as_new_suggested())
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(LedgerInput(tenant=input.tenant, state=self._ledger,
                                             updates_per_run=input.updates_per_run))

    @property
    def _ledger(self) -> LedgerState:
        return self._state

    @workflow.update(name=quotas.RESERVE_UPDATE)
    def reserve(self, request: ReserveRequest) -> QuotaAnswer:
        self._state, answer = quotas.decide_reserve(self._ledger, request, workflow.now())
        self._updates += 1
        return answer

    @reserve.validator
    def _check_reserve(self, request: ReserveRequest) -> None:
        if not request.run_id:
            raise ValueError("a reservation names its run")

    @workflow.signal(name=quotas.RELEASE_UPDATE)
    def release(self, request: ReleaseRequest) -> None:
        """A run ended (a signal: the run sends it from its workflow, and waits for nothing)."""
        self._state = quotas.decide_release(self._ledger, request, workflow.now())
        self._updates += 1

    @workflow.update(name=quotas.SET_LIMITS_UPDATE)
    def set_limits(self, limits: QuotaLimits) -> QuotaView:
        self._state = quotas.set_limits(self._ledger, limits, workflow.now())
        self._updates += 1
        return quotas.view_of(self._ledger)

    @set_limits.validator
    def _check_limits(self, limits: QuotaLimits) -> None:
        if not limits.limited:
            raise ValueError("a quota limits tokens (--tokens) or US dollars (--usd), or both")

    @workflow.query(name=quotas.QUOTA_QUERY)
    def quota(self) -> QuotaView:
        return quotas.view_of(roll(self._ledger))


def roll(state: LedgerState) -> LedgerState:
    """The ledger as of now (a query changes nothing: the rolled state is only shown)."""
    return quotas.roll_window(state, workflow.now())
