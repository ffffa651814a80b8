"""``GET /v1/runs/{id}/events`` (Server-Sent Events) on a real uvicorn
server: ids are offsets, ``Last-Event-ID`` and ``?from=`` resume exactly,
the stream closes after the terminal event, heartbeats while idle, a
continued-as-new run is followed, ``thread.message.reset`` is passed on, and
200 clients on one run are served by one reader."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from functools import partial

from agentloop import AgentClient, AgentSpec
from agentloop.server import ServerSettings
from agentloop.testing import call, calls, reply, script
from tests.helpers import agents
from tests.helpers.agents import ASKING_TOOLS, awaiting, write
from tests.helpers.http_api import Sse, follow, read_sse, serve
from tests.helpers.polling import eventually
from tests.helpers.runs import wait_state
from tests.helpers.servers.provider_servers import (
    OpenAIServer,
    openai_completion,
    openai_completion_chunks,
    openai_models,
    openai_stream,
)

asking = partial(agents.spec, default_permission="auto", tools=ASKING_TOOLS)

#: An answer streamed in deltas: three text chunks 0.3 s apart, each published on its own.
LONG_TEXT = "The first part of the answer, then the second part, and at last the third part."


def streaming_spec(**fields) -> AgentSpec:
    model = script(calls(call("list_dir", {"path": "."})), reply(LONG_TEXT), delta_seconds=0.3)
    return agents.spec(model, tools=["list_dir"], stream_batch_seconds=0.02, **fields)


def spec_json(spec: AgentSpec) -> dict:
    return spec.model_dump(mode="json", exclude_defaults=True)


def check_whole(sse: Sse) -> None:
    """Each offset once, in order, from 0; data's seq is the id; ends terminal."""
    assert sse.ids == list(range(len(sse.events))), sse.ids
    assert [d["seq"] for _, d in sse.events] == sse.ids
    assert sse.types[-1] == "thread.run.completed" and sse.closed_by_server


async def test_resume_after_a_disconnect_mid_answer_has_no_gap_and_no_duplicate(
    agent_client: AgentClient, worker
) -> None:
    async with worker(), serve(agent_client) as api:
        run_id = (await api.http.post("/v1/runs", json={"spec": spec_json(streaming_spec()),
                                                        "input": "go"})).json()["run_id"]
        # Read until the first text delta of the answer, then hang up mid-answer.
        first = await follow(api.http, run_id, until=lambda d: d["type"] == "thread.message.delta"
                             and d["delta"]["kind"] == "text")
        assert not first.closed_by_server
        last_id = first.ids[-1]
        # The browser's reconnection: Last-Event-ID, the last id seen.
        rest = await follow(api.http, run_id, headers={"Last-Event-ID": str(last_id)})
        assert rest.ids[0] == last_id + 1
        joined = Sse(events=first.events + rest.events, closed_by_server=rest.closed_by_server)
        check_whole(joined)
        text = "".join(d["delta"]["text"] for _, d in joined.events
                       if d["type"] == "thread.message.delta" and d["delta"]["kind"] == "text")
        # The deltas are the answer's start (its tail comes with the completed message), each once.
        assert LONG_TEXT.startswith(text) and len(text) > LONG_TEXT.index("second")
        completed = [d for _, d in joined.events if d["type"] == "thread.message.completed"]
        assert completed[-1]["message"]["content"][0]["text"] == LONG_TEXT
        assert sum(1 for _, d in rest.events if d["type"] == "thread.message.delta") >= 1  # resumed mid-answer
        # The same stream read whole, and from an offset (?from= is inclusive), agree.
        whole = await follow(api.http, run_id)
        check_whole(whole)
        assert whole.events == joined.events
        tail = await follow(api.http, run_id, params={"from": 3})
        assert tail.events == whole.events[3:]
        # Last-Event-ID wins over ?from= (a reconnecting EventSource keeps its URL).
        again = await follow(api.http, run_id, params={"from": 0}, headers={"Last-Event-ID": str(last_id)})
        assert again.events == whole.events[last_id + 1:]
        # Past the end of an ended run: nothing, and the stream closes.
        past = await follow(api.http, run_id, params={"from": len(whole.events) + 5})
        assert past.events == [] and past.closed_by_server


