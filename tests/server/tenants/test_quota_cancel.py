"""A cancelled run of a tenant gives back what it reserved from the
tenant's quota when it ends, not when the window turns."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from agentloop import AgentClient
from agentloop.shared.runs.quotas import QuotaLimits
from agentloop.shared.runs.result import AgentRunFailed
from agentloop.testing import calls, reply, script
from tests.helpers import agents
from tests.helpers.agents import ASKING_TOOLS, awaiting, write
from tests.helpers.runs import wait_state

asking = partial(agents.spec, default_permission="auto", tools=ASKING_TOOLS)


async def test_a_cancelled_run_gives_its_reservation_back(
    agent_client: AgentClient, worker: Callable[..., Any], task_queue: str
) -> None:
    tenant = f"cancel-{task_queue}"
    async with worker():
        await agent_client.quotas.set(tenant, QuotaLimits(tokens=10_000, window_seconds=3600, chunk_tokens=1_000))
        handle = await agent_client.start(asking(script(calls(write("out.txt", "x")), reply("written"))), "write",
                                          tenant=tenant)
        await wait_state(handle, awaiting(), "the write to wait")
        held = await agent_client.quotas.get(tenant)
        assert held is not None and handle.run_id in held.holders  # a chunk reserved before its first step
        await handle.cancel()
        try:
            await handle.result()
        except AgentRunFailed as err:
            assert err.reason == "cancelled"
        view = await agent_client.quotas.get(tenant)
    assert view is not None and view.holders == {}  # given back at once: the hour's window has not turned
    assert not view.reserved.tokens
