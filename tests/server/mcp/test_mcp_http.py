"""``/mcp`` on ``agentloop serve`` with the ``mcp`` package's own client over
streamable HTTP: a short call answered inline (with progress), a typed
answer as ``structuredContent``; a call as a durable task the client leaves
and comes back to, an approval answered with ``tasks/update``, a cancel;
and the tokens: a ``read`` token refused a call, a token without the agent."""

from __future__ import annotations

from functools import partial

import httpx
import pytest
from mcp.shared.exceptions import MCPError

from agentloop import AgentClient
from agentloop.server import ServerSettings, parse_tokens
from agentloop.shared.runs.search_attributes import AGENT_TENANT
from agentloop.testing import calls, reply, script
from tests.helpers import agents
from tests.helpers.agents import ASKING_TOOLS, write
from tests.helpers.http_api import serve
from tests.helpers.mcp_client import client, poll, start_task, status_is, task_request

asking = partial(agents.spec, default_permission="auto", tools=ASKING_TOOLS)
OPS, DASH, NARROW = "ops-secret-0123456789", "dash-secret-0123456789", "narrow-secret-0123456789"
TOKENS = parse_tokens(f"ops:act:{OPS},dash:read:{DASH},narrow:act:{NARROW}:agents=helper:tenant=acme")


