"""``agentloop diff`` and ``GET /v1/diff`` (docs/diff.md) on two real runs on
the session's dev server: the same scripted model under two system prompts,
the second of which makes it call another tool. The CLI runs as a
subprocess (text, --json, a snapshot file, an unknown run); the route runs on
a real uvicorn server with tokens (a read token, a token limited to another
agent, an unknown run)."""

from __future__ import annotations

import json
from pathlib import Path

from agentloop import AgentClient
from agentloop.server import ServerSettings, parse_tokens
from agentloop.shared.definition.activity_io import ModelRequest, ModelResponse
from agentloop.testing import call, calls, last_tool_results, reply, script_every_step
from agentloop.tools.registry import ToolRegistry
from tests.helpers.agents import spec
from tests.helpers.cli import agentloop_async
from tests.helpers.http_api import serve

READER = "reader-secret-0123456789"
OTHER = "other-secret-0123456789"
TOKENS = parse_tokens(f"dash:read:{READER},other:read:{OTHER}:agents=billing")


def choose(request: ModelRequest) -> ModelResponse:
    """Looks the customer up when the prompt says so, else the order; then answers with the result."""
    results = last_tool_results(request)
    if results:
        return reply(f"Answer: {results[0].content}.")
    tool = "lookup_customer" if "customer" in request.system_prompt else "lookup_order"
    return calls(call(tool, {"id": "7"}))


async def two_runs(agent_client: AgentClient, registry: ToolRegistry) -> tuple[str, str]:
    @registry.tool(read_only=True)
    async def lookup_order(id: str) -> str:
        """Look an order up."""
        return f"order {id} shipped"

    @registry.tool(read_only=True)
    async def lookup_customer(id: str) -> str:
        """Look a customer up."""
        return f"customer {id} is gold"

    model = script_every_step(choose)
    tools = ["lookup_order", "lookup_customer"]
    first = await agent_client.start(spec(model, name="support", tools=tools, system_prompt="Check the order."),
                                     "where is 7?")
    second = await agent_client.start(spec(model, name="support", tools=tools, system_prompt="Check the customer."),
                                      "where is 7?")
    assert (await first.result()).final_text == "Answer: order 7 shipped."
    assert (await second.result()).final_text == "Answer: customer 7 is gold."
    return first.run_id, second.run_id


async def test_agentloop_diff_says_the_prompt_changed_and_another_tool_was_called(
    agent_client: AgentClient, worker, registry: ToolRegistry, env: dict[str, str], tmp_path: Path
) -> None:
    async with worker():
        a, b = await two_runs(agent_client, registry)
        text = await agentloop_async("diff", a, b, env=env)
        as_json = await agentloop_async("diff", a, b, "--json", env=env)
        exported = await agentloop_async("export", a, env=env)
        (tmp_path / "a.json").write_text(exported.out)
        from_file = await agentloop_async("diff", str(tmp_path / "a.json"), b, "--json", env=env)
        unknown = await agentloop_async("diff", a, "no-such-run", env=env)
    assert text.code == 0, text.err
    out = "\n".join(" ".join(line.split()) for line in text.out.splitlines())
    assert "agent definition changed" in out and "system prompt changed" in out
    assert "prompt system_prompt: Check the order. -> Check the customer." in out
    assert "different tools: A lookup_order; B lookup_customer" in out
    assert "~ step 1|1 tool_call tool lookup_order -> lookup_customer: " in out
    assert "~ step 2|2 message Answer: [-order -]{+customer +}7 [-shipped-]{+is gold+}." in out
    assert "~ step 1|1 tool_result [-order -]{+customer +}7 [-shipped-]{+is gold+}" in out
    assert "\x1b[" not in text.out  # not a terminal: no colour
    diff = json.loads(as_json.out)
    assert diff["a"]["run_id"] == a and diff["b"]["tool_calls"] == ["lookup_customer"]
    assert diff["same_tools"] is False and diff["definition"]["summary"]["prompt_changed"] is True
    call_row = next(r for r in diff["rows"] if r["part"] == "tool_call")
    assert call_row["type"] == "changed" and (call_row["tool_a"], call_row["tool_b"]) == ("lookup_order",
                                                                                       "lookup_customer")
    assert json.loads(from_file.out)["rows"] == diff["rows"]
    assert unknown.code == 1 and "Traceback" not in unknown.err
    assert "no run 'no-such-run' in namespace" in unknown.err


async def test_get_v1_diff_with_tokens(agent_client: AgentClient, worker, registry: ToolRegistry) -> None:
    async with worker(), serve(agent_client, ServerSettings(tokens=TOKENS)) as api:
        a, b = await two_runs(agent_client, registry)
        read = await api.http.get("/v1/diff", params={"a": a, "b": b}, headers={"Authorization": f"Bearer {READER}"})
        none = await api.http.get("/v1/diff", params={"a": a, "b": b})
        other = await api.http.get("/v1/diff", params={"a": a, "b": b}, headers={"Authorization": f"Bearer {OTHER}"})
        unknown = await api.http.get("/v1/diff", params={"a": a, "b": "no-such-run"},
                                     headers={"Authorization": f"Bearer {READER}"})
    assert read.status_code == 200, read.text
    body = read.json()
    assert body["a"]["run_id"] == a and body["b"]["run_id"] == b and body["changed"] >= 2
    assert [d["name"] for d in body["usage"]][:3] == ["input_tokens", "output_tokens", "total_tokens"]
    for refused, status in ((none, 401), (other, 404), (unknown, 404)):
        assert refused.status_code == status and refused.headers["content-type"] == "application/problem+json"
    # Another agent's run is answered as an unknown one.
    assert other.json()["detail"].startswith(f"no run {a!r}")
    assert "no run 'no-such-run'" in unknown.json()["detail"]
