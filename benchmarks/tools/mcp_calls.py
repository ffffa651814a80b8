"""What one MCP tool call costs on the worker, before and after sessions are
kept open between calls, over stdio and streamable HTTP.

For each transport, three ways of making the same call (``add``, on a server
built with the ``mcp`` package, started by this module):

* ``fresh, mcp client`` (before): what each call did before: start the
  server (stdio) or open a session (HTTP) with the ``mcp`` client,
  initialize, call, close. Timed in parts, to give the shares spent
  starting (the server, and the session up to its initialization) and
  stopping (the ``mcp`` client closes a stdio server's stdin and waits for
  it to exit);
* ``fresh, McpServers`` (``idle_timeout_seconds: 0``): the same through
  agentloop's ``McpServers``, a session per call (and, for stdio, the guard
  that kills the server with the worker);
* ``kept session`` (after, the default): ``McpServers`` keeps one session
  per server open between calls.

Each figure is the median of ``--calls`` calls (after one warm-up call),
and its ratio to the first row of its transport, measured in the same run.
The call is what the ``execute_tool`` activity runs for an MCP tool; the
activity's own scheduling is the same in both cases (see ``step_overhead``).

Usage::

    python -m benchmarks.tools.mcp_calls [--calls 20]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from typing import Any

from agentloop.activities.tool_sources.mcp_tools import McpServers
from agentloop.workers.devserver import free_port


def serve(transport: str, port: int) -> None:
    """The server the calls go to: ``python -m benchmarks.tools.mcp_calls --serve stdio|http [--port N]``."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bench")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    if transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=port)


STDIO = {"command": sys.executable, "args": ["-m", "benchmarks.tools.mcp_calls", "--serve", "stdio"]}


@asynccontextmanager
async def mcp_client_session(transport: str, url: str) -> Any:
    """A session opened with the ``mcp`` client, as each call opened one before."""
    from mcp.client.session import ClientSession

    if transport == "stdio":
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(command=STDIO["command"], args=list(STDIO["args"]))
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session
    else:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        async with httpx2.AsyncClient() as http, streamable_http_client(url, http_client=http) as streams, \
                ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            yield session


async def fresh_mcp_client(transport: str, url: str, calls: int) -> list[tuple[float, float, float]]:
    """Per call: seconds starting (server and session, to initialized),
    calling, and stopping."""
    parts = []
    for _ in range(calls + 1):
        started = time.perf_counter()
        async with mcp_client_session(transport, url) as session:
            before_call = time.perf_counter()
            result = await session.call_tool("add", {"a": 2, "b": 40})
            after_call = time.perf_counter()
        ended = time.perf_counter()
        assert not result.is_error
        parts.append((before_call - started, after_call - before_call, ended - after_call))
    return parts[1:]


async def through_mcp_servers(settings: dict[str, Any], calls: int) -> list[float]:
    servers = McpServers({"bench": settings})
    times = []
    try:
        for _ in range(calls + 1):
            started = time.perf_counter()
            text, is_error = await servers.call("bench__add", {"a": 2, "b": 40}, idempotency_key="k")
            times.append(time.perf_counter() - started)
            assert (text, is_error) == ("42", False), text
    finally:
        await servers.aclose()
    return times[1:]


async def wait_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    for _ in range(600):
        if process.poll() is not None:
            raise RuntimeError("the benchmark's MCP server exited")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        await asyncio.sleep(0.05)
    raise RuntimeError("the benchmark's MCP server did not listen")


async def measure(transport: str, calls: int) -> list[tuple[str, float, tuple[float, float] | None]]:
    """Rows: (way, median ms per call, the shares spent starting and stopping, or None)."""
    url, process = "", None
    if transport == "http":
        port = free_port()
        url = f"http://127.0.0.1:{port}/mcp"
        process = subprocess.Popen([sys.executable, "-m", "benchmarks.tools.mcp_calls", "--serve", "http",
                                    "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        await wait_listening(port, process)
    settings: dict[str, Any] = dict(STDIO) if transport == "stdio" else {"url": url}
    try:
        parts = await fresh_mcp_client(transport, url, calls)
        fresh = await through_mcp_servers({**settings, "idle_timeout_seconds": 0}, calls)
        kept = await through_mcp_servers(settings, calls)
    finally:
        if process is not None:
            process.terminate()
            process.wait(10)
    totals = [sum(p) for p in parts]
    start = statistics.median(p[0] / sum(p) for p in parts)
    stop = statistics.median(p[2] / sum(p) for p in parts)
    return [("fresh, mcp client (before)", statistics.median(totals) * 1000, (start, stop)),
            ("fresh, McpServers", statistics.median(fresh) * 1000, None),
            ("kept session (after)", statistics.median(kept) * 1000, None)]


async def main(calls: int) -> None:
    print(f"one MCP tool call on the worker (median of {calls}, after a warm-up call)")
    print(f"{'transport':<10} {'way':<28} {'ms/call':>9} {'x before':>9} {'starting':>9} {'stopping':>9}")
    for transport in ("stdio", "http"):
        rows = await measure(transport, calls)
        base = rows[0][1]
        for way, ms, share in rows:
            start, stop = (f"{share[0]:.0%}", f"{share[1]:.0%}") if share is not None else ("", "")
            print(f"{transport:<10} {way:<28} {ms:>9.2f} {ms / base:>8.3f}x {start:>9} {stop:>9}")


def cli(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tools.mcp_calls", description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20, help="calls per way and transport (default 20)")
    parser.add_argument("--serve", choices=["stdio", "http"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve, args.port)
        return
    asyncio.run(main(args.calls))


if __name__ == "__main__":
    cli()