async def test_a_short_call_is_answered_inline_with_progress(agent_client: AgentClient, worker) -> None:
    typed = agents.spec(script(reply('{"verdict": "ok", "score": 3}')), name="grader",
                        output={"type": "object", "properties": {"verdict": {"type": "string"},
                                                                  "score": {"type": "integer"}},
                                "required": ["verdict", "score"]})
    streamed = script(reply("hello from the agent"), delta_seconds=0.05)
    settings = ServerSettings(agents={"helper": agents.spec(streamed, name="helper", stream_batch_seconds=0.02),
                                      "grader": typed})
    progress: list[str] = []

    async def noted(value: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async with worker(), serve(agent_client, settings) as api, client(f"{api.url}/mcp", tasks=False) as mcp:
        tools = {t.name: t for t in (await mcp.list_tools()).tools}
        assert set(tools) == {"helper", "grader"}
        assert tools["helper"].input_schema["required"] == ["message"]
        assert tools["grader"].output_schema["required"] == ["verdict", "score"]
        answered = await mcp.call_tool("helper", {"message": "hi"}, progress_callback=noted)
        assert not answered.is_error and answered.content[0].text == "hello from the agent"
        assert progress[0] == "step 1" and "hello" in "".join(progress[1:])
        graded = await mcp.call_tool("grader", {"message": "grade it"})
        assert graded.structured_content == {"verdict": "ok", "score": 3}
        bad = await mcp.call_tool("helper", {"text": "hi"})
        assert bad.is_error and "only `message`" in bad.content[0].text
        # The server's doors stand before /mcp: a rebinding Host, a foreign Origin.
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        rebound = await api.http.post("/mcp", json=ping, headers={"Host": "evil.example"})
        assert rebound.status_code == 403 and rebound.json()["title"] == "Host not allowed"
        foreign = await api.http.post("/mcp", json=ping, headers={"Origin": "https://evil.example"})
        assert foreign.status_code == 403 and foreign.json()["title"] == "Origin not allowed"


async def test_a_task_survives_a_disconnect_and_its_approval_is_answered_with_tasks_update(
        agent_client: AgentClient, worker) -> None:
    model = script(calls(write("out.txt", "x")), reply("written"))
    settings = ServerSettings(tokens=TOKENS, agents={"writer": asking(model, name="writer")})
    async with worker(), serve(agent_client, settings) as api:
        url = f"{api.url}/mcp"
        async with client(url, OPS) as mcp:
            task = await start_task(mcp.session, "writer", "write the file")
        assert task.status == "working"
        # A new connection (the first is gone): the task is the run, polled by its id.
        async with client(url, DASH) as reader:
            waiting = await poll(reader.session, task.task_id, status_is("input_required"), "the approval")
            [(key, request)] = waiting["inputRequests"].items()
            assert key == "approve:call_0_0" and request["method"] == "elicitation/create"
            assert "write_file" in request["params"]["message"] and "out.txt" in request["params"]["message"]
            assert request["params"]["requestedSchema"]["properties"]["decision"]["enum"] == ["approve", "deny", "skip"]
            # A read token reads the task, but may not answer it.
            with pytest.raises(MCPError, match="Scope too small"):
                await task_request(reader.session, "tasks/update", task.task_id,
                                   inputResponses={key: {"action": "accept", "content": {"decision": "approve"}}})
        async with client(url, OPS) as mcp:
            with pytest.raises(MCPError, match="needs content.decision"):
                await task_request(mcp.session, "tasks/update", task.task_id,
                                   inputResponses={key: {"action": "accept", "content": {"decision": "maybe"}}})
            ack = await task_request(mcp.session, "tasks/update", task.task_id,
                                     inputResponses={key: {"action": "accept", "content": {"decision": "approve"}}})
            assert ack.get("resultType") == "complete"
            done = await poll(mcp.session, task.task_id, status_is("completed", "failed"), "the run to end")
        assert done["status"] == "completed", done
        assert done["result"]["content"][0]["text"] == "written" and done["result"]["isError"] is False
        report = await agent_client.get_handle(task.task_id).report()
        assert [c.decided_by for c in report.steps[0].tool_calls] == ["ops"]


async def test_cancel_and_tokens(agent_client: AgentClient, worker) -> None:
    model = script(calls(write("out.txt", "x")), reply("never"))
    settings = ServerSettings(tokens=TOKENS, agents={"writer": asking(model, name="writer"),
                                                     "helper": agents.spec(script(reply("hi")), name="helper")})
    async with worker(), serve(agent_client, settings) as api:
        url = f"{api.url}/mcp"
        async with httpx.AsyncClient() as http:
            refused = await http.post(url, json={}, headers={"Content-Type": "application/json"})
            assert refused.status_code == 401 and refused.headers["content-type"] == "application/problem+json"
        async with client(url, DASH) as reader:
            assert {t.name for t in (await reader.list_tools()).tools} == {"writer", "helper"}
            with pytest.raises(MCPError, match="Scope too small"):
                await reader.session.call_tool("helper", {"message": "hi"}, allow_claimed=True)
        async with client(url, NARROW) as narrow:
            assert [t.name for t in (await narrow.list_tools()).tools] == ["helper"]
            with pytest.raises(MCPError, match="may start only helper"):
                await narrow.session.call_tool("writer", {"message": "hi"}, allow_claimed=True)
            # The token's tenant is forced on the run it starts, as on /v1/runs.
            started = await start_task(narrow.session, "helper", "hi")
            described = await agent_client.temporal.get_workflow_handle(started.task_id).describe()
            assert described.typed_search_attributes.get(AGENT_TENANT) == "acme"
        async with client(url, OPS) as mcp:
            task = await start_task(mcp.session, "writer", "write")
            await poll(mcp.session, task.task_id, status_is("input_required"), "the approval")
            async with client(url, NARROW) as narrow:
                with pytest.raises(MCPError, match="Failed to retrieve task: no run"):  # as an unknown task
                    await task_request(narrow.session, "tasks/get", task.task_id)
            async with client(url, OPS, tasks=False) as undeclared:
                with pytest.raises(MCPError) as missing:
                    await task_request(undeclared.session, "tasks/get", task.task_id)
                assert missing.value.code == -32021
            assert (await task_request(mcp.session, "tasks/cancel", task.task_id)).get("resultType") == "complete"
            cancelled = await poll(mcp.session, task.task_id, status_is("cancelled", "completed", "failed"),
                                   "the cancel")
            assert cancelled["status"] == "cancelled", cancelled
            with pytest.raises(MCPError, match="no run"):
                await task_request(mcp.session, "tasks/get", "no-such-run")
