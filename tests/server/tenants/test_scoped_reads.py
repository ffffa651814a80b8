"""A token with a tenant sees its tenant's runs and threads only, at every
door of ``agentloop serve`` (a real uvicorn server, the session's dev
server): the JSON API, the event streams (native and AG-UI), AG-UI, diff,
quotas, evals, and MCP and A2A through their own clients. Another
tenant's run is answered exactly as an unknown id."""

from __future__ import annotations

from functools import partial

import pytest
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import InvalidRequestError, TaskNotFoundError
from mcp.shared.exceptions import MCPError

from agentloop import AgentClient
from agentloop.server import ServerSettings, parse_tokens
from agentloop.testing import calls, reply, script
from tests.helpers import agents
from tests.helpers.agents import ASKING_TOOLS, awaiting, write
from tests.helpers.http_api import serve
from tests.helpers.mcp_client import client as mcp_client
from tests.helpers.mcp_client import poll, start_task, status_is, task_request
from tests.helpers.runs import wait_state
from tests.server.http.test_a2a import a2a_client, collect, message
from tests.server.http.test_agui import agui_input

ACME, GLOBEX, OPS, BOSS = ("acme-secret-0123456789", "globex-secret-0123456789", "ops-secret-0123456789",
                           "boss-secret-0123456789")
asking = partial(agents.spec, default_permission="auto", tools=ASKING_TOOLS)


