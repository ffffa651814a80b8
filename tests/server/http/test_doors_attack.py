"""Trying ``agentloop serve``'s doors as an attacker would, on a real uvicorn
server and a real dev server: what a token may not reach through ids of
workflows that are not runs (a tenant's quota ledger), malformed JSON-RPC,
bodies sent in chunks past the cap."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from mcp.shared.exceptions import MCPError
from temporalio.service import RPCError

from agentloop import AgentClient
from agentloop.server import ServerSettings, parse_tokens
from agentloop.shared.runs.quotas import QuotaLimits, ledger_id
from agentloop.testing import calls, reply, script
from tests.helpers import agents
from tests.helpers.agents import ASKING_TOOLS, awaiting, write
from tests.helpers.http_api import serve
from tests.helpers.mcp_client import client as mcp_client
from tests.helpers.mcp_client import task_request
from tests.helpers.polling import eventually
from tests.helpers.runs import wait_state

ADMIN, OPS, DASH = "admin-secret-0123456789", "ops-secret-0123456789", "dash-secret-0123456789"
TOKENS = parse_tokens(f"root:admin:{ADMIN},ops:act:{OPS},dash:read:{DASH}")


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


async def test_an_act_token_cannot_reach_a_tenants_quota_ledger_as_a_run(
    agent_client: AgentClient, worker: Callable[..., Any], task_queue: str
) -> None:
    """The ledger holds a tenant's quota, which only ``admin`` sets; cancelled,
    the tenant's runs would reserve from no ledger, i.e. without limit."""
    tenant = f"att-{task_queue}"
    ledger = ledger_id(tenant)
    settings = ServerSettings(tokens=TOKENS, agents={"helper": agents.spec(script(reply("hi")), name="helper")})
    async with worker(), serve(agent_client, settings) as api:
        await agent_client.quotas.set(tenant, QuotaLimits(usd=1, at_limit="fail"))
        http = api.http
        for path in ("cancel", "stop"):
            refused = await http.post(f"/v1/runs/{ledger}/{path}", json={}, headers=bearer(OPS))
            assert refused.status_code == 404, refused.text
            assert "not a run" in refused.json()["detail"]
        for path in ("", "/report", "/messages", "/export", "/events"):
            read = await http.get(f"/v1/runs/{ledger}{path}", headers=bearer(DASH))
            assert read.status_code == 404, (path, read.text)
        decided = await http.post(f"/v1/runs/{ledger}/approvals", json={"call_id": "c", "decision": "approve"},
                                  headers=bearer(OPS))
        assert decided.status_code == 404, decided.text
        sent = await http.post(f"/v1/threads/{ledger}/messages", json={"spec": "helper", "text": "hi"},
                               headers=bearer(OPS))
        assert sent.status_code in (404, 409), sent.text
        steered = await http.post(f"/v1/threads/{ledger}/steer", json={"text": "hi"}, headers=bearer(OPS))
        assert steered.status_code == 404, steered.text
        compared = await http.get("/v1/diff", params={"a": ledger, "b": ledger}, headers=bearer(DASH))
        assert compared.status_code == 404, compared.text

        async with mcp_client(f"{api.url}/mcp", OPS) as mcp:
            for method in ("tasks/get", "tasks/cancel"):
                with pytest.raises(MCPError, match="not a run"):
                    await task_request(mcp.session, method, ledger)
        rpc = {"jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {"id": ledger}}
        a2a = await http.post("/a2a/helper", json=rpc, headers={**bearer(OPS), "A2A-Version": "1.0"})
        assert a2a.status_code == 200 and "error" in a2a.json(), a2a.text

        description = await agent_client.temporal.get_workflow_handle(ledger).describe()
        assert description.status is not None and description.status.name == "RUNNING"
        assert (await agent_client.quotas.get(tenant)) is not None

        # Nor can a run take a ledger's id before the ledger exists (its tenant's quota could not be set).
        other = ledger_id(f"{tenant}-next")
        for body in ({"spec": "helper", "input": "hi", "run_id": other}, {"spec": "helper", "input": "hi",
                                                                         "thread_id": other}):
            squat = await http.post("/v1/runs", json=body, headers=bearer(OPS))
            assert squat.status_code == 400 and "quota ledgers" in squat.json()["detail"], squat.text
        sent = await http.post(f"/v1/threads/{other}/messages", json={"spec": "helper", "text": "hi"},
                               headers=bearer(OPS))
        assert sent.status_code == 400 and "quota ledgers" in sent.json()["detail"], sent.text
        await agent_client.quotas.set(f"{tenant}-next", QuotaLimits(usd=1, at_limit="fail"))


MCP_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}


