"""``agentloop mcp-serve --stdio`` launched by the ``mcp`` package's own
stdio client, as a desktop app launches it: a short call answered inline;
a call as a task, the command closed and launched again, the approval
answered with ``tasks/update`` and the task polled to completion; and a
``read`` token (``AGENTLOOP_MCP_TOKEN``) refused a call."""

from __future__ import annotations

import json
import sys
from functools import partial
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from agentloop import AgentClient, AgentSpec
from agentloop.testing import calls, reply, script
from tests.helpers import agents
from tests.helpers.agents import ASKING_TOOLS, write
from tests.helpers.mcp_client import Tasks, poll, start_task, status_is, task_request

asking = partial(agents.spec, default_permission="auto", tools=ASKING_TOOLS)
READER = "reader-secret-0123456789"


def spec_file(tmp_path: Path, name: str, spec: AgentSpec) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(spec.model_dump(mode="json", exclude_defaults=True)))
    return f"{name}={path}"


def launched(env: dict[str, str], *agents_: str, tasks: bool = True, **extra: str) -> Client:
    args = ["-m", "agentloop.cli", "mcp-serve", "--stdio"]
    for agent in agents_:
        args += ["--agent", agent]
    return Client(StdioServerParameters(command=sys.executable, args=args, env={**env, **extra}),
                  extensions=[Tasks()] if tasks else None, read_timeout_seconds=60)


async def test_stdio_inline_task_across_launches_and_a_read_token(
        agent_client: AgentClient, worker, env: dict[str, str], tmp_path: Path) -> None:
    helper = spec_file(tmp_path, "helper", agents.spec(script(reply("hello over stdio")), name="helper"))
    writer = spec_file(tmp_path, "writer", asking(script(calls(write("out.txt", "x")), reply("written")),
                                                  name="writer", workspace=str(tmp_path)))
    async with worker():
        async with launched(env, helper, writer, tasks=False) as mcp:
            assert {t.name for t in (await mcp.list_tools()).tools} == {"helper", "writer"}
            answered = await mcp.call_tool("helper", {"message": "hi"})
            assert answered.content[0].text == "hello over stdio"
        async with launched(env, helper, writer) as mcp:
            task = await start_task(mcp.session, "writer", "write the file")
        async with launched(env, helper, writer) as mcp:
            waiting = await poll(mcp.session, task.task_id, status_is("input_required"), "the approval")
            key = next(iter(waiting["inputRequests"]))
            await task_request(mcp.session, "tasks/update", task.task_id,
                               inputResponses={key: {"action": "accept", "content": {"decision": "approve"}}})
            done = await poll(mcp.session, task.task_id, status_is("completed", "failed"), "the run to end")
            assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "written"
        report = await agent_client.get_handle(task.task_id).report()
        assert report.steps[0].tool_calls[0].decided_by.endswith("(stdio)")
        tokens = f"reader:read:{READER}"
        async with launched(env, helper, AGENTLOOP_API_TOKENS=tokens, AGENTLOOP_MCP_TOKEN=READER) as reader:
            with pytest.raises(MCPError, match="Scope too small"):
                await reader.session.call_tool("helper", {"message": "hi"})
            assert (await task_request(reader.session, "tasks/get", task.task_id))["status"] == "completed"
