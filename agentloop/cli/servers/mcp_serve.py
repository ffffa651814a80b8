"""``agentloop mcp-serve --stdio``: the registered agents as MCP tools over
stdin and stdout, for MCP clients that launch a command (desktop apps, IDE
assistants); connected to Temporal like ``agentloop serve``
(docs/agent-protocols.md). Over HTTP, ``agentloop serve`` serves the same at ``/mcp``."""

from __future__ import annotations

import argparse
from typing import Any

from agentloop.cli.common import say
from agentloop.cli.embedded import command_config, session
from agentloop.cli.options import imports, workspace
from agentloop.cli.servers.serve import registered_agents
from agentloop.shared.base.errors import UserError


async def cmd_mcp_serve(args: argparse.Namespace) -> int:
    from mcp.server.stdio import stdio_server

    from agentloop.client.agent_client import AgentClient
    from agentloop.server.mcp.stdio import TOKEN_ENV, serve_stdio, stdio_identity
    from agentloop.server.settings import ServerSettings

    if not args.stdio:
        raise UserError("mcp-serve speaks stdio only (--stdio); for streamable HTTP, `agentloop serve` serves "
                        "MCP at /mcp")
    settings = ServerSettings.from_env(agents=registered_agents(args.agent))
    if not settings.agents:
        raise UserError("no agent to serve: name at least one with --agent [NAME=]FILE|MODULE:ATTR")
    caller = stdio_identity(settings)
    config, _ = command_config(args.imports)
    embedded = config.address is None
    # The wire is claimed first: whatever starts after (the embedded server, its worker) writes to stderr.
    async with stdio_server() as streams, session(config, with_worker=embedded, workspace=args.workspace,
                                                  command="mcp-serve") as s:
        client = AgentClient(s.client, task_queue=s.config.task_queue)
        where = f"embedded server {s.config.address}" if embedded else f"Temporal at {s.config.address}"
        say(f"agentloop mcp-serve: stdio ({where}, task queue {s.config.task_queue!r}); agents: "
            f"{', '.join(sorted(settings.agents))}; acting as {caller.name} ({caller.scope})"
            + ("" if caller.name.endswith("(stdio)") else f", from {TOKEN_ENV}"))
        await serve_stdio(client, settings, caller, streams)
    return 0


def add_mcp_serve_parser(sub: Any) -> None:
    """The ``mcp-serve`` command and its options."""
    parser = sub.add_parser(
        "mcp-serve", help="serve the registered agents as MCP tools over stdio",
        description="Serve each --agent as an MCP tool (with durable Tasks) over stdin and stdout, for MCP clients "
                    "that launch a command. The caller is the user who launched it (scope act, every agent); "
                    "AGENTLOOP_MCP_TOKEN=<secret of a token of AGENTLOOP_API_TOKENS> applies that token's scope "
                    "and agent list instead. Logs go to stderr. Over HTTP, `agentloop serve` serves MCP at /mcp.",
    )
    parser.add_argument("--stdio", action="store_true", help="speak MCP over stdin and stdout (the one transport)")
    parser.add_argument("--agent", action="append", default=[], metavar="[NAME=]FILE|MODULE:ATTR",
                        help="an agent to serve as a tool, by name; repeatable")
    workspace(parser, "default workspace for runs that name none (embedded worker)")
    imports(parser)
