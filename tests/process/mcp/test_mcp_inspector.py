"""The MCP Inspector's CLI (``@modelcontextprotocol/inspector``, ``--cli``
mode, a client we did not write, on the TypeScript SDK) against ``/mcp`` of
a real server: it lists the tools and calls one, with a bearer token.

``tests/mcp_inspector`` holds the Node project (``package-lock.json``);
``.ci/run`` installs it with ``npm install`` (``npm ci`` refuses the lock:
vite names an optional package the registry does not have). Without its ``node_modules`` (or
without Node) this test skips with the command to run, and fails when
``AGENTLOOP_REQUIRE_MCP_INSPECTOR=1`` (``.ci/run`` sets it). Nothing is
downloaded at test time."""

from __future__ import annotations

import asyncio
import json
import shutil
from typing import Any

from agentloop import AgentClient
from agentloop.server import ServerSettings, parse_tokens
from agentloop.testing import reply, script
from tests.helpers import agents
from tests.helpers.http_api import serve
from tests.helpers.optional import missing
from tests.helpers.paths import ROOT

INSPECTOR_DIR = ROOT / "tests" / "mcp_inspector"
CLI = INSPECTOR_DIR / "node_modules" / ".bin" / "mcp-inspector"
REQUIRE = "AGENTLOOP_REQUIRE_MCP_INSPECTOR"
SECRET = "ops-secret-0123456789"


def require_inspector() -> None:
    if shutil.which("node") is None:
        missing("Node is not installed, so the MCP Inspector test cannot run: apt-get install -y nodejs npm", REQUIRE)
    elif not CLI.exists():
        missing("the MCP Inspector is not installed: npm install --prefix tests/mcp_inspector", REQUIRE)


async def inspector(url: str, *args: str) -> Any:
    """``mcp-inspector --cli URL ARGS`` with the token: its JSON output."""
    process = await asyncio.create_subprocess_exec(
        str(CLI), "--cli", url, "--transport", "http", "--header", f"Authorization: Bearer {SECRET}", *args,
        cwd=INSPECTOR_DIR, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, (process.returncode, out.decode()[-2000:], err.decode()[-2000:])
    return json.loads(out)


async def test_the_inspector_lists_the_agents_and_calls_one(agent_client: AgentClient, worker) -> None:
    require_inspector()
    settings = ServerSettings(tokens=parse_tokens(f"ops:act:{SECRET}"),
                              agents={"helper": agents.spec(script(reply("hello, inspector")), name="helper")})
    async with worker(), serve(agent_client, settings) as api:
        url = f"{api.url}/mcp"
        listed = await inspector(url, "--method", "tools/list")
        [tool] = listed["tools"]
        assert tool["name"] == "helper" and tool["inputSchema"]["required"] == ["message"]
        called = await inspector(url, "--method", "tools/call", "--tool-name", "helper", "--tool-arg", "message=hi")
        assert called["content"][0]["text"] == "hello, inspector" and not called.get("isError")
