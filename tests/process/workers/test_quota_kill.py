"""A tenant's ledger survives its worker being SIGKILLed while many runs
reserve from it: every run ends, nothing is counted twice, nothing is
over-spent beyond one chunk per run in flight, and nothing stays reserved."""

from __future__ import annotations

import asyncio
import signal

from agentloop import AgentClient, AgentRunFailed, AgentSpec
from agentloop.shared.runs import quotas
from agentloop.shared.runs.quotas import QuotaLimits
from tests.helpers.polling import eventually

RUNS, LIMIT = 12, 3000  # 12 runs of 300 tokens against 3000: most finish, some are refused


async def test_the_ledger_survives_a_worker_sigkill_with_nothing_over_spent(
    agent_client: AgentClient, spawn_worker, task_queue: str
) -> None:
    tenant = f"kill-{task_queue}"
    first = spawn_worker("tests.helpers.fixtures.quota_fixture")
    await eventually(lambda: agent_client.quotas.set(tenant, QuotaLimits(tokens=LIMIT, at_limit="fail")),
                     f"the quota to be set (worker log: {spawn_worker.log})", timeout=60, ignoring=(Exception,))
    spec = AgentSpec(model="scripted:quota_steps", tools=["nap"], default_permission="allow",
                     heartbeat_timeout_seconds=2)
    handles = [await agent_client.start(spec, "go", tenant=tenant) for _ in range(RUNS)]

    async def spending() -> bool:
        view = await agent_client.quotas.get(tenant)
        return view is not None and (view.spent.tokens or 0) >= 300

    await eventually(spending, "runs to spend", timeout=60)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    spawn_worker("tests.helpers.fixtures.quota_fixture")

    async def outcome(handle):  # noqa: ANN001, ANN202
        try:
            return await handle.result()
        except AgentRunFailed as err:
            assert err.reason == "quota_exceeded", err
            return err.result

    results = await asyncio.wait_for(asyncio.gather(*(outcome(h) for h in handles)), timeout=120)
    used = sum(r.usage.total_tokens for r in results)
    view = await eventually(lambda: agent_client.quotas.get(tenant), "the ledger")
    assert view.holders == {}  # every run gave back what it held
    assert view.total_spent.tokens == used  # each run's usage counted once, retries and all
    chunk = max(1, round(LIMIT * quotas.CHUNK_SHARE))
    assert used <= LIMIT + RUNS * max(chunk, 100)  # the limit, plus at most one step per run in flight
    assert any(r.status == "failed" for r in results) and any(r.status == "completed" for r in results)
