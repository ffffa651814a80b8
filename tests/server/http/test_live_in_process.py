"""Live deltas with no setting (docs/live-deltas.md), embedded ``agentloop
serve``'s way: the gateway and the worker share a process, and the worker's
deltas reach the gateway's hub in memory, with no URL, secret or door. The
guarantees are the HTTP path's (tests/server/http/test_live_deltas.py): a
delta shown before the history has it, the text once across a reconnect
and a retried attempt; ``AGENTLOOP_LIVE=off`` turns it off."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from agentloop import AgentClient, AgentSpec
from agentloop.activities import stream_publisher
from agentloop.activities.live_sender import live_sender
from agentloop.activities.providers.models import ModelResolver
from agentloop.server import ServerSettings
from agentloop.server.streams.live_local import HubSink
from agentloop.shared.base.contracts import LIVE_PATH, LIVE_TOKEN_ENV, LIVE_URL_ENV
from agentloop.shared.live.pairing import HELLO_SUFFIX, hello_proof
from agentloop.shared.live.sinks import LIVE_ENV, in_process, local_sink
from agentloop.shared.runs.events import MessageDelta
from agentloop.testing import reply, script
from tests.helpers import agents
from tests.helpers.http_api import serve
from tests.helpers.servers.provider_servers import (
    OpenAIServer,
    openai_completion,
    openai_completion_chunks,
    openai_models,
    openai_stream,
)
from tests.server.http.test_live_deltas import LONG_TEXT, Client, _history, _within, shown, spec_json
from tests.server.loop.test_event_pace import HeldModel


@pytest.fixture(autouse=True)
def no_live_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (LIVE_URL_ENV, LIVE_TOKEN_ENV, LIVE_ENV):
        monkeypatch.delenv(name, raising=False)


def embedded(**fields: Any) -> ServerSettings:
    return ServerSettings(live_in_process=True, **fields)


async def test_the_first_delta_reaches_an_sse_client_in_memory(
        agent_client: AgentClient, worker, monkeypatch: pytest.MonkeyPatch) -> None:
    # History batches that wait their whole window, 10 s: only a live delta comes within 5 s.
    monkeypatch.setattr(stream_publisher.DeltaPublisher, "leading", False)
    model = HeldModel()
    models = ModelResolver({"openai": lambda _provider, _name: model})
    async with serve(agent_client, embedded()) as api, worker(models=models):
        assert isinstance(local_sink(), HubSink)
        spec = AgentSpec(model="openai:gpt-test", stream_batch_seconds=10)
        run_id = (await api.http.post("/v1/runs", json={"spec": spec_json(spec), "input": "hi"})).json()["run_id"]
        client = Client()
        async with api.http.stream("GET", f"/v1/runs/{run_id}/events") as response:
            lines = response.aiter_lines()
            try:
                first = await _within(client.read(lines, until=lambda e: e["type"] == "thread.message.delta"), 5)
                history = [e async for e in _history(agent_client, run_id)]
            finally:
                model.release.set()
            assert first and client.live_deltas == 1 and client.text == {f"{run_id}:msg:0": "Hel"}
            assert not any(isinstance(e, MessageDelta) for e in history)
            assert not await client.read(lines)
        # No door was opened for it: the live door stays off without a secret.
        off = await api.http.post(LIVE_PATH, json={"deltas": []}, headers={"authorization": "Bearer x"})
        assert off.status_code == 404
    assert local_sink() is None  # unregistered when the server stopped
    assert shown(client, f"{run_id}:msg:0") == "Hello" and client.text[f"{run_id}:msg:0"] == "Hello"
    assert client.ids == sorted(set(client.ids)) and client.types[-1] == "thread.run.completed"


async def test_a_reconnect_mid_message_shows_the_text_once(agent_client: AgentClient, worker) -> None:
    model = script(reply(LONG_TEXT), delta_seconds=0.3)
    async with serve(agent_client, embedded()) as api, worker():
        spec = agents.spec(model, stream_batch_seconds=0.02)
        run_id = (await api.http.post("/v1/runs", json={"spec": spec_json(spec), "input": "go"})).json()["run_id"]
        client = Client()
        texts = iter(range(2))
        assert await client.follow(api.http, run_id, until=lambda e: e["type"] == "thread.message.delta"
                                   and next(texts, None) == 1)
        assert not await client.follow(api.http, run_id)
        whole = Client()
        assert not await whole.follow(api.http, run_id)
    mid = f"{run_id}:msg:0"
    assert shown(client, mid) == LONG_TEXT and LONG_TEXT.startswith(client.text[mid])
    assert client.live_deltas >= 2 and client.types[-1] == "thread.run.completed"
    assert shown(whole, mid) == LONG_TEXT and whole.ids == list(range(len(whole.ids)))


async def test_a_retried_attempt_resets_what_streamed_in_memory(agent_client: AgentClient, worker) -> None:
    text = "The answer is forty-two, as computed."
    chunks = openai_completion_chunks(openai_completion(content=text), pieces=6)
    with OpenAIServer() as provider:
        provider.enqueue(replace(openai_stream(chunks[:4], break_stream=True), chunk_interval=0.05),
                         replace(openai_stream(chunks), chunk_interval=0.05))
        async with serve(agent_client, embedded()) as api, worker(models=openai_models(provider)):
            spec = AgentSpec(model="openai:gpt-test", heartbeat_timeout_seconds=5, stream_batch_seconds=0.02)
            run_id = (await api.http.post("/v1/runs", json={"spec": spec_json(spec), "input": "?"})).json()["run_id"]
            client = Client()
            assert not await client.follow(api.http, run_id)
    assert client.types.count("thread.message.reset") == 1 and client.live_deltas >= 1
    assert shown(client, f"{run_id}:msg:0") == text
    assert client.ids == list(range(len(client.ids)))


async def test_live_off_turns_the_in_process_sink_and_the_secret_off(monkeypatch: pytest.MonkeyPatch) -> None:
    class Sink:
        def offer(self, piece: dict[str, Any]) -> None: ...

    with in_process(Sink()) as sink:
        assert live_sender({}) is sink
        # A gateway the environment names comes first (a setting beats a default).
        assert live_sender({LIVE_URL_ENV: "http://elsewhere:1", LIVE_TOKEN_ENV: "s"}) is not sink
        assert live_sender({LIVE_ENV: "off"}) is None
    assert live_sender({}) is None
    assert ServerSettings.from_env({LIVE_TOKEN_ENV: "s", LIVE_ENV: "off"}).live_token is None
    assert ServerSettings.from_env({LIVE_TOKEN_ENV: "s"}).live_token == "s"


async def test_the_hello_proves_the_secret_without_taking_it(agent_client: AgentClient) -> None:
    nonce = "n" * 32
    async with serve(agent_client, ServerSettings(live_token="paired-secret")) as api:
        answer = await api.http.post(LIVE_PATH + HELLO_SUFFIX, json={"nonce": nonce})
        assert answer.status_code == 200 and answer.json() == {"proof": hello_proof("paired-secret", nonce)}
        short = await api.http.post(LIVE_PATH + HELLO_SUFFIX, json={"nonce": "n"})
        assert short.status_code == 422 and "nonce" in short.json()["detail"]
        foreign = await api.http.post(LIVE_PATH + HELLO_SUFFIX, json={"nonce": nonce},
                                      headers={"origin": "http://evil.example"})
        assert foreign.status_code == 403
    async with serve(agent_client, ServerSettings()) as api:  # no secret: no hello either
        off = await api.http.post(LIVE_PATH + HELLO_SUFFIX, json={"nonce": nonce})
        assert off.status_code == 404


async def test_a_sink_that_fails_never_fails_the_model_call(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        live = True

        def post_live(self, run_id: str, events: Any) -> bool:
            raise RuntimeError("a bug in the hub")

    sink = HubSink(Broken(), asyncio.get_running_loop())  # type: ignore[arg-type]
    piece = {"run_id": "r", "message_id": "r:msg:0", "step": 0, "attempt": 1, "kind": "text", "text": "x", "at": 0}
    sink.offer(piece)
    sink.offer(piece)
    sink.offer({"run_id": "r", "kind": "shell"})  # malformed: dropped, said
    said = [r.getMessage() for r in caplog.records]
    assert said.count("a live piece could not be handed to this server's streams; the history brings it") == 1
    assert any("malformed" in line for line in said)
