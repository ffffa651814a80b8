"""Live deltas (docs/events.md) on a real uvicorn ``agentloop serve`` app and
an in-process worker: the door lets in the workers' secret only; a client of
the SSE stream sees a delta before the history has it; the text a client
assembles is the message once, across a reconnect mid-message and a retried
attempt; a gateway that is down costs the run nothing. The SSE and AG-UI
cases run both ways deltas reach a gateway: posted over HTTP, and handed
over in memory (embedded ``agentloop serve``, no setting)."""

from __future__ import annotations

import asyncio
import json
import socket
import uuid
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
import pytest

from agentloop import AgentClient, AgentSpec
from agentloop.activities import stream_publisher
from agentloop.activities.providers.models import ModelResolver
from agentloop.server import ServerSettings
from agentloop.server.settings import ApiToken
from agentloop.shared.base.contracts import LIVE_PATH, LIVE_TOKEN_ENV, LIVE_URL_ENV
from agentloop.shared.base.errors import UserError
from agentloop.shared.runs.events import MessageDelta
from agentloop.testing import reply, script
from tests.helpers import agents
from tests.helpers.http_api import serve, sse_events
from tests.helpers.servers.provider_servers import (
    OpenAIServer,
    openai_completion,
    openai_completion_chunks,
    openai_models,
    openai_stream,
)
from tests.server.loop.test_event_pace import HeldModel

LIVE = "live-secret-for-tests"
ADMIN = ApiToken("ops", "admin", "admin-secret-for-tests")
LONG_TEXT = "The first part of the answer, then the second part, and at last the third part."


def live_settings(**fields: Any) -> ServerSettings:
    return ServerSettings(live_token=LIVE, **fields)


@dataclass
class Client:
    """What a browser's EventSource makes of a stream: its last event id
    (set by every ``id:``, with data or without), and the text it shows per
    message (deltas appended, a reset clearing), plus whether any delta came
    without an id (live)."""

    last_id: int | None = None
    text: dict[str, str] = field(default_factory=dict)
    completed: dict[str, str] = field(default_factory=dict)
    live_deltas: int = 0
    ids: list[int] = field(default_factory=list)
    types: list[str] = field(default_factory=list)

    def dispatch(self, own_id: int | None, data: dict[str, Any]) -> None:
        self.types.append(data["type"])
        if data["type"] == "thread.message.delta" and data["delta"]["kind"] == "text":
            mid = data["message_id"]
            self.text[mid] = self.text.get(mid, "") + data["delta"]["text"]
            self.live_deltas += own_id is None
        elif data["type"] == "thread.message.reset":
            self.text[data["message_id"]] = ""
        elif data["type"] == "thread.message.completed":
            self.completed[data["message_id"]] = "".join(
                p.get("text", "") for p in data["message"]["content"] if p.get("type") == "text")

    async def read(self, lines: Any, until: Any = None) -> bool:
        """Read until ``until(data)`` (True) or the server closes (False)."""
        own_id: int | None = None
        data: list[str] = []
        async for line in lines:
            if line.startswith("id:"):
                own_id = int(line[3:].strip())
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
            elif line == "":
                if own_id is not None:
                    self.last_id = own_id
                    self.ids.append(own_id)
                if data:
                    event = json.loads("\n".join(data))
                    self.dispatch(own_id, event)
                    if until is not None and until(event):
                        return True
                own_id, data = None, []
        return False

    async def follow(self, http: httpx.AsyncClient, run_id: str, until: Any = None) -> bool:
        headers = {"Last-Event-ID": str(self.last_id)} if self.last_id is not None else {}
        async with http.stream("GET", f"/v1/runs/{run_id}/events", headers=headers) as response:
            assert response.status_code == 200, await response.aread()
            return await self.read(response.aiter_lines(), until)


def shown(client: Client, mid: str) -> str:
    """The message as the client shows it at the end: its deltas, then the
    completed message's part they did not bring (docs/events.md)."""
    text, whole = client.text.get(mid, ""), client.completed[mid]
    assert whole.startswith(text), (text, whole)
    return text + whole[len(text):]


@pytest.fixture
def live_worker_env(monkeypatch: pytest.MonkeyPatch) -> Any:
    def point(url: str, token: str = LIVE) -> None:
        monkeypatch.setenv(LIVE_URL_ENV, url)
        monkeypatch.setenv(LIVE_TOKEN_ENV, token)
    return point


