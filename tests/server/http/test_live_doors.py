"""Live deltas through the protocol doors (docs/live-deltas.md), on a real
uvicorn ``agentloop serve`` app and an in-process worker that posts its
deltas to it, read with the protocols' own clients (the ``mcp`` package's,
``a2a-sdk``'s): a delta reaches the client before the history has it, and
the text the client assembles is the answer once, across a retried
attempt (MCP) and a resubscribe mid-message (A2A)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest
from a2a.server.tasks.task_manager import append_artifact_to_task
from a2a.types import a2a_pb2 as pb
from temporalio import activity

from agentloop import AgentClient, AgentSpec
from agentloop.activities import stream_publisher
from agentloop.activities.providers.models import ModelResolver
from agentloop.server.mcp.mapping import RESET_PREFIX
from agentloop.shared.base.contracts import LIVE_TOKEN_ENV, LIVE_URL_ENV
from agentloop.shared.base.messages import Message, TextPart
from agentloop.shared.base.usage import Usage
from agentloop.shared.definition.activity_io import DeltaSink, ModelRequest, ModelResponse, StreamDelta
from agentloop.shared.runs.events import MessageDelta
from tests.helpers.http_api import serve
from tests.helpers.mcp_client import client as mcp_client
from tests.helpers.servers.provider_servers import (
    OpenAIServer,
    openai_completion,
    openai_completion_chunks,
    openai_models,
    openai_stream,
)
from tests.server.http.test_a2a import a2a_client, message
from tests.server.http.test_live_deltas import LIVE, _history, live_settings


class Held:
    """Streams ``pieces[:hold]``, then holds the rest until ``release``
    (from its call ``held_call`` on; the calls before stream at once);
    notes its run's id."""

    def __init__(self, pieces: tuple[str, ...] = ("Hel", "lo"), hold: int = 1, held_call: int = 0) -> None:
        self.pieces, self.hold, self.held_call = pieces, hold, held_call
        self.release = asyncio.Event()
        self.run_id, self.calls = "", 0

    async def complete(self, request: ModelRequest, on_delta: DeltaSink | None = None) -> ModelResponse:
        assert on_delta is not None
        self.run_id = activity.info().workflow_id
        self.calls += 1
        for i, piece in enumerate(self.pieces):
            if i == self.hold and self.calls > self.held_call:
                await asyncio.wait_for(self.release.wait(), 60)
            on_delta(StreamDelta(kind="text", text=piece))
        return ModelResponse(message=Message(role="assistant", content=[TextPart(text="".join(self.pieces))]),
                             usage=Usage(requests=1), finish_reason="stop")


#: An answer in five pieces; the held model holds the last three.
PIECES = ("The first part, ", "the second part, ", "the third, ", "the fourth, ", "and the last.")


@contextlib.asynccontextmanager
async def held_live(agent_client: AgentClient, worker: Any, monkeypatch: pytest.MonkeyPatch,
                    model: Held) -> AsyncIterator[Any]:
    """A live ``agentloop serve`` app whose agent ``held`` runs ``model``, and
    a worker posting to it; the history's batches wait their whole window
    (10 s, no leading edge), so that within a test's 5 s only a live delta
    reaches a client."""
    monkeypatch.setattr(stream_publisher.DeltaPublisher, "leading", False)
    spec = AgentSpec(model="openai:gpt-test", name="held", stream_batch_seconds=10)
    models = ModelResolver({"openai": lambda _provider, _name: model})
    async with serve(agent_client, live_settings(agents={"held": spec})) as api, worker(models=models):
        point_worker(monkeypatch, api.url)
        yield api


