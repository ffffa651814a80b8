"""One AgentRunFailed subclass per failure reason: the mapping, and the
exceptions a client sees from real runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agentloop import AgentClient, AgentSpec
from agentloop.shared.runs.result import MaxStepsExceeded
from agentloop.testing import call, calls, reply, script


async def test_a_max_steps_run_raises_max_steps_exceeded_from_its_handle(
    agent_client: AgentClient, worker: Callable[..., Any]
) -> None:
    model = script(*[calls(call("list_dir", {"path": "."})) for _ in range(3)], reply("never"))
    async with worker():
        handle = await agent_client.start(AgentSpec(model=model, tools=["list_dir"], max_steps=2), "loop")
        with pytest.raises(MaxStepsExceeded) as info:
            await handle.result()
    assert info.value.reason == "max_steps"
    assert info.value.result is not None and info.value.result.report.step_count == 2
    assert str(info.value).startswith(f"run {handle.run_id} failed (max_steps): ")
