"""A scripted model that calls the test MCP server's ``insert`` tool, for
killing a worker during an MCP call. Imported by worker subprocesses
(``agentloop worker --import tests.helpers.mcp_fixture``), whose
``AGENTLOOP_MCP_SERVERS`` names the server ``db``."""

from __future__ import annotations

from agentloop.testing import call, calls, register_scripted_model, reply

register_scripted_model("mcp_insert", [calls(call("db__insert", {"row": "order-17"})), reply("done")])
