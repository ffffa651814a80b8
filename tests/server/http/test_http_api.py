"""``agentloop serve``'s JSON API end to end: the app on a real uvicorn
server on 127.0.0.1, runs on the session's dev server with an in-process
worker. Every endpoint and its error cases, problem documents, paging, the
OpenAPI document, threads, CORS."""

from __future__ import annotations

import uuid
from functools import partial
from pathlib import Path

from agentloop import AgentClient
from agentloop.server import ServerSettings
from agentloop.shared.definition.activity_io import ToolDefinition
from agentloop.testing import call, calls, reply, script
from tests.helpers import agents
from tests.helpers.agents import ASKING_TOOLS, awaiting, echo_results, write
from tests.helpers.http_api import follow, serve
from tests.helpers.polling import eventually
from tests.helpers.runs import wait_state

PROBLEM = "application/problem+json"
#: Writes ask for approval.
asking = partial(agents.spec, default_permission="auto", tools=ASKING_TOOLS)

LOOKUP = ToolDefinition(
    name="lookup_order",
    description="Look an order up in the client's database.",
    parameters={"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
)


def spec_json(spec) -> dict:
    return spec.model_dump(mode="json", exclude_defaults=True)


def problem(response, status: int) -> dict:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"] == PROBLEM, response.headers["content-type"]
    body = response.json()
    assert body["status"] == status and body["title"] and body["detail"]
    return body


async def test_start_follow_and_read_a_run(agent_client: AgentClient, worker, workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha")
    model = script(calls(call("read_file", {"file_path": "a.txt"})), echo_results)
    name = f"reader-{uuid.uuid4().hex[:6]}"
    async with worker(), serve(agent_client) as api:
        started = await api.http.post("/v1/runs", json={"spec": spec_json(agents.spec(model, name=name,
                                                                                        tools=["read_file"])),
                                                        "input": "read a.txt"})
        assert started.status_code == 201, started.text
        run_id = started.json()["run_id"]
        assert started.headers["location"] == f"/v1/runs/{run_id}"
        # The spec names no workspace and a worker elsewhere picks its own: the answer says it does not know.
        assert started.json()["workspace"] is None

        sse = await follow(api.http, run_id)
        # Ids are the stream offsets, from 0, each once; the stream ends after the terminal event.
        assert sse.closed_by_server and sse.retry == 1000
        assert sse.ids == list(range(len(sse.events)))
        assert [d["seq"] for _, d in sse.events] == sse.ids
        assert sse.types[-1] == "thread.run.completed" and sse.types[0] == "agent.run.created"

        state = (await api.http.get(f"/v1/runs/{run_id}")).json()
        assert (state["run_id"], state["status"], state["message_count"]) == (run_id, "completed", 4)
        report = (await api.http.get(f"/v1/runs/{run_id}/report")).json()
        assert report["steps"][0]["tool_calls"][0]["tool_name"] == "read_file"
        assert report["step_count"] == 2

        everything = (await api.http.get(f"/v1/runs/{run_id}/messages")).json()
        assert everything["total"] == 4 and everything["offset"] == 0 and everything["next_offset"] is None
        assert [m["role"] for m in everything["messages"]] == ["user", "assistant", "tool", "assistant"]
        first = (await api.http.get(f"/v1/runs/{run_id}/messages", params={"limit": 3})).json()
        assert len(first["messages"]) == 3 and first["next_offset"] == 3
        rest = (await api.http.get(f"/v1/runs/{run_id}/messages", params={"offset": 3, "limit": 3})).json()
        assert rest["messages"] == everything["messages"][3:] and rest["next_offset"] is None

        snapshot = (await api.http.get(f"/v1/runs/{run_id}/export")).json()
        assert snapshot["run_id"] == run_id and len(snapshot["messages"]) == 4

        # The list, through the search attributes, a page at a time.
        second = (await api.http.post("/v1/runs", json={"spec": spec_json(agents.spec(model, name=name,
                                                                                         tools=["read_file"])),
                                                         "input": "again"})).json()["run_id"]
        await follow(api.http, second)

        async def listed():
            body = (await api.http.get("/v1/runs", params={"name": name, "status": "completed"})).json()
            return body if len(body["runs"]) == 2 else None

        both = await eventually(listed, "both runs listed as completed")
        assert [r["run_id"] for r in both["runs"]] == [second, run_id]  # newest first
        assert both["runs"][0]["agent_name"] == name and both["next_page_token"] is None
        page1 = (await api.http.get("/v1/runs", params={"name": name, "limit": 1})).json()
        assert [r["run_id"] for r in page1["runs"]] == [second] and page1["next_page_token"]
        page2 = (await api.http.get("/v1/runs", params={"name": name, "limit": 1,
                                                        "page_token": page1["next_page_token"]})).json()
        assert [r["run_id"] for r in page2["runs"]] == [run_id]
        assert (await api.http.get("/v1/runs", params={"name": name, "status": "failed"})).json()["runs"] == []


async def test_threads_messages_and_steering(agent_client: AgentClient, worker) -> None:
    model = script(reply("first answer"), reply("second answer"))
    thread_id = f"thread-{uuid.uuid4().hex[:8]}"
    async with worker(), serve(agent_client) as api:
        started = await api.http.post("/v1/runs", json={"spec": spec_json(agents.spec(model)), "input": "hello",
                                                        "thread_id": thread_id})
        assert started.json()["run_id"] == thread_id
        await eventually(lambda: agent_client.get_handle(thread_id).state(), "turn 1 to end", ignoring=(Exception,))
        handle = agent_client.get_handle(thread_id)
        await wait_state(handle, lambda s: s.status == "idle", "the thread to wait for a message")

        # Nothing to steer while the thread waits.
        problem(await api.http.post(f"/v1/threads/{thread_id}/steer", json={"text": "faster"}), 409)

        sent = await api.http.post(f"/v1/threads/{thread_id}/messages", json={"text": "and then?"})
        assert sent.status_code == 202, sent.text
        body = sent.json()
        assert (body["run_id"], body["thread_id"], body["turn"]) == (thread_id, thread_id, 2)
        # The turn's events, from its offset: they end with the turn's end.
        sse = await follow(api.http, thread_id, params={"from": body["offset"]},
                           until=lambda d: d["type"] == "agent.turn.ended")
        events = sse.events
        assert events[0][0] == body["offset"]
        assert [d["seq"] for _, d in events] == list(range(body["offset"], body["offset"] + len(events)))
        ended = events[-1][1]
        assert ended["turn"] == 2
        texts = [d["message"]["content"][0]["text"] for _, d in events if d["type"] == "thread.message.completed"]
        assert texts == ["second answer"]
        # The sender's name is the caller's (no token configured: "local").
        everything = await follow(api.http, thread_id, until=lambda d: d["type"] == "agent.turn.ended"
                                  and d["turn"] == 2)
        (received,) = [d for _, d in everything.events
                       if d["type"] == "agent.thread.message.received" and d["turn"] == 2]
        assert (received["text"], received["by"]) == ("and then?", "local")

        problem(await api.http.post(f"/v1/threads/missing-{uuid.uuid4().hex[:6]}/messages", json={"text": "hi"}),
                404)
        bad = problem(await api.http.post(f"/v1/threads/{thread_id}/messages",
                                          json={"text": "", "strategy": "shout"}), 422)
        assert {e["field"] for e in bad["errors"]} == {"text", "strategy"}
        await handle.cancel()


async def test_tool_outputs_stop_and_cancel(agent_client: AgentClient, worker) -> None:
    model = script(calls(call("lookup_order", {"order_id": "A-1"})), echo_results)
    async with worker(), serve(agent_client) as api:
        body = {"spec": spec_json(agents.spec(model, tools=[], client_tools=[LOOKUP])), "input": "where is A-1?"}
        run_id = (await api.http.post("/v1/runs", json=body)).json()["run_id"]
        await wait_state(agent_client.get_handle(run_id), lambda s: s.status == "requires_action", "requires_action")
        wrong = problem(await api.http.post(f"/v1/runs/{run_id}/tool_outputs",
                                            json={"tool_outputs": [{"call_id": "nope", "output": "x"}]}), 409)
        assert "nope" in wrong["detail"] and wrong["waiting"] == ["call_0_0"]
        problem(await api.http.post(f"/v1/runs/{run_id}/tool_outputs", json={"tool_outputs": []}), 422)
        done = await api.http.post(f"/v1/runs/{run_id}/tool_outputs",
                                   json={"tool_outputs": [{"call_id": "call_0_0", "output": "shipped"}]})
        assert done.status_code == 200 and done.json()["call_ids"] == ["call_0_0"]
        sse = await follow(api.http, run_id)
        assert sse.types[-1] == "thread.run.completed"
        # An ended run takes no stop or cancel.
        assert "has ended" in problem(await api.http.post(f"/v1/runs/{run_id}/cancel", json={}), 409)["detail"]
        problem(await api.http.post(f"/v1/runs/{run_id}/stop", json={}), 409)

        waiting = script(calls(write("x.txt")), echo_results)
        body = {"spec": spec_json(asking(waiting)), "input": "w"}
        cancelled = (await api.http.post("/v1/runs", json=body)).json()["run_id"]
        stopped = (await api.http.post("/v1/runs", json=body)).json()["run_id"]
        for run in (cancelled, stopped):
            await wait_state(agent_client.get_handle(run), awaiting(), "the write to wait")
        answer = await api.http.post(f"/v1/runs/{cancelled}/cancel", json={})
        assert answer.status_code == 202 and answer.json() == {"run_id": cancelled, "requested": "cancel"}
        assert (await follow(api.http, cancelled)).types[-1] == "thread.run.cancelled"
        answer = await api.http.post(f"/v1/runs/{stopped}/stop", json={"reason": "enough"})
        assert answer.status_code == 202 and answer.json()["requested"] == "stop"
        last = (await follow(api.http, stopped)).events[-1][1]
        assert (last["type"], last["status"], last["note"]) == ("thread.run.completed", "stopped", "stopped: enough")


async def test_errors_are_problem_documents(agent_client: AgentClient, worker) -> None:
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    async with worker(), serve(agent_client) as api:
        for method, path, body in [
            ("GET", f"/v1/runs/{missing}", None), ("GET", f"/v1/runs/{missing}/report", None),
            ("GET", f"/v1/runs/{missing}/messages", None), ("GET", f"/v1/runs/{missing}/export", None),
            ("GET", f"/v1/runs/{missing}/events", None),
            ("POST", f"/v1/runs/{missing}/approvals", {"call_id": "c", "decision": "approve"}),
            ("POST", f"/v1/runs/{missing}/tool_outputs", {"tool_outputs": [{"call_id": "c", "output": "o"}]}),
            ("POST", f"/v1/runs/{missing}/stop", None), ("POST", f"/v1/runs/{missing}/cancel", None),
            ("POST", f"/v1/threads/{missing}/steer", {"text": "t"}),
        ]:
            headers = {"Content-Type": "application/json"} if method == "POST" else None  # an empty JSON POST too
            found = problem(await api.http.request(method, path, json=body, headers=headers), 404)
            assert missing in found["detail"] and found["instance"] == path, (path, found)

        bad = problem(await api.http.post("/v1/runs", json={"spec": "nobody", "input": ""}), 422)
        assert [e["field"] for e in bad["errors"]] == ["input"]
        assert "input:" in bad["detail"]
        unknown_agent = problem(await api.http.post("/v1/runs", json={"spec": "nobody", "input": "hi"}), 404)
        assert "no agent 'nobody' is registered" in unknown_agent["detail"]
        bad_spec = problem(await api.http.post("/v1/runs", json={"spec": {"model": "scripted:demo", "max_steps": 0},
                                                                 "input": "hi"}), 422)
        assert any(e["field"].endswith("max_steps") for e in bad_spec["errors"])
        decision = problem(await api.http.post(f"/v1/runs/{missing}/approvals", json={"decision": "maybe"}), 422)
        assert {e["field"] for e in decision["errors"]} == {"call_id", "decision"}
        problem(await api.http.get("/v1/runs", params={"limit": 0}), 422)
        problem(await api.http.get("/v1/runs", params={"name": 'x" OR "1"="1'}), 422)
        token = problem(await api.http.get("/v1/runs", params={"page_token": "!!!"}), 422)
        assert "page_token" in token["detail"]
        problem(await api.http.get("/v1/runs", params={"page_token": "bm90LWEtdG9rZW4"}), 422)  # base64, not Temporal's
        problem(await api.http.get(f"/v1/runs/{missing}/events", headers={"Last-Event-ID": "abc"}), 422)
        nowhere = problem(await api.http.get("/v1/nowhere"), 404)
        assert "/v1/openapi.json" in nowhere["detail"]
        problem(await api.http.delete(f"/v1/runs/{missing}"), 405)

        # A run id in use is 409, with the client's own sentence.
        run_id = (await api.http.post("/v1/runs", json={"spec": "scripted:demo", "input": "x"})).status_code
        assert run_id == 404  # a name, not registered: the spec must be inline or registered
        started = await api.http.post("/v1/runs", json={"spec": {"model": "scripted:demo"}, "input": "hi"})
        named = await api.http.post("/v1/runs", json={"spec": {"model": "scripted:demo", "workspace": "/srv/repo"},
                                                       "input": "hi", "run_id": f"ws-{uuid.uuid4().hex[:8]}"})
        assert named.status_code == 201 and named.json()["workspace"] == "/srv/repo", named.text
        again = problem(await api.http.post("/v1/runs", json={"spec": {"model": "scripted:demo"}, "input": "hi",
                                                              "run_id": started.json()["run_id"]}), 409)
        assert "choose another run id" in again["detail"]
        await follow(api.http, started.json()["run_id"])


async def test_registered_agents_and_registered_only(agent_client: AgentClient, worker) -> None:
    model = script(reply("registered"))
    settings = ServerSettings(agents={"helper": agents.spec(model)}, registered_only=True)
    async with worker(), serve(agent_client, settings) as api:
        refused = problem(await api.http.post("/v1/runs", json={"spec": {"model": "scripted:demo"}, "input": "x"}),
                          403)
        assert "helper" in refused["detail"]
        run_id = (await api.http.post("/v1/runs", json={"spec": "helper", "input": "x"})).json()["run_id"]
        sse = await follow(api.http, run_id)
        assert sse.types[-1] == "thread.run.completed"


async def test_openapi_describes_every_endpoint_with_models(agent_client: AgentClient) -> None:
    async with serve(agent_client) as api:
        doc = (await api.http.get("/v1/openapi.json")).json()
    paths = doc["paths"]
    expected = {
        ("post", "/v1/runs"): "201", ("get", "/v1/runs"): "200", ("get", "/v1/runs/{run_id}"): "200",
        ("get", "/v1/runs/{run_id}/report"): "200", ("get", "/v1/runs/{run_id}/messages"): "200",
        ("get", "/v1/runs/{run_id}/export"): "200", ("get", "/v1/runs/{run_id}/events"): "200",
        ("post", "/v1/runs/{run_id}/approvals"): "200", ("post", "/v1/runs/{run_id}/tool_outputs"): "200",
        ("post", "/v1/runs/{run_id}/stop"): "202", ("post", "/v1/runs/{run_id}/cancel"): "202",
        ("post", "/v1/threads/{thread_id}/messages"): "202", ("post", "/v1/threads/{thread_id}/steer"): "200",
        ("post", "/v1/runs/stream"): "200", ("post", "/v1/threads/{thread_id}/messages/stream"): "200",
    }
    for (method, path), ok in expected.items():
        responses = paths[path][method]["responses"]
        content = responses[ok]["content"]
        schema = next(iter(content.values()))["schema"]
        assert schema, (method, path)
        if path.endswith(("/events", "/stream")):
            assert "text/event-stream" in content
        else:
            assert "$ref" in schema, (method, path, schema)
        assert responses["401"]["content"][PROBLEM]["schema"] == {"$ref": "#/components/schemas/ProblemDetails"}
        assert "422" in responses
    schemas = doc["components"]["schemas"]
    for name in ("RunState", "AgentRunReport", "MessagesPage", "AgentSnapshot", "RunList", "DecisionAccepted",
                 "ProblemDetails", "Sent", "SteerAccepted"):
        assert name in schemas, name


async def test_cors_preflight_allows_the_configured_origins(agent_client: AgentClient) -> None:
    settings = ServerSettings(cors_origins=["https://console.example.com"])
    async with serve(agent_client, settings) as api:
        allowed = await api.http.options("/v1/runs", headers={
            "Origin": "https://console.example.com", "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type"})
        other = await api.http.options("/v1/runs", headers={
            "Origin": "https://elsewhere.example.com", "Access-Control-Request-Method": "POST"})
        simple = await api.http.get("/v1/runs", headers={"Origin": "https://console.example.com"})
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == "https://console.example.com"
    assert "POST" in allowed.headers["access-control-allow-methods"]
    assert "authorization" in allowed.headers["access-control-allow-headers"].lower()
    assert other.status_code == 400 and "access-control-allow-origin" not in other.headers
    assert simple.headers["access-control-allow-origin"] == "https://console.example.com"


async def test_an_approval_too_large_for_temporal_is_413_before_it_reaches_the_run(agent_client: AgentClient,
                                                                                   worker) -> None:
    model = script(calls(write("out.txt", "x")), reply("written"))
    # A payload limit of 100 kB: a 95 kB result passes the body cap but is over 90% of the limit once encoded.
    settings = ServerSettings(max_payload_bytes=100_000)
    async with worker(), serve(agent_client, settings) as api:
        started = await api.http.post("/v1/runs", json={"spec": spec_json(asking(model)), "input": "w"})
        run_id = started.json()["run_id"]
        handle = agent_client.get_handle(run_id)
        await wait_state(handle, awaiting(), "the write to wait")
        call_id = (await handle.state()).pending_approvals[0].call_id
        big = {"call_id": call_id, "decision": "approve", "result": "y" * 95_000}
        refused = problem(await api.http.post(f"/v1/runs/{run_id}/approvals", json=big), 413)
        assert "once encoded" in refused["detail"] and "90000" in refused["detail"]
        # Nothing reached the run: it still waits, and a decision of a normal size is taken.
        assert (await handle.state()).status == "awaiting_approval"
        ok = await api.http.post(f"/v1/runs/{run_id}/approvals", json={"call_id": call_id, "decision": "approve"})
        assert ok.status_code == 200, ok.text
