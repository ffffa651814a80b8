"""A real MCP server for the tests, built with the ``mcp`` package's own
server API: ``python -m tests.helpers.servers.mcp_server stdio`` or
``python -m tests.helpers.servers.mcp_server http PORT`` (streamable HTTP on 127.0.0.1).

Tools: ``add`` (read-only), ``fail`` (an ``isError`` result), ``rpc_error``
(a JSON-RPC error), ``who.am.i`` (whether the worker's secret reached it,
never the secret), ``count`` (calls so far, in this server process),
``pid`` (this process's), ``slow`` (sleeps), ``exit_now`` (the process exits
during the call), ``idempotency_key`` (the one in the request's ``_meta``)
and ``insert`` (an insert into the JSON-lines table ``AGENTLOOP_TEST_TABLE``
names once ``<table>.release`` exists, one row per idempotency key, each
attempt logged to ``<table>.log``).

``python -m tests.helpers.servers.mcp_server crash`` writes two lines to stderr and
exits with code 3 before it answers.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

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


@server.tool()
def pid() -> int:
    """This server process's id."""
    return os.getpid()


@server.tool()
async def slow(seconds: float) -> str:
    """Answers after ``seconds``."""
    await asyncio.sleep(seconds)
    return f"slept {seconds:g}s"


@server.tool()
def exit_now(code: int) -> str:
    """The server process exits during the call."""
    sys.stderr.write(f"exiting with code {code} on purpose\n")
    sys.stderr.flush()
    os._exit(code)


def _key(ctx: Context) -> str | None:
    meta = ctx.request_context.meta or {}
    return meta.get("agentloop/idempotency_key")


@server.tool()
def idempotency_key(ctx: Context) -> str:
    """The idempotency key the worker sent in the request's ``_meta``."""
    return _key(ctx) or "none"


@server.tool()
async def insert(row: str, ctx: Context) -> str:
    """Insert ``row`` once ``<table>.release`` exists, once per idempotency key."""
    table = Path(os.environ["AGENTLOOP_TEST_TABLE"])
    key = _key(ctx)
    with open(f"{table}.log", "a") as log:
        log.write(json.dumps({"pid": os.getpid(), "key": key}) + "\n")
    while not Path(f"{table}.release").exists():
        await asyncio.sleep(0.05)
    rows = [json.loads(line) for line in table.read_text().splitlines()] if table.exists() else []
    if key is not None and any(r["key"] == key for r in rows):
        return f"{row} was inserted already"
    with table.open("a") as file:
        file.write(json.dumps({"row": row, "key": key}) + "\n")
    return f"inserted {row}"


if __name__ == "__main__":
    if sys.argv[1] == "crash":
        sys.stderr.write("loading the configuration\nFATAL: no database at /nowhere/db.sqlite\n")
        sys.exit(3)
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