def as_(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def settings(a: str, g: str) -> ServerSettings:
    """Tokens of tenants ``a`` and ``g`` (names of the test's own: the dev server is the session's)."""
    tokens = parse_tokens(f"acme:act:{ACME}:tenant={a},globex:act:{GLOBEX}:tenant={g},ops:admin:{OPS},"
                          f"acme-boss:admin:{BOSS}:tenant={a}")
    return ServerSettings(tokens=tokens, agents={
        "writer": asking(script(calls(write("out.txt", "x")), reply("written")), name="writer"),
        "chat": agents.spec(script(reply("hi")), name="chat")})


async def test_each_http_door_answers_another_tenants_run_as_unknown(agent_client: AgentClient, worker,
                                                                       task_queue: str) -> None:
    a, g, thread = f"{task_queue}-a", f"{task_queue}-g", f"{task_queue}-thread"
    async with worker(), serve(agent_client, settings(a, g)) as api:
        http = api.http
        started = await http.post("/v1/runs", json={"spec": "writer", "input": "write"}, headers=as_(ACME))
        mine = started.json()["run_id"]
        sent = await http.post(f"/v1/threads/{thread}/messages", json={"text": "hi", "spec": "chat"},
                               headers=as_(GLOBEX))
        assert sent.status_code == 202, sent.text
        await wait_state(agent_client.get_handle(mine), awaiting(), "the write to wait")

        def same_as_unknown(response, run_id: str, unknown) -> None:
            assert response.status_code == unknown.status_code, (response.request.url, response.text)
            body, known = response.json(), unknown.json()
            assert (body["title"], body["detail"]) == (known["title"], known["detail"].replace("no-such", run_id))

        unknown = await http.get("/v1/runs/no-such", headers=as_(GLOBEX))
        assert unknown.status_code == 404
        for path in ("", "/report", "/messages", "/export", "/events", "/events?protocol=ag-ui"):
            same_as_unknown(await http.get(f"/v1/runs/{mine}{path}", headers=as_(GLOBEX)), mine, unknown)
        acts = [("approvals", {"call_id": "call_0_0", "decision": "approve"}), ("stop", {}), ("cancel", {}),
                ("tool_outputs", {"tool_outputs": [{"call_id": "call_0_0", "output": "o"}]})]
        for path, payload in acts:
            same_as_unknown(await http.post(f"/v1/runs/{mine}/{path}", json=payload, headers=as_(GLOBEX)),
                            mine, await http.post(f"/v1/runs/no-such/{path}", json=payload, headers=as_(GLOBEX)))
        same_as_unknown(await http.get("/v1/diff", params={"a": mine, "b": mine}, headers=as_(GLOBEX)), mine,
                        await http.get("/v1/diff", params={"a": "no-such", "b": "no-such"}, headers=as_(GLOBEX)))
        same_as_unknown(await http.post(f"/v1/threads/{mine}/steer", json={"text": "t"}, headers=as_(GLOBEX)),
                        mine, await http.post("/v1/threads/no-such/steer", json={"text": "t"}, headers=as_(GLOBEX)))
        same_as_unknown(await http.post(f"/v1/threads/{mine}/messages", json={"text": "t"}, headers=as_(GLOBEX)),
                        mine, await http.post("/v1/threads/no-such/messages", json={"text": "t"},
                                              headers=as_(GLOBEX)))
        # Where a spec would start it, the id is only said to be in use: nothing of the run shows.
        taken = await http.post(f"/v1/threads/{mine}/messages", json={"text": "t", "spec": "chat"},
                                headers=as_(GLOBEX))
        assert taken.status_code == 409 and taken.json()["title"] == "Thread id in use", taken.text
        agui = await http.post("/v1/ag-ui/chat", json=agui_input(mine, "t"), headers=as_(GLOBEX))
        assert agui.status_code == 409 and agui.json()["title"] == "Thread id in use", agui.text
        reused = await http.post("/v1/runs", json={"spec": "chat", "input": "t", "run_id": mine},
                                 headers=as_(GLOBEX))
        assert reused.status_code == 409 and reused.json()["detail"] == \
            f"run id {mine!r} is in use; choose another run id"

        # Lists show the token's tenant only; a token without a tenant sees both.
        def ids(response) -> set[str]:
            assert response.status_code == 200, response.text
            return {r["run_id"] for r in response.json()["runs"]}

        assert ids(await http.get("/v1/runs", headers=as_(ACME))) == {mine}
        assert ids(await http.get("/v1/runs", headers=as_(GLOBEX))) == {thread}
        assert ids(await http.get("/v1/runs", params={"thread": thread}, headers=as_(ACME))) == set()
        assert {mine, thread} <= ids(await http.get("/v1/runs", headers=as_(OPS)))
        assert (await http.get("/v1/evals", headers=as_(ACME))).json() == {"evals": []}

        # The own tenant's token is served at the same doors.
        assert (await http.get(f"/v1/runs/{mine}", headers=as_(ACME))).json()["status"] == "awaiting_approval"
        assert (await http.get(f"/v1/runs/{thread}/messages", headers=as_(GLOBEX))).status_code == 200
        decided = await http.post(f"/v1/runs/{mine}/approvals", json=acts[0][1], headers=as_(ACME))
        assert decided.status_code == 200, decided.text
        assert (await agent_client.get_handle(mine).result()).final_text == "written"

        # Quotas: a tenant's token reads its own; another's reads as none; setting another's is refused.
        limits = {"tokens": 1_000_000, "window_seconds": 3600}
        assert (await http.put(f"/v1/quotas/{g}", json=limits, headers=as_(OPS))).status_code == 200
        assert (await http.get(f"/v1/quotas/{g}", headers=as_(GLOBEX))).status_code == 200
        hidden = await http.get(f"/v1/quotas/{g}", headers=as_(ACME))
        none = await http.get("/v1/quotas/nobody", headers=as_(ACME))
        assert hidden.status_code == none.status_code == 404
        assert hidden.json()["detail"] == none.json()["detail"].replace("nobody", g)
        refused = await http.put(f"/v1/quotas/{g}", json=limits, headers=as_(BOSS))
        assert refused.status_code == 403 and f"tenant {a!r} only" in refused.json()["detail"]


async def test_mcp_and_a2a_answer_another_tenants_task_as_unknown(agent_client: AgentClient, worker,
                                                                    task_queue: str) -> None:
    async with worker(), serve(agent_client, settings(f"{task_queue}-a", f"{task_queue}-g")) as api:
        url = f"{api.url}/mcp"
        async with mcp_client(url, ACME) as acme, mcp_client(url, GLOBEX) as globex:
            task = await start_task(acme.session, "writer", "write")
            await poll(acme.session, task.task_id, status_is("input_required"), "the approval")
            for method in ("tasks/get", "tasks/cancel"):
                for task_id in (task.task_id, "no-such"):
                    with pytest.raises(MCPError, match=f"Failed to retrieve task: no run '{task_id}'"):
                        await task_request(globex.session, method, task_id)
            assert (await task_request(acme.session, "tasks/get", task.task_id))["status"] == "input_required"

        acme_a2a = await a2a_client(api.url, "writer", ACME, streaming=False)
        globex_a2a = await a2a_client(api.url, "writer", GLOBEX, streaming=False)
        request = message("write")
        request.configuration.return_immediately = True
        mine = (await collect(acme_a2a.send_message(request)))[0].task
        await wait_state(agent_client.get_handle(mine.id), awaiting(), "the write to wait")
        for task_id in (mine.id, "no-such"):
            with pytest.raises(TaskNotFoundError, match=f"no task '{task_id}'"):
                await globex_a2a.get_task(pb.GetTaskRequest(id=task_id))
        with pytest.raises(TaskNotFoundError):
            await globex_a2a.cancel_task(pb.CancelTaskRequest(id=mine.id))
        with pytest.raises(InvalidRequestError, match="is in use"):
            await collect(globex_a2a.send_message(message("hello", context_id=mine.context_id)))
        assert (await acme_a2a.get_task(pb.GetTaskRequest(id=mine.id))).status.state == pb.TASK_STATE_INPUT_REQUIRED
        for client in (acme_a2a, globex_a2a):
            await client.close()
