"""Live deltas with no setting (docs/live-deltas.md), embedded ``agentloop
serve``'s way: the gateway and the worker share a process, and the worker's
deltas reach the gateway's hub in memory, with no URL, secret or door. The
HTTP path's guarantees (a delta shown before the history has it, the text
once across a reconnect and a retried attempt, AG-UI) are tested both ways
in tests/server/http/test_live_deltas.py; here, what is the in-memory
path's own, ``AGENTLOOP_LIVE=off``, and the paired worker's hello."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentloop import AgentClient
from agentloop.activities.live_sender import live_sender
from agentloop.server import ServerSettings
from agentloop.server.streams.live_local import HubSink
from agentloop.shared.base.contracts import LIVE_PATH, LIVE_TOKEN_ENV, LIVE_URL_ENV
from agentloop.shared.live.pairing import HELLO_SUFFIX, hello_proof
from agentloop.shared.live.sinks import LIVE_ENV, in_process, local_sink
from agentloop.testing import reply, script
from tests.helpers import agents
from tests.helpers.http_api import serve
from tests.server.http.test_live_deltas import LONG_TEXT, Client, shown, spec_json


@pytest.fixture(autouse=True)
def no_live_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (LIVE_URL_ENV, LIVE_TOKEN_ENV, LIVE_ENV):
        monkeypatch.delenv(name, raising=False)


def embedded(**fields: Any) -> ServerSettings:
    return ServerSettings(live_in_process=True, **fields)


async def test_the_sink_is_this_server_s_while_it_runs_and_opens_no_door(agent_client: AgentClient, worker) -> None:
    model = script(reply(LONG_TEXT), delta_seconds=0.1)
    async with serve(agent_client, embedded()) as api, worker():
        assert isinstance(local_sink(), HubSink)
        spec = agents.spec(model, stream_batch_seconds=0.02)
        run_id = (await api.http.post("/v1/runs", json={"spec": spec_json(spec), "input": "go"})).json()["run_id"]
        client = Client()
        assert not await client.follow(api.http, run_id)
        # No door was opened for it: the live door stays off without a secret.
        off = await api.http.post(LIVE_PATH, json={"deltas": []}, headers={"authorization": "Bearer x"})
        assert off.status_code == 404
    assert local_sink() is None  # unregistered when the server stopped
    assert shown(client, f"{run_id}:msg:0") == LONG_TEXT and client.live_deltas >= 2


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