@dataclass
class Way:
    """How the worker's live deltas reach the gateway: posted over HTTP to
    its door, or handed over in memory (embedded ``agentloop serve``,
    ``ServerSettings.live_in_process``, no URL or secret)."""

    name: str
    point: Any

    def settings(self, **fields: Any) -> ServerSettings:
        return live_settings(**fields) if self.name == "http" else ServerSettings(live_in_process=True, **fields)


@pytest.fixture(params=["http", "in memory"])
def way(request: pytest.FixtureRequest, live_worker_env: Any, monkeypatch: pytest.MonkeyPatch) -> Way:
    for name in (LIVE_URL_ENV, LIVE_TOKEN_ENV, "AGENTLOOP_LIVE"):
        monkeypatch.delenv(name, raising=False)
    return Way(request.param, live_worker_env if request.param == "http" else lambda url: None)


def spec_json(spec: AgentSpec) -> dict:
    return spec.model_dump(mode="json", exclude_defaults=True)


async def test_the_live_door_lets_in_the_live_secret_only(agent_client: AgentClient) -> None:
    piece = {"run_id": "r", "message_id": "r:msg:0", "step": 0, "attempt": 1, "kind": "text", "text": "x", "at": 0}
    settings = live_settings(tokens=[ADMIN], allowed_hosts=["gateway.example"])
    async with serve(agent_client, settings) as api:
        async def post(body: Any = None, token: str | None = LIVE, **headers: str) -> httpx.Response:
            if token is not None:
                headers["authorization"] = f"Bearer {token}"
            return await api.http.post(LIVE_PATH, content=json.dumps({"deltas": [piece]} if body is None else body),
                                       headers={"content-type": "application/json", **headers})

        cases = {
            "no token": (await post(token=None), 401, "Bearer"),
            "a wrong token": (await post(token="guess"), 401, "not this server's"),
            "an admin API token": (await post(token=ADMIN.secret), 401, "API tokens"),
            "a bad Host": (await post(host="evil.example"), 403, "Host"),
            "a malformed body": (await post(body={"deltas": [{**piece, "kind": "shell"}]}), 422, "kind"),
            "no JSON": (await api.http.post(LIVE_PATH, content=b"{", headers={
                "content-type": "application/json", "authorization": f"Bearer {LIVE}"}), 422, "not JSON"),
            "too large a body": (await post(body={"deltas": [{**piece, "text": "x" * 300_000}]}), 413, "at most"),
            "an unknown run": (await post(), 404, "no reader follows run 'r'"),
        }
        for case, (answer, status, sentence) in cases.items():
            assert answer.status_code == status, (case, answer.text)
            assert sentence in answer.json()["detail"], (case, answer.json())
        # The live secret opens nothing else.
        listed = await api.http.get("/v1/runs", headers={"authorization": f"Bearer {LIVE}"})
        assert listed.status_code == 401
    async with serve(agent_client, ServerSettings()) as api:  # live off: the door says how to turn it on
        off = await api.http.post(LIVE_PATH, json={"deltas": []}, headers={"authorization": f"Bearer {LIVE}"})
        assert off.status_code == 404 and LIVE_TOKEN_ENV in off.json()["detail"]
    with pytest.raises(UserError, match="must not be one of"):
        ServerSettings(tokens=[ADMIN], live_token=ADMIN.secret)


async def test_an_sse_client_sees_a_delta_before_the_history_has_it(
        agent_client: AgentClient, worker, way: Way, monkeypatch: pytest.MonkeyPatch) -> None:
    # History batches that wait their whole window, 10 s: only a live delta comes within 5 s.
    monkeypatch.setattr(stream_publisher.DeltaPublisher, "leading", False)
    model = HeldModel()
    models = ModelResolver({"openai": lambda _provider, _name: model})
    async with serve(agent_client, way.settings()) as api, worker(models=models):
        way.point(api.url)
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
            assert not any(isinstance(e, MessageDelta) for e in history)  # the history has no delta yet
            assert not await client.read(lines)
    assert shown(client, f"{run_id}:msg:0") == "Hello" and client.text[f"{run_id}:msg:0"] == "Hello"
    assert client.ids == sorted(set(client.ids)) and client.types[-1] == "thread.run.completed"


