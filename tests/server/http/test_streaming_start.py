"""``POST /v1/runs/stream``: a start that answers with the run's event stream
(docs/http-api.md), on a real uvicorn ``agentloop serve`` app and an
in-process worker with scripted models, live deltas on: the events in order
from offset 0, the run id in the headers and the first event, a reconnect
with ``GET .../events`` and ``Last-Event-ID`` that shows the text once, and
the same checks and answers as ``POST /v1/runs`` (scope, body, tenant,
registered agents) plus the stream cap, all before anything streams."""

from __future__ import annotations

import uuid

import httpx

from agentloop import AgentClient, AgentSpec
from agentloop.activities.providers.models import ModelResolver
from agentloop.server import ServerSettings, parse_tokens
from agentloop.testing import reply, script
from tests.helpers import agents
from tests.helpers.http_api import read_sse, serve
from tests.server.http.test_live_deltas import (  # noqa: F401  (live_worker_env: a fixture)
    LONG_TEXT,
    Client,
    live_settings,
    live_worker_env,
    shown,
    spec_json,
)
from tests.server.loop.test_event_pace import HeldModel

ACT, READ, ACME, GLOBEX = ("act-secret-0123456789", "read-secret-0123456789", "acme-secret-0123456789",
                           "globex-secret-0123456789")


