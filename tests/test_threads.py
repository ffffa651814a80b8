"""Threads on the real dev server (README "Conversations"): follow-ups that
see the whole conversation, double-texting strategies, steering, restarts."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentloop import AgentClient, AgentSpec
from agentloop.activity_io import ModelRequest, ModelResponse
from agentloop.errors import DecisionRejected
from agentloop.search_attributes import AGENT_THREAD
from agentloop.testing import reply, script, script_every_step
from agentloop.threads import MessageRefused, ThreadBusy, ThreadNotFound


def recording(answer: Any) -> tuple[str, list[ModelRequest]]:
    """A scripted model (one function for every step) that keeps every request it gets."""
    seen: list[ModelRequest] = []

    def step(request: ModelRequest) -> ModelResponse:
        seen.append(request)
        return answer(request) if callable(answer) else answer

    return script_every_step(step), seen


def texts(request: ModelRequest) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in request.messages]


async def test_a_three_message_thread_sends_the_model_every_earlier_exchange(
    agent_client: AgentClient, worker: Any
) -> None:
    model, seen = recording(lambda r: reply(f"answer {sum(1 for m in r.messages if m.role == 'user')}"))
    spec = AgentSpec(model=model)
    async with worker():
        first = await agent_client.start(spec, "first question", thread_id="thread-three")
        assert (await first.result()).final_text == "answer 1"
        second = await agent_client.send("thread-three", "second question")
        assert second.turn == 2
        assert (await second.result()).final_text == "answer 2"
        third = await agent_client.send("thread-three", "third question")
        result = await third.result()
        assert result.final_text == "answer 3"
        assert [m.text for m in result.messages] == ["answer 3"]
        state = await third.state()
        assert (state.thread_id, state.turn, state.busy, state.status) == ("thread-three", 3, False, "running")
    assert texts(seen[2]) == [
        ("user", "first question"), ("assistant", "answer 1"),
        ("user", "second question"), ("assistant", "answer 2"),
        ("user", "third question"),
    ]
    description = await third.workflow_handle.describe()
    assert description.typed_search_attributes.get(AGENT_THREAD) == "thread-three"


async def test_send_to_a_missing_thread_says_so(agent_client: AgentClient, worker: Any) -> None:
    with pytest.raises(ThreadNotFound, match="thread no-such-thread does not exist; start it with `agentloop run --thread no-such-thread"):
        await agent_client.send("no-such-thread", "hello?")


async def test_send_to_a_run_that_is_not_a_thread_is_refused(agent_client: AgentClient, worker: Any) -> None:
    gate = asyncio.Event()

    async def slow(request: ModelRequest) -> ModelResponse:
        await gate.wait()
        return reply("done")

    async with worker():
        handle = await agent_client.start(AgentSpec(model=script(slow)), "work")
        with pytest.raises(MessageRefused, match=f"run {handle.run_id} is not a thread: start one with `agentloop run --thread ID`"):
            await agent_client.send(handle.run_id, "more")
        gate.set()
        assert (await handle.result()).final_text == "done"
