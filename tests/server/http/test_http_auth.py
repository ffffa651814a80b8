"""Auth of ``agentloop serve`` on a real uvicorn server: bearer tokens with
the scopes read and act (401, 403), the token's name as a decision's ``by``
(in the report and the events), and single-use decisions (409 naming who
decided and when)."""

from __future__ import annotations

from functools import partial

from agentloop import AgentClient
from agentloop.server import ServerSettings, parse_tokens
from agentloop.shared.runs.search_attributes import AGENT_TENANT
from agentloop.testing import calls, reply, script
from tests.helpers import agents
from tests.helpers.agents import ASKING_TOOLS, awaiting, write
from tests.helpers.http_api import follow, serve
from tests.helpers.runs import wait_state

asking = partial(agents.spec, default_permission="auto", tools=ASKING_TOOLS)
OPS = "ops-secret-0123456789"
DASHBOARD = "dash-secret-0123456789"
TOKENS = parse_tokens(f"ops:act:{OPS},dashboard:read:{DASHBOARD}")


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def problem(response, status: int) -> dict:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"] == "application/problem+json"
    return response.json()


async def test_scopes_the_decider_s_name_and_single_use_decisions(agent_client: AgentClient, worker) -> None:
    model = script(calls(write("out.txt", "x")), reply("written"))
    body = {"spec": asking(model).model_dump(mode="json", exclude_defaults=True), "input": "write"}
    async with worker(), serve(agent_client, ServerSettings(tokens=TOKENS, registered_only=False)) as api:
        http = api.http
        # No token, an unknown token, a malformed header: 401. A read token cannot act: 403.
        assert "Bearer" in problem(await http.post("/v1/runs", json=body), 401)["detail"]
        problem(await http.get("/v1/runs"), 401)
        assert "not one of" in problem(await http.get("/v1/runs", headers=bearer("x" * 20)), 401)["detail"]
        problem(await http.get("/v1/runs", headers={"Authorization": f"Basic {OPS}"}), 401)
        scope = problem(await http.post("/v1/runs", json=body, headers=bearer(DASHBOARD)), 403)
        assert "'dashboard' has scope 'read'" in scope["detail"]

        started = await http.post("/v1/runs", json=body, headers=bearer(OPS))
        assert started.status_code == 201, started.text
        run_id = started.json()["run_id"]
        await wait_state(agent_client.get_handle(run_id), awaiting(), "the write to wait")

        # A read token reads: the state, the list, and the events (header, or ?access_token= for EventSource).
        assert (await http.get(f"/v1/runs/{run_id}", headers=bearer(DASHBOARD))).json()["status"] == \
            "awaiting_approval"
        assert (await http.get("/v1/runs", headers=bearer(DASHBOARD))).status_code == 200
        waiting = await follow(http, run_id, params={"access_token": DASHBOARD},
                               until=lambda d: d["type"] == "agent.tool.approval.requested")
        assert waiting.types[-1] == "agent.tool.approval.requested"
        problem(await http.get(f"/v1/runs/{run_id}/events", params={"access_token": "nope" * 5}), 401)

        # ... but cannot decide, stop, cancel or send.
        decision = {"call_id": "call_0_0", "decision": "approve"}
        for path, payload in [("approvals", decision), ("stop", {}), ("cancel", {}),
                              ("tool_outputs", {"tool_outputs": [{"call_id": "c", "output": "o"}]})]:
            problem(await http.post(f"/v1/runs/{run_id}/{path}", json=payload, headers=bearer(DASHBOARD)), 403)
        for path in ("messages", "steer"):
            problem(await http.post(f"/v1/threads/{run_id}/{path}", json={"text": "t"}, headers=bearer(DASHBOARD)),
                    403)

        # An unknown call id: 409 with the run's sentence and the ids that wait.
        unknown = problem(await http.post(f"/v1/runs/{run_id}/approvals", headers=bearer(OPS),
                                          json={"call_id": "call_9_9", "decision": "approve"}), 409)
        assert "no call 'call_9_9' waits for approval" in unknown["detail"]
        assert unknown["waiting"] == ["call_0_0"]

        decided = await http.post(f"/v1/runs/{run_id}/approvals", json=decision, headers=bearer(OPS))
        assert decided.status_code == 200 and decided.json()["call_ids"] == ["call_0_0"]
        # The same request again: 409, saying who decided and when.
        replayed = problem(await http.post(f"/v1/runs/{run_id}/approvals", json=decision, headers=bearer(OPS)), 409)
        assert replayed["title"] == "Already decided"
        assert "call 'call_0_0' was already decided (approve) by ops at 20" in replayed["detail"]
        assert "single-use" in replayed["detail"]

        sse = await follow(http, run_id, headers=bearer(DASHBOARD))
        assert sse.types[-1] == "thread.run.completed"
        (resolved,) = [d for _, d in sse.events if d["type"] == "agent.tool.approval.resolved"]
        assert (resolved["call_id"], resolved["decision"], resolved["by"]) == ("call_0_0", "approve", "ops")
        report = (await http.get(f"/v1/runs/{run_id}/report", headers=bearer(DASHBOARD))).json()
        call = report["steps"][0]["tool_calls"][0]
        assert (call["decision"], call["decided_by"]) == ("approve", "ops")

        # After the run ended, the replay still says who decided, and when.
        ended = problem(await http.post(f"/v1/runs/{run_id}/approvals", json=decision, headers=bearer(OPS)), 409)
        assert ended["title"] == "Already decided" and "by ops at " in ended["detail"]
        assert resolved["time"][:19] in ended["detail"]