def as_(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


async def test_a_streaming_start_answers_with_the_runs_events_and_a_reconnect_goes_on(
        agent_client: AgentClient, worker, live_worker_env) -> None:  # noqa: F811
    model = script(reply(LONG_TEXT), delta_seconds=0.3)
    async with serve(agent_client, live_settings()) as api, worker():
        live_worker_env(api.url)
        body = {"spec": spec_json(agents.spec(model, stream_batch_seconds=0.02)), "input": "go"}
        client, texts = Client(), iter(range(2))
        async with api.http.stream("POST", "/v1/runs/stream", json=body) as response:
            assert response.status_code == 200, await response.aread()
            assert response.headers["content-type"].startswith("text/event-stream")
            run_id = response.headers["x-agentloop-run-id"]
            assert response.headers["content-location"] == f"/v1/runs/{run_id}"
            # Hang up after the answer's second text delta, as a browser that lost its connection.
            assert await client.read(response.aiter_lines(), until=lambda e: e["type"] == "thread.message.delta"
                                     and next(texts, None) == 1)
        assert client.types[0] == "agent.run.created" and client.ids[0] == 0
        assert client.last_id is not None and client.live_deltas >= 1
        assert not await client.follow(api.http, run_id)  # GET .../events with Last-Event-ID
        assert api.state.streams.open == {}  # both streams gave their slot back
    mid = f"{run_id}:msg:0"
    assert shown(client, mid) == LONG_TEXT and LONG_TEXT.startswith(client.text[mid])
    assert client.ids == sorted(set(client.ids)) and client.types[-1] == "thread.run.completed"


async def test_a_streaming_start_is_checked_as_a_start_is(agent_client: AgentClient, worker,
                                                          task_queue: str) -> None:
    a, g = f"{task_queue}-a", f"{task_queue}-g"
    tokens = parse_tokens(f"ops:act:{ACT},viewer:read:{READ},acme:act:{ACME}:tenant={a},"
                          f"globex:act:{GLOBEX}:tenant={g}")
    model = HeldModel()
    registered = {"chat": agents.spec(script(reply("hi")), name="chat"),
                  "held": AgentSpec(model="openai:gpt-test", name=f"held-{task_queue}")}
    settings = ServerSettings(tokens=tokens, agents=registered, max_streams_per_caller=1)
    models = ModelResolver({"openai": lambda _provider, _name: model})
    async with worker(models=models), serve(agent_client, settings) as api:
        http = api.http

        async def both(body: dict, secret: str = ACT) -> tuple[httpx.Response, httpx.Response]:
            return (await http.post("/v1/runs", json=body, headers=as_(secret)),
                    await http.post("/v1/runs/stream", json=body, headers=as_(secret)))

        def same(pair: tuple[httpx.Response, httpx.Response], status: int) -> dict:
            plain, streamed = pair
            assert plain.status_code == streamed.status_code == status, (plain.text, streamed.text)
            assert streamed.headers["content-type"] == "application/problem+json"
            p, s = plain.json(), streamed.json()
            assert (p["title"], p["detail"], p.get("errors")) == (s["title"], s["detail"], s.get("errors"))
            return s

        assert "input" in same(await both({"spec": "chat", "input": ""}), 422)["detail"]
        assert "no agent 'nobody'" in same(await both({"spec": "nobody", "input": "hi"}), 404)["detail"]
        inline = {"spec": spec_json(agents.spec(script(reply("x")))), "input": "hi"}
        assert "registered agents only" in same(await both(inline), 403)["detail"]
        refused = same(await both({"spec": "chat", "input": "hi"}, READ), 403)
        assert "act" in refused["detail"]
        assert "tenant" in same(await both({"spec": "chat", "input": "hi", "tenant": g}, ACME), 403)["detail"]
        taken = f"taken-{uuid.uuid4().hex[:8]}"
        plain = await http.post("/v1/runs", json={"spec": "chat", "input": "hi", "run_id": taken}, headers=as_(ACT))
        assert plain.status_code == 201
        clash = await http.post("/v1/runs/stream", json={"spec": "chat", "input": "hi", "run_id": taken},
                                headers=as_(ACT))
        assert clash.status_code == 409 and clash.json()["title"] == "Run id in use", clash.text
        assert api.state.streams.open == {}  # refused starts hold no stream slot

        # A tenant token's streamed start is a run of its tenant: another tenant's token cannot see it.
        async with http.stream("POST", "/v1/runs/stream", json={"spec": "held", "input": "hi"},
                               headers=as_(ACME)) as response:
            assert response.status_code == 200
            run_id = response.headers["x-agentloop-run-id"]
            lines = response.aiter_lines()
            try:
                first = await read_sse(lines, until=lambda e: e["type"] == "thread.message.delta")
                # The cap: one stream per token; a second streamed start is 429, and starts nothing.
                held = f"held-{uuid.uuid4().hex[:8]}"
                over = await http.post("/v1/runs/stream", json={"spec": "chat", "input": "hi", "run_id": held},
                                       headers=as_(ACME))
                hidden = await http.get(f"/v1/runs/{run_id}/events", headers=as_(GLOBEX))
            finally:
                model.release.set()
            rest = await read_sse(lines)
        assert over.status_code == 429 and over.headers["retry-after"], over.text
        assert "streams" in over.json()["detail"]
        assert (await http.get(f"/v1/runs/{held}", headers=as_(ACT))).status_code == 404
        assert hidden.status_code == 404 and hidden.json()["title"] == "Unknown run"
        events = first.events + rest.events
        assert events[0][1]["type"] == "agent.run.created" and events[0][1]["run_id"] == run_id
        assert rest.closed_by_server and events[-1][1]["type"] == "thread.run.completed", events[-3:]
        ids = [i for i, _ in events]
        assert ids == list(range(len(ids)))
        listed = (await http.get("/v1/runs", params={"name": f"held-{task_queue}"}, headers=as_(ACME))).json()["runs"]
        assert [r["run_id"] for r in listed] == [run_id] and listed[0]["tenant"] == a


async def test_a_threads_streaming_send_answers_with_its_turns_events(agent_client: AgentClient, worker) -> None:
    thread = f"thread-{uuid.uuid4().hex[:8]}"
    spec = spec_json(agents.spec(script(reply("first answer"), reply("second answer"))))
    async with worker(), serve(agent_client) as api:
        turns = []
        for body in ({"text": "one", "spec": spec}, {"text": "two"}):
            async with api.http.stream("POST", f"/v1/threads/{thread}/messages/stream", json=body) as response:
                assert response.status_code == 200, await response.aread()
                turns.append((response.headers, await read_sse(response)))
        unknown = await api.http.post(f"/v1/threads/{thread}-none/messages/stream", json={"text": "t"})
        plain = await api.http.post(f"/v1/threads/{thread}-none/messages", json={"text": "t"})
        assert api.state.streams.open == {}
    for turn, (headers, sse) in enumerate(turns, start=1):
        offset = int(headers["x-agentloop-offset"])
        assert headers["x-agentloop-run-id"] == thread and headers["x-agentloop-turn"] == str(turn)
        assert headers["content-location"] == f"/v1/runs/{thread}"
        assert sse.closed_by_server and sse.ids == list(range(offset, offset + len(sse.ids)))
        ended = sse.events[-1][1]
        assert ended["type"] == "agent.turn.ended" and ended["turn"] == turn
        assert ["first answer", "second answer"][turn - 1] in ended["final_text"]
    assert int(turns[1][0]["x-agentloop-offset"]) > turns[0][1].ids[-1]
    assert unknown.status_code == plain.status_code == 404 and unknown.json()["detail"] == plain.json()["detail"]