async def test_malformed_json_rpc_is_a_sentence_and_mcp_holds_a_stream_slot(
    agent_client: AgentClient, worker: Callable[..., Any]
) -> None:
    """A2A: a ``method`` that is not a string, or a body nested past the
    parser's depth, is a JSON-RPC error (not a 500). MCP: GET offers no
    stream (405, not a connection held open for nothing), and each POST
    holds a stream slot like every SSE stream (--max-streams-per-token)."""
    model = script(calls(write("out.txt", "x")), reply("written"))
    settings = ServerSettings(tokens=TOKENS, max_streams_per_caller=1,
                              agents={"helper": agents.spec(model, name="helper", default_permission="auto",
                                                            tools=ASKING_TOOLS)})
    async with worker(), serve(agent_client, settings) as api:
        http = api.http
        for method in (["SendMessage"], {"a": 1}, 7):
            body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {}}
            refused = await http.post("/a2a/helper", json=body, headers=bearer(DASH))
            assert refused.status_code == 403, refused.text  # not a read method: act needed
            answered = await http.post("/a2a/helper", json=body, headers=bearer(OPS))
            assert answered.status_code == 200 and "error" in answered.json(), answered.text
        deep = b"[" * 50_000 + b"]" * 50_000
        as_json = {**bearer(OPS), "Content-Type": "application/json"}
        nested = await http.post("/a2a/helper", content=deep, headers=as_json)
        assert nested.status_code == 200 and "too deeply" in nested.json()["error"]["message"], nested.text
        for path in ("/v1/runs", "/mcp"):
            parsed = await http.post(path, content=deep, headers={**bearer(OPS), **MCP_HEADERS,
                                                                   "Content-Type": "application/json"})
            assert parsed.status_code == 400, (path, parsed.text)

        got = await http.get("/mcp", headers={**bearer(DASH), **MCP_HEADERS})
        assert got.status_code == 405 and got.headers["allow"] == "POST", got.text
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}}
        assert (await http.post("/mcp", json=ping, headers={**bearer(DASH), **MCP_HEADERS})).status_code == 200
        started = await http.post("/v1/runs", json={"spec": "helper", "input": "write"}, headers=bearer(OPS))
        run_id = started.json()["run_id"]
        await wait_state(agent_client.get_handle(run_id), awaiting(), "the write to wait")
        async with http.stream("GET", f"/v1/runs/{run_id}/events", headers=bearer(DASH)) as events:
            assert events.status_code == 200
            full = await http.post("/mcp", json=ping, headers={**bearer(DASH), **MCP_HEADERS})
            assert full.status_code == 429 and full.headers["retry-after"], full.text

        async def pinged() -> bool:
            return (await http.post("/mcp", json=ping, headers={**bearer(DASH), **MCP_HEADERS})).status_code == 200

        await eventually(pinged, "the slot to come back once the events stream closed")
        await agent_client.get_handle(run_id).cancel()


async def test_the_dev_servers_http_api_answers_loopback_names_only(dev_server: Any, temporal_client: Any) -> None:
    """A page whose own name resolves to 127.0.0.1 (DNS rebinding) sends its
    name as ``Host``: the HTTP API of the Temporal server agentloop starts
    refuses it, so such a page can neither list runs nor start one."""
    namespace = temporal_client.namespace
    base = f"http://127.0.0.1:{dev_server.http_port}/api/v1/namespaces/{namespace}/workflows"
    start = {"workflowType": {"name": "AgentRunWorkflow"}, "taskQueue": {"name": "rebound"}}
    async with httpx.AsyncClient(timeout=30) as http:
        evil = f"evil.example:{dev_server.http_port}"
        rebound = {"Host": evil, "Origin": f"http://{evil}"}
        listed = await http.get(base, headers=rebound)
        assert listed.status_code == 403 and "Host not allowed" in listed.text
        started = await http.post(f"{base}/rebound-{dev_server.http_port}", json=start, headers=rebound)
        assert started.status_code == 403, started.text
        for host in ("127.0.0.1", "localhost"):
            own = await http.get(base, headers={"Host": f"{host}:{dev_server.http_port}"}, params={"pageSize": 1})
            assert own.status_code == 200, own.text
    with pytest.raises(RPCError):
        await temporal_client.get_workflow_handle(f"rebound-{dev_server.http_port}").describe()