async def test_heartbeats_while_idle_and_the_stream_closes_after_the_terminal_event(
    agent_client: AgentClient, worker
) -> None:
    model = script(calls(write("out.txt", "x")), reply("written"))
    settings = ServerSettings(heartbeat_seconds=0.2)
    async with worker(), serve(agent_client, settings) as api:
        started = await api.http.post("/v1/runs", json={"spec": spec_json(asking(model)), "input": "w"})
        run_id = started.json()["run_id"]
        async with api.http.stream("GET", f"/v1/runs/{run_id}/events") as response:
            lines = response.aiter_lines()
            await wait_state(agent_client.get_handle(run_id), awaiting(), "the write to wait")
            # Up to the approval request (a heartbeat may come first, if the
            # run's one reader has not caught up within 0.2 s)...
            waiting = await read_sse(lines, until=lambda e: e["type"] == "agent.tool.approval.requested")
            assert set(waiting.comments) <= {"keep-alive"}
            # (and the events that come with it, up to the next heartbeat)...
            settled = await read_sse(lines, until_comment=True)
            waiting.events += settled.events
            # ...then nothing happens while the call waits: comments keep the connection open.
            for _ in range(2):
                idle = await read_sse(lines, until_comment=True)
                assert idle.events == [] and idle.comments == ["keep-alive"]
            decided = await api.http.post(f"/v1/runs/{run_id}/approvals",
                                          json={"call_id": "call_0_0", "decision": "approve"})
            assert decided.status_code == 200, decided.text
            rest = await read_sse(lines)
        assert rest.closed_by_server and rest.types[-1] == "thread.run.completed"
        assert [e for e in rest.ids if e is not None] == list(range(len(waiting.events),
                                                                    len(waiting.events) + len(rest.events)))


async def test_a_continued_as_new_run_is_followed(agent_client: AgentClient, worker) -> None:
    model = script(*[calls(call("list_dir", {"path": "."})) for _ in range(5)], reply("done"))
    spec = agents.spec(model, tools=["list_dir"], continue_as_new_every_steps=2, max_steps=10)
    async with worker(), serve(agent_client) as api:
        run_id = (await api.http.post("/v1/runs", json={"spec": spec_json(spec), "input": "list"})).json()["run_id"]
        sse = await follow(api.http, run_id)
        runs = [w async for w in agent_client.temporal.list_workflows(f'WorkflowId="{run_id}"')]
    check_whole(sse)
    assert len(runs) == 3  # 2 + 2 + 2 steps, across three Temporal runs
    assert sse.types.count("agent.run.continued") == 2
    assert sse.types.count("agent.run.created") == 1


async def test_a_retried_attempt_resets_its_partial_output_on_the_stream(agent_client: AgentClient, worker) -> None:
    text = "The answer is forty-two, as computed."
    chunks = openai_completion_chunks(openai_completion(content=text), pieces=6)
    with OpenAIServer() as provider:
        # The first attempt streams three chunks, then the connection drops.
        provider.enqueue(replace(openai_stream(chunks[:4], break_stream=True), chunk_interval=0.05),
                         replace(openai_stream(chunks), chunk_interval=0.05))
        async with worker(models=openai_models(provider)), serve(agent_client) as api:
            spec = AgentSpec(model="openai:gpt-test", heartbeat_timeout_seconds=5, stream_batch_seconds=0.02)
            run_id = (await api.http.post("/v1/runs", json={"spec": spec_json(spec), "input": "?"})).json()["run_id"]
            sse = await follow(api.http, run_id)
    check_whole(sse)
    (reset,) = [(i, d) for i, d in sse.events if d["type"] == "thread.message.reset"]
    deltas = [(i, d) for i, d in sse.events if d["type"] == "thread.message.delta"]
    assert reset[1]["attempt"] == 2
    assert all(i < reset[0] for i, d in deltas if d["attempt"] == 1) and any(d["attempt"] == 1 for _, d in deltas)
    shown = "".join(d["delta"]["text"] for i, d in deltas if i > reset[0])
    completed = [d for _, d in sse.events if d["type"] == "thread.message.completed"]
    assert text.startswith(shown) and completed[-1]["message"]["content"][0]["text"] == text


async def test_200_clients_on_one_run_each_see_every_event_once_in_order(
    agent_client: AgentClient, worker
) -> None:
    clients = 200
    async with worker(), serve(agent_client) as api:
        model = script(calls(write("out.txt", "x")), reply(LONG_TEXT), delta_seconds=0.3)
        spec = asking(model, stream_batch_seconds=0.02)
        run_id = (await api.http.post("/v1/runs", json={"spec": spec_json(spec), "input": "w"})).json()["run_id"]
        # Every client connects while the run waits for approval, then the answer streams to all.
        followers = [asyncio.create_task(follow(api.http, run_id)) for _ in range(clients)]
        await wait_state(agent_client.get_handle(run_id), awaiting(), "the write to wait")
        hub = api.state.hub
        await eventually(lambda: hub.feeds.get(run_id) and hub.feeds[run_id].subscribers == clients,
                         f"{clients} subscribers on the run's one feed", timeout=60)
        assert list(hub.feeds) == [run_id]  # one reader for the run
        decided = await api.http.post(f"/v1/runs/{run_id}/approvals",
                                      json={"call_id": "call_0_0", "decision": "approve"})
        assert decided.status_code == 200
        seen = await asyncio.gather(*followers)
        feed = hub.feeds[run_id]
        reference = await follow(api.http, run_id)
    check_whole(reference)
    assert any(t == "thread.message.delta" for t in reference.types)
    for sse in seen:
        check_whole(sse)
        assert sse.events == reference.events
    # The one reader read each event of the run once, whatever the number of clients.
    assert feed.reads == len(reference.events)
