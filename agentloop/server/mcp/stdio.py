"""The registered agents over MCP's stdio transport (``agentloop mcp-serve
--stdio``), for clients that launch a command. Over stdio there is no door
to knock on: the caller is the user who launched the command, with scope
``act`` and every registered agent, named by their login in decisions'
``by``. ``AGENTLOOP_MCP_TOKEN`` narrows that to one token of
``AGENTLOOP_API_TOKENS``: its name, scope and agent list apply, as over HTTP."""

from __future__ import annotations

import getpass
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from agentloop.server.access.auth import Caller
from agentloop.server.mcp.service import FORBIDDEN, AgentTools, CallerOf
from agentloop.server.settings import TOKENS_ENV, Scope, ServerSettings
from agentloop.shared.base.errors import UserError

if TYPE_CHECKING:
    from agentloop.client.agent_client import AgentClient

#: The token a stdio server acts as, when set (its secret, one of ``AGENTLOOP_API_TOKENS``).
TOKEN_ENV = "AGENTLOOP_MCP_TOKEN"


def stdio_identity(settings: ServerSettings, environ: Mapping[str, str] | None = None) -> Caller:
    """Who a stdio server's requests come from: the token named by
    ``AGENTLOOP_MCP_TOKEN``, else the launching user (scope ``act``).

    Raises:
        UserError: ``AGENTLOOP_MCP_TOKEN`` is set but is no token of ``AGENTLOOP_API_TOKENS``.
    """
    env = os.environ if environ is None else environ
    secret = env.get(TOKEN_ENV)
    if not secret:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = "local"
        return Caller(f"{user} (stdio)", "act")
    import hmac

    found = [t for t in settings.tokens if hmac.compare_digest(t.secret.encode(), secret.encode())]
    if not found:
        raise UserError(f"{TOKEN_ENV} is set but is not the secret of a token of {TOKENS_ENV}: set both, or "
                        f"unset {TOKEN_ENV} to act as the user who launched the command")
    token = found[0]
    return Caller(token.name, token.scope, token.agents)


def fixed_caller(caller: Caller) -> CallerOf:
    """Every request from ``caller``, refused where its scope is too small."""

    def caller_of(ctx: ServerRequestContext[Any, Any], needed: Scope) -> Caller:
        if needed == "act" and caller.scope != "act":
            raise MCPError(FORBIDDEN, f"Scope too small: token {caller.name!r} has scope {caller.scope!r}; "
                           f"this request needs {needed!r}")
        return caller

    return caller_of


async def serve_stdio(client: AgentClient, settings: ServerSettings, caller: Caller, streams: Any) -> None:
    """Serve MCP on ``streams`` (``mcp.server.stdio.stdio_server``'s) until the client closes stdin."""
    server = AgentTools(client, settings, fixed_caller(caller)).server()
    read, write = streams
    await server.run(read, write, server.create_initialization_options())