def point_worker(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv(LIVE_URL_ENV, url)
    monkeypatch.setenv(LIVE_TOKEN_ENV, LIVE)


def chunks_text(updates: list[Any]) -> str:
    """The answer as the streamed chunks of ``updates`` build it, applied in
    turn by ``a2a-sdk``'s own ``append_artifact_to_task`` (``append`` adds
    parts, else the artifact is replaced); the final whole artifact
    (``last_chunk``) left out, so that the chunks alone are checked."""
    task = pb.Task()
    for update in updates:
        if update.HasField("artifact_update") and not update.artifact_update.last_chunk:
            append_artifact_to_task(task, update.artifact_update)
    return "".join(p.text for a in task.artifacts for p in a.parts)


async def read_chunks(stream: Any, chunks: int, into: list[Any]) -> None:
    """Read ``stream``'s updates into ``into`` until ``chunks`` artifact updates came (within 5 s)."""
    async with asyncio.timeout(5):
        async for update in stream:
            into.append(update)
            chunks -= update.HasField("artifact_update")
            if not chunks:
                return


async def test_an_mcp_progress_notification_brings_a_delta_before_the_history(
        agent_client: AgentClient, worker, monkeypatch: pytest.MonkeyPatch) -> None:
    model = Held()
    progress: list[str] = []
    first = asyncio.Event()

    async def noted(value: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")
        if message == "Hel":
            first.set()

    async with held_live(agent_client, worker, monkeypatch, model) as api, \
            mcp_client(f"{api.url}/mcp", tasks=False) as mcp:
        call = asyncio.create_task(mcp.call_tool("held", {"message": "hi"}, progress_callback=noted))
        try:
            await asyncio.wait_for(first.wait(), 5)
            history = [e async for e in _history(agent_client, model.run_id)]
        finally:
            model.release.set()
        answered = await call
    assert not any(isinstance(e, MessageDelta) for e in history)  # the history had no delta yet
    assert not answered.is_error and answered.content[0].text == "Hello"
    assert progress == ["step 1", "Hel", "lo"]  # the text once: "lo" live too, or the history's part not shown


async def test_mcp_progress_after_a_retried_attempt_says_the_text_starts_again(
        agent_client: AgentClient, worker, monkeypatch: pytest.MonkeyPatch) -> None:
    text = "The answer is forty-two, as computed."
    chunks = openai_completion_chunks(openai_completion(content=text), pieces=6)
    spec = AgentSpec(model="openai:gpt-test", name="flaky", heartbeat_timeout_seconds=5, stream_batch_seconds=0.02)
    progress: list[str] = []

    async def noted(value: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    with OpenAIServer() as provider:
        provider.enqueue(replace(openai_stream(chunks[:4], break_stream=True), chunk_interval=0.05),
                         replace(openai_stream(chunks), chunk_interval=0.05))
        async with serve(agent_client, live_settings(agents={"flaky": spec})) as api, \
                worker(models=openai_models(provider)), mcp_client(f"{api.url}/mcp", tasks=False) as mcp:
            point_worker(monkeypatch, api.url)
            answered = await mcp.call_tool("flaky", {"message": "?"}, progress_callback=noted)
    assert answered.content[0].text == text
    resets = [i for i, m in enumerate(progress) if m.startswith(RESET_PREFIX)]
    assert len(resets) == 1 and progress[resets[0]] == f"{RESET_PREFIX} (attempt 2)"
    assert "".join(progress[resets[0] + 1:]) == text  # after the reset, the new attempt's text once


async def test_an_a2a_stream_after_a_retried_attempt_has_the_new_attempt_s_text_once(
        agent_client: AgentClient, worker, monkeypatch: pytest.MonkeyPatch) -> None:
    text = "The answer is forty-two, as computed."
    chunks = openai_completion_chunks(openai_completion(content=text), pieces=6)
    spec = AgentSpec(model="openai:gpt-test", name="flaky", heartbeat_timeout_seconds=5, stream_batch_seconds=0.02)
    with OpenAIServer() as provider:
        provider.enqueue(replace(openai_stream(chunks[:4], break_stream=True), chunk_interval=0.05),
                         replace(openai_stream(chunks), chunk_interval=0.05))
        async with serve(agent_client, live_settings(agents={"flaky": spec})) as api, \
                worker(models=openai_models(provider)):
            point_worker(monkeypatch, api.url)
            a2a = await a2a_client(api.url, "flaky")
            updates = [u async for u in a2a.send_message(message("?"))]
            await a2a.close()
    chunks_sent = [u.artifact_update for u in updates if u.HasField("artifact_update")]
    emptied = [c for c in chunks_sent if not c.append and not "".join(p.text for p in c.artifact.parts)]
    assert len(emptied) == 1  # the reset: the artifact emptied once, then the new attempt's text
    assert chunks_text(updates) == text and updates[-1].status_update.status.state == pb.TASK_STATE_COMPLETED


async def test_an_a2a_stream_brings_a_delta_before_the_history(
        agent_client: AgentClient, worker, monkeypatch: pytest.MonkeyPatch) -> None:
    model = Held()
    async with held_live(agent_client, worker, monkeypatch, model) as api:
        a2a = await a2a_client(api.url, "held")
        updates: list[Any] = []
        stream = a2a.send_message(message("hi"))
        try:
            await read_chunks(stream, 1, updates)
            history = [e async for e in _history(agent_client, model.run_id)]
        finally:
            model.release.set()
        updates += [u async for u in stream]
        await a2a.close()
    assert not any(isinstance(e, MessageDelta) for e in history)
    first = next(u.artifact_update for u in updates if u.HasField("artifact_update"))
    assert not first.append and first.artifact.parts[0].text == "Hel"
    assert chunks_text(updates) == "Hello"  # the chunks bring the text once
    assert updates[-1].status_update.status.state == pb.TASK_STATE_COMPLETED


async def test_an_a2a_resubscribe_mid_message_shows_the_text_once(
        agent_client: AgentClient, worker, monkeypatch: pytest.MonkeyPatch) -> None:
    # Mid-message, every chunk is live (the history's batch waits 10 s).
    model, whole = Held(PIECES, hold=2), "".join(PIECES)
    async with held_live(agent_client, worker, monkeypatch, model) as api:
        a2a = await a2a_client(api.url, "held")
        before: list[Any] = []
        stream = a2a.send_message(message("go"))
        try:
            await read_chunks(stream, 2, before)
            await stream.aclose()  # hang up after the two pieces streamed so far
            task_id = before[0].task.id
            history = [e async for e in _history(agent_client, task_id)]
            after: list[Any] = []
            async for update in a2a.subscribe(pb.SubscribeToTaskRequest(id=task_id)):
                after.append(update)
                if update.HasField("artifact_update"):
                    model.release.set()  # the rest streams once the client is back
        finally:
            model.release.set()
        await a2a.close()
    assert not any(isinstance(e, MessageDelta) for e in history)  # what was shown came live
    shown = chunks_text(before)
    assert shown == "".join(PIECES[:2])
    assert after[0].HasField("task") and after[0].task.status.state == pb.TASK_STATE_WORKING
    chunks = [u.artifact_update for u in after if u.HasField("artifact_update")]
    assert not chunks[0].append  # the text so far replaces what the client had, then appends
    assert all(c.append for c in chunks[1:-1]) and chunks[-1].last_chunk
    assert chunks_text(before + after) == whole  # once, not twice, nor cut
    assert after[-1].status_update.status.state == pb.TASK_STATE_COMPLETED


async def test_an_a2a_stream_of_a_thread_s_next_turn_shows_its_live_text_once(
        agent_client: AgentClient, worker, monkeypatch: pytest.MonkeyPatch) -> None:
    # The second message's turn: the stream follows the run from the turn's
    # offset, and live text that comes before the stream reached the turn is
    # left to the history (or caught up), never dropped as shown.
    model, whole = Held(PIECES, hold=2, held_call=1), "".join(PIECES)
    async with held_live(agent_client, worker, monkeypatch, model) as api:
        a2a = await a2a_client(api.url, "held")
        first = [u async for u in a2a.send_message(message("one"))]
        context = first[0].task.context_id
        second: list[Any] = []
        try:
            async with asyncio.timeout(5):
                async for update in a2a.send_message(message("two", context_id=context)):
                    second.append(update)
                    if update.HasField("artifact_update"):
                        model.release.set()
        finally:
            model.release.set()
        await a2a.close()
    assert chunks_text(first) == whole and first[-1].status_update.status.state == pb.TASK_STATE_COMPLETED
    assert second[0].task.id.endswith("2") and chunks_text(second) == whole  # the turn's text, once
    assert second[-1].status_update.status.state == pb.TASK_STATE_COMPLETED