async def test_without_tokens_every_caller_is_local_and_may_act(agent_client: AgentClient, worker) -> None:
    model = script(calls(write("out.txt", "x")), reply("written"))
    async with worker(), serve(agent_client) as api:
        run_id = (await api.http.post("/v1/runs", json={
            "spec": asking(model).model_dump(mode="json", exclude_defaults=True), "input": "w"})).json()["run_id"]
        await wait_state(agent_client.get_handle(run_id), awaiting(), "the write to wait")
        await api.http.post(f"/v1/runs/{run_id}/approvals", json={"call_id": "call_0_0", "decision": "deny",
                                                                   "reason": "not now"})
        sse = await follow(api.http, run_id)
    (resolved,) = [d for _, d in sse.events if d["type"] == "agent.tool.approval.resolved"]
    assert (resolved["decision"], resolved["by"], resolved["reason"]) == ("deny", "local", "not now")


async def test_a_tokens_tenant_is_forced_on_the_runs_it_starts(agent_client: AgentClient, worker) -> None:
    tokens = parse_tokens(f"acme:act:{OPS}:tenant=acme,ops:act:{DASHBOARD}")
    body = {"spec": agents.spec(script(reply("hi"))).model_dump(mode="json", exclude_defaults=True), "input": "hi"}
    async with worker(), serve(agent_client, ServerSettings(tokens=tokens, registered_only=False)) as api:
        http = api.http
        mine = (await http.post("/v1/runs", json=body, headers=bearer(OPS))).json()["run_id"]
        same = (await http.post("/v1/runs", json={**body, "tenant": "acme"}, headers=bearer(OPS))).json()["run_id"]
        other = problem(await http.post("/v1/runs", json={**body, "tenant": "globex"}, headers=bearer(OPS)), 403)
        assert "starts runs of tenant 'acme' only; it asked for 'globex'" in other["detail"]
        # A token without a tenant names one, or none; a bad name is refused with a sentence.
        named = (await http.post("/v1/runs", json={**body, "tenant": "globex"}, headers=bearer(DASHBOARD)))
        bad = await http.post("/v1/runs", json={**body, "tenant": "two words"}, headers=bearer(DASHBOARD))
        assert bad.status_code == 422 and "must not contain spaces" in bad.text
        for run_id in (mine, same, named.json()["run_id"]):
            await agent_client.get_handle(run_id).result()
    tenants = [(await agent_client.temporal.get_workflow_handle(r).describe()).typed_search_attributes.get(AGENT_TENANT)
               for r in (mine, same, named.json()["run_id"])]
    assert tenants == ["acme", "acme", "globex"]
