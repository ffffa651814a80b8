"""A real MCP server for the tests, built with the ``mcp`` package's own
server API: ``python -m tests.helpers.mcp_server stdio`` or
``python -m tests.helpers.mcp_server http PORT`` (streamable HTTP on 127.0.0.1).

Tools: ``add`` (read-only), ``fail`` (an ``isError`` result), ``rpc_error``
(a JSON-RPC error), ``who.am.i`` (whether the worker's secret reached it,
never the secret) and ``count`` (calls so far, in
this server process).
"""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import ToolAnnotations

server = MCPServer("agentloop-test")
_calls = {"count": 0}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@server.tool()
def fail(message: str) -> str:
    """Always fails, with the message given."""
    raise ToolError(message)


@server.tool()
def rpc_error() -> str:
    """Answers with a JSON-RPC error."""
    raise MCPError(-32001, "the quota is exhausted")


@server.tool(name="who.am.i")
def whoami(ctx: Context) -> str:
    """Whether the worker sent the credential this server expects
    (``AGENTLOOP_TEST_EXPECTED``): as the ``Authorization`` header of an HTTP
    request, or as ``AGENTLOOP_TEST_SECRET`` in a stdio server's environment.
    Never echoes it."""
    expected = os.environ.get("AGENTLOOP_TEST_EXPECTED", "")
    request = getattr(ctx.request_context, "request", None)
    if request is not None:
        sent = request.headers.get("authorization", "")
        return "authorized" if expected and sent == f"Bearer {expected}" else "no credential"
    return "authorized" if expected and os.environ.get("AGENTLOOP_TEST_SECRET") == expected else "no credential"


@server.tool()
def count() -> int:
    """How many times this tool was called in this server process."""
    _calls["count"] += 1
    return _calls["count"]


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