async def test_a_reconnect_mid_message_shows_the_text_once(agent_client: AgentClient, worker, way: Way) -> None:
    model = script(reply(LONG_TEXT), delta_seconds=0.3)
    async with serve(agent_client, way.settings()) as api, worker():
        way.point(api.url)
        spec = agents.spec(model, stream_batch_seconds=0.02)
        run_id = (await api.http.post("/v1/runs", json={"spec": spec_json(spec), "input": "go"})).json()["run_id"]
        client = Client()
        # Hang up after the answer's second text delta, then reconnect (Last-Event-ID) as a browser does.
        texts = iter(range(2))
        assert await client.follow(api.http, run_id, until=lambda e: e["type"] == "thread.message.delta"
                                   and next(texts, None) == 1)
        assert client.last_id is not None
        assert not await client.follow(api.http, run_id)
        whole = Client()  # and a client that reads it all at once
        assert not await whole.follow(api.http, run_id)
    mid = f"{run_id}:msg:0"
    assert shown(client, mid) == LONG_TEXT and LONG_TEXT.startswith(client.text[mid])
    assert client.live_deltas >= 2 and client.types[-1] == "thread.run.completed"
    assert shown(whole, mid) == LONG_TEXT and whole.ids == list(range(len(whole.ids)))


async def test_a_retried_attempt_resets_what_streamed_live(agent_client: AgentClient, worker, way: Way) -> None:
    text = "The answer is forty-two, as computed."
    chunks = openai_completion_chunks(openai_completion(content=text), pieces=6)
    with OpenAIServer() as provider:
        provider.enqueue(replace(openai_stream(chunks[:4], break_stream=True), chunk_interval=0.05),
                         replace(openai_stream(chunks), chunk_interval=0.05))
        async with serve(agent_client, way.settings()) as api, worker(models=openai_models(provider)):
            way.point(api.url)
            spec = AgentSpec(model="openai:gpt-test", heartbeat_timeout_seconds=5, stream_batch_seconds=0.02)
            run_id = (await api.http.post("/v1/runs", json={"spec": spec_json(spec), "input": "?"})).json()["run_id"]
            client = Client()
            assert not await client.follow(api.http, run_id)
    assert client.types.count("thread.message.reset") == 1 and client.live_deltas >= 1
    assert shown(client, f"{run_id}:msg:0") == text
    assert client.ids == list(range(len(client.ids)))


async def test_an_agui_client_gets_live_text_once(agent_client: AgentClient, worker, way: Way) -> None:
    model = script(reply(LONG_TEXT), delta_seconds=0.3)
    settings = way.settings(agents={"chat": agents.spec(model, stream_batch_seconds=0.02)})
    body = {"threadId": f"live-agui-{uuid.uuid4().hex[:8]}", "runId": "a",  # a thread of its own for each way
            "messages": [{"id": "u1", "role": "user", "content": "go"}],
            "tools": [], "context": []}
    async with serve(agent_client, settings) as api, worker():
        way.point(api.url)
        async with api.http.stream("POST", "/v1/ag-ui/chat", json=body) as response:
            events = [item async for item in sse_events(response)]
    content = [(i, d["delta"]) for i, d in events if d["type"] == "TEXT_MESSAGE_CONTENT"]
    assert "".join(text for _, text in content) == LONG_TEXT
    assert any(i is None for i, _ in content)  # some came live
    ids = [int(i) for i, _ in events if i is not None]
    assert ids == sorted(set(ids)) and events[-1][1]["type"] == "RUN_FINISHED"


async def test_a_gateway_that_is_down_costs_the_run_nothing(
        agent_client: AgentClient, worker, live_worker_env) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        live_worker_env(f"http://127.0.0.1:{sock.getsockname()[1]}")
    async with worker():
        handle = await agent_client.start(agents.spec(script(reply(LONG_TEXT), delta_seconds=0.05),
                                                      stream_batch_seconds=0.02), "go")
        assert (await handle.result()).final_text == LONG_TEXT
        events = [e async for e in handle.events()]
    deltas = "".join(e.delta.text for e in events if isinstance(e, MessageDelta))
    assert deltas and LONG_TEXT.startswith(deltas)


async def _within(awaitable: Any, seconds: float) -> Any:
    return await asyncio.wait_for(awaitable, seconds)


async def _history(agent_client: AgentClient, run_id: str) -> Any:
    """The events the run's history holds now (read until none comes for 0.5 s)."""
    reader = agent_client.get_handle(run_id).events(poll_interval=0.02)
    try:
        while True:
            yield await asyncio.wait_for(anext(reader), 0.5)
    except (TimeoutError, StopAsyncIteration):
        return
    finally:
        await reader.aclose()
