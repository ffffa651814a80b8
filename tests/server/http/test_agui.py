"""AG-UI over HTTP on a real server and the session's dev server:
``POST /v1/ag-ui/{agent}`` (a thread's turns, resume errors, bad requests)
and ``GET /v1/runs/{id}/events?protocol=ag-ui``. The official client's view
is tests/process/http/test_agui_client.py."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from agentloop.server import ServerSettings
from agentloop.testing import reply, script
from tests.helpers import agents
from tests.helpers.http_api import serve, sse_events


def agui_input(thread_id: str, text: str | None, run_id: str = "r1", **extra: Any) -> dict[str, Any]:
    messages = [{"id": "u1", "role": "user", "content": text}] if text is not None else []
    return {"threadId": thread_id, "runId": run_id, "messages": messages, "tools": [], "context": [], **extra}


async def post_run(http: httpx.AsyncClient, agent: str, body: dict[str, Any]) -> list[tuple[str | None, dict]]:
    async with http.stream("POST", f"/v1/ag-ui/{agent}", json=body) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        return [item async for item in sse_events(response)]


def types(events: list[tuple[str | None, dict]]) -> list[str]:
    return [data["type"] for _, data in events]


async def test_a_thread_answers_one_agui_run_per_message(agent_client, worker) -> None:
    model = script(reply("first answer"), reply("second answer"), delta_seconds=0.005)
    settings = ServerSettings(agents={"chat": agents.spec(model=model)})
    thread_id = f"agui-{uuid.uuid4().hex[:10]}"
    async with worker(), serve(agent_client, settings) as served:
        http = served.http
        first = await post_run(http, "chat", agui_input(thread_id, "hello", run_id="run-a"))
        second = await post_run(http, "chat", agui_input(thread_id, "again", run_id="run-b"))
        # one agentloop thread answered both: its run id is the AG-UI thread id
        turn = await agent_client.get_handle(thread_id).turn_state()
    for events, run_id, text in ((first, "run-a", "first answer"), (second, "run-b", "second answer")):
        assert types(events)[0] == "RUN_STARTED" and types(events)[-1] == "RUN_FINISHED"
        started, finished = events[0][1], events[-1][1]
        assert (started["threadId"], started["runId"]) == (thread_id, run_id)
        assert started["input"]["runId"] == run_id  # the request, echoed
        assert finished["result"] == text
        assert "".join(d["delta"] for _, d in events if d["type"] == "TEXT_MESSAGE_CONTENT") == text
        # ids are the thread's stream offsets, increasing
        ids = [int(i) for i, _ in events if i is not None]
        assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert int(next(i for i, _ in second if i is not None)) > int([i for i, _ in first if i is not None][-1])
    assert (turn.turn, turn.status) == (2, "completed")


async def test_the_events_of_any_run_in_agui(agent_client, worker) -> None:
    model = script(reply("hi there"), delta_seconds=0.005)
    async with worker(), serve(agent_client, ServerSettings()) as served:
        http = served.http
        handle = await agent_client.start(agents.spec(model=model), "say hi")
        async with http.stream("GET", f"/v1/runs/{handle.run_id}/events", params={"protocol": "ag-ui"}) as response:
            assert response.status_code == 200
            events = [item async for item in sse_events(response)]  # ends after the run's end
        async with http.stream("GET", f"/v1/runs/{handle.run_id}/events?protocol=ag-ui",
                               headers={"Last-Event-ID": events[-1][0]}) as response:
            after_end = [item async for item in sse_events(response)]
    assert types(events)[0] == "RUN_STARTED" and types(events)[-1] == "RUN_FINISHED"
    assert events[0][1]["threadId"] == handle.run_id
    user = [d for _, d in events if d["type"] == "TEXT_MESSAGE_START" and d["role"] == "user"]
    assert len(user) == 1  # a follower sees the user's message too
    assert events[-1][1]["result"] == "hi there"
    assert after_end == []  # resumed after the last event: nothing more


async def test_bad_requests_are_problems(agent_client, worker) -> None:
    settings = ServerSettings(agents={"chat": agents.spec(model=script(reply("x")))})
    thread_id = f"agui-{uuid.uuid4().hex[:10]}"
    async with worker(), serve(agent_client, settings) as served:
        http = served.http
        unknown = await http.post("/v1/ag-ui/nobody", json=agui_input(thread_id, "hi"))
        assert unknown.status_code == 404 and unknown.headers["content-type"] == "application/problem+json"
        assert "no agent 'nobody'" in unknown.json()["detail"] and "chat" in unknown.json()["detail"]
        invalid = await http.post("/v1/ag-ui/chat", json={"threadId": thread_id})
        assert invalid.status_code == 422
        assert {e["field"] for e in invalid.json()["errors"]} >= {"runId", "messages"}
        no_user = await http.post("/v1/ag-ui/chat", json=agui_input(thread_id, None))
        assert no_user.status_code == 422 and "no user message" in no_user.json()["detail"]
        missing = await http.post("/v1/ag-ui/chat", json=agui_input(
            "agui-never-started", None, resume=[{"interruptId": "c1", "status": "resolved"}]))
        assert missing.status_code == 404 and "no run 'agui-never-started'" in missing.json()["detail"]
        await post_run(http, "chat", agui_input(thread_id, "hi"))
        bogus = await http.post("/v1/ag-ui/chat", json=agui_input(
            thread_id, None,
            resume=[{"interruptId": "c-bogus", "status": "resolved", "payload": {"decision": "approve"}}]))
        assert bogus.status_code == 409 and "has no interrupt c-bogus" in bogus.json()["detail"]


async def test_resume_payloads_are_checked(agent_client, worker) -> None:
    from agentloop.testing import calls
    from tests.helpers.agents import write

    model = script(calls(write("out.txt", "x", id="w1")), reply("done"))
    spec = agents.spec(model=model, default_permission="auto", tools=["write_file"])
    thread_id = f"agui-{uuid.uuid4().hex[:10]}"
    async with worker(), serve(agent_client, ServerSettings(agents={"w": spec})) as served:
        http = served.http
        first = await post_run(http, "w", agui_input(thread_id, "write"))
        outcome = first[-1][1]["outcome"]
        assert outcome["type"] == "interrupt" and [i["id"] for i in outcome["interrupts"]] == ["w1"]
        bad = await http.post("/v1/ag-ui/w", json=agui_input(
            thread_id, None, resume=[{"interruptId": "w1", "status": "resolved", "payload": {"decision": "maybe"}}]))
        assert bad.status_code == 422 and "resume entry 'w1'" in bad.json()["detail"]
        unanswered = await http.post("/v1/ag-ui/w", json=agui_input(
            thread_id, None, resume=[{"interruptId": "w1", "status": "resolved"}]))
        assert unanswered.status_code == 409 and "still waits for a decision" in unanswered.json()["detail"]
        denied = await post_run(http, "w", agui_input(thread_id, None, run_id="r2", resume=[
            {"interruptId": "w1", "status": "cancelled"}]))
    assert types(denied)[0] == "RUN_STARTED" and denied[-1][1]["result"] == "done"
    resolved = [d["value"] for _, d in denied if d["type"] == "CUSTOM"]
    assert resolved[0]["decision"] == "deny" and resolved[0]["reason"] == "cancelled by the user"


async def test_a_message_at_the_stream_cap_is_refused_before_it_is_sent(agent_client, worker) -> None:
    # The stream's slot is taken before the message goes to the thread: a 429 leaves no turn nobody follows.
    settings = ServerSettings(agents={"chat": agents.spec(model=script(reply("never")))}, max_streams=0)
    thread_id = f"agui-{uuid.uuid4().hex[:10]}"
    async with worker(), serve(agent_client, settings) as served:
        over = await served.http.post("/v1/ag-ui/chat", json=agui_input(thread_id, "hello"))
        assert over.status_code == 429 and over.headers["retry-after"], over.text
        assert (await served.http.get(f"/v1/runs/{thread_id}")).status_code == 404  # no thread was started
        assert served.state.streams.open == {}
