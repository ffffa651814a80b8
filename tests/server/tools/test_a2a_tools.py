"""A remote A2A agent as a tool (``a2a:<url>``): an agentloop agent calls
another one served by ``agentloop serve``'s A2A door, with ``a2a-sdk``'s
client on the worker; the idempotency key makes a repeated call the same
remote run; a URL the worker does not list is refused."""

from __future__ import annotations

import uuid

import pytest

from agentloop import AgentClient
from agentloop.activities.tool_sources import a2a_tools
from agentloop.server import ServerSettings, parse_tokens
from agentloop.shared.runs.result import RunError
from agentloop.testing import call, calls, reply, script
from tests.helpers import agents
from tests.helpers.agents import echo_results
from tests.helpers.http_api import serve

TOKEN = "remote-secret-0123456789"


async def test_an_agent_calls_a_remote_a2a_agent(agent_client: AgentClient, worker, monkeypatch) -> None:
    remote = agents.spec(script(reply("remote says 42")), name="oracle", system_prompt="Knows the answer.")
    settings = ServerSettings(tokens=parse_tokens(f"caller:act:{TOKEN}:agents=oracle"), agents={"oracle": remote})
    async with worker(), serve(agent_client, settings) as api:
        url = f"{api.url}/a2a/oracle"
        monkeypatch.setenv(a2a_tools.TOKENS_ENV, f"{url}={TOKEN}")
        name = a2a_tools.tool_name(url)
        definition = await a2a_tools.definition(f"a2a:{url}")
        assert definition.name == name and "Knows the answer." in definition.description
        assert definition.parameters["required"] == ["message"]

        model = script(calls(call(name, {"message": "what is the answer?"})), echo_results)
        caller = agents.spec(model, name="asker", tools=[f"a2a:{url}"])
        result = await agent_client.run(caller, "ask the oracle")
        assert result.final_text == f"{name}:remote says 42"
        run_id = result.run_id
        # The remote run is keyed by the caller's run and call: sending the same call again is the same task.
        again, is_error = await a2a_tools.call(name, {"message": "what is the answer?"}, f"{run_id}:call_0_0")
        assert (again, is_error) == ("remote says 42", False)
        remote_runs = (await api.http.get("/v1/runs", params={"name": "oracle"},
                                          headers={"Authorization": f"Bearer {TOKEN}"})).json()["runs"]
        assert len(remote_runs) == 1

        monkeypatch.delenv(a2a_tools.TOKENS_ENV)
        other = agents.spec(script(reply("unused")), name=f"x{uuid.uuid4().hex[:4]}", tools=[f"a2a:{url}"])
        with pytest.raises(RunError) as refused:
            await agent_client.run(other, "go")
        causes, err = [], refused.value
        while err is not None:
            causes.append(str(err))
            err = err.__cause__
        assert any(f"list it in {a2a_tools.AGENTS_ENV}" in c for c in causes), causes
