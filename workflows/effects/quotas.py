"""A run's side of its tenant's spend quota (``agentloop.shared.runs.quotas``):
before an LLM step, reserve the next chunk when the last is used (through the
``quota_ledger`` activity); wait for the window to turn, or fail, as the
ledger says; give back what is left when the run ends. Deterministic."""

from __future__ import annotations

from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    from agentloop.shared.definition.pricing import run_cost
    from agentloop.shared.definition.spec import AgentSpec
    from agentloop.shared.runs import quotas
    from agentloop.shared.runs.events import QuotaWaiting
    from agentloop.shared.runs.quotas import (
        Amount,
        OutOfQuota,
        Proceed,
        QuotaAnswer,
        QuotaCall,
        ReleaseRequest,
        ReserveRequest,
        RunQuota,
        WaitForQuota,
    )
    from agentloop.shared.runs.state import LoopState
    from agentloop.workflows.decisions.next_step import FailRun
    from agentloop.workflows.effects.recorder import RunRecorder, observe

QUOTA_TIMEOUT = timedelta(seconds=30)


async def call_ledger(call: QuotaCall) -> QuotaAnswer:
    """Activity ``quota_ledger`` on the run's own queue: retried until it
    answers (it is idempotent). Not a local activity: one holds its run's
    workflow task open while it waits, and hundreds of runs waiting on one
    ledger would hold every workflow-task slot its worker has, the ledger's
    own task then waiting behind them."""
    return await workflow.execute_activity(
        quotas.QUOTA_ACTIVITY, call, result_type=QuotaAnswer, summary="quota",
        start_to_close_timeout=QUOTA_TIMEOUT,
        retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=5)),
    )


class QuotaKeeper:
    """A tenant's run: its reservations (kept in ``state.quota``)."""

    def __init__(self, state: LoopState, recorder: RunRecorder, run_id: str, tenant: str, spec: AgentSpec) -> None:
        self.state, self.recorder, self.run_id, self.tenant, self.spec = state, recorder, run_id, tenant, spec

    def used(self) -> Amount:
        """The run's own usage so far (its sub-agents reserve for themselves)."""
        own = self.state.usage - self.state.sub_usage
        return Amount(tokens=own.total_tokens, usd=run_cost(own, self.spec.model, self.spec.budget) or 0.0)

    async def before_step(self) -> FailRun | None:
        """Reserve when due; wait while the tenant's window is spent; None: go on."""
        quota = self.state.quota or RunQuota()
        while quotas.reservation_due(quota, used := self.used()):
            budget = self.spec.budget
            request = ReserveRequest(run_id=self.run_id, seq=quota.seq + 1, used=quotas.since_reported(quota, used),
                                     want=quotas.run_want(budget.max_total_tokens if budget else None,
                                                          budget.cost_limit_usd if budget else None, used))
            call = QuotaCall(tenant=self.tenant, reserve=request)
            answer = await call_ledger(call)
            observe(call, self.spec.name, self.spec.model)  # the tenant's spend, to the worker's metrics
            quota, step = quotas.after_answer(quota.model_copy(update={"seq": request.seq}), used, answer)
            self.state.quota = quota
            match step:
                case Proceed():
                    break
                case OutOfQuota(message):
                    return FailRun("quota_exceeded", message)
                case WaitForQuota(until, message):
                    await self._wait(until, message)
        return None

    async def _wait(self, until: datetime, message: str) -> None:
        self.state.quota_wait = until
        self.recorder.emit(QuotaWaiting, tenant=self.tenant, until=until, message=message)
        self.recorder.index()
        try:
            await workflow.sleep(quotas.wait_seconds(until, workflow.now()))
        finally:
            self.state.quota_wait = None
        self.recorder.index()

    def holds(self) -> bool:
        """Whether the run holds a reservation to give back (it reserved, and has not released)."""
        quota = self.state.quota
        return quota is not None and not quota.unlimited and quota.seq > 0

    async def release(self) -> None:
        """The run ends: report what it used since it last asked; the rest
        goes back. A signal to the ledger, straight from the workflow (no
        activity, no answer to wait for: a release repeated, or of a run the
        ledger no longer holds, changes nothing)."""
        if not self.holds():
            return
        quota = self.state.quota
        assert quota is not None
        used = self.used()
        request = ReleaseRequest(run_id=self.run_id, used=quotas.since_reported(quota, used))
        self.state.quota = quota.model_copy(update={"reported": used, "left": Amount(), "unlimited": True})
        observe(QuotaCall(tenant=self.tenant, release=request), self.spec.name, self.spec.model)
        try:
            await workflow.get_external_workflow_handle(quotas.ledger_id(self.tenant)).signal(
                quotas.RELEASE_UPDATE, request)
        except FailureError:
            pass  # the ledger is gone (terminated): nothing to give back to
