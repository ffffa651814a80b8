"""``/mcp`` on ``agentloop serve``: streamable HTTP MCP behind the same
doors as the rest of the server. The app's :class:`DoorGuard` checks Host,
Origin, content type and size first; this door then wants a valid bearer
token (401/403 problems, as every route), and each MCP method checks its
scope: ``read`` lists tools and reads tasks, ``act`` calls tools, answers
and cancels tasks. The ``mcp`` package's own DNS-rebinding protection is
given the same hosts and origins (:func:`transport_security`)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from starlette.requests import Request

from agentloop.server.access.auth import Caller, authorize
from agentloop.server.access.doors import Doors
from agentloop.server.mcp.service import FORBIDDEN, AgentTools
from agentloop.server.problems import Problem, problem_response
from agentloop.server.settings import Scope, ServerSettings

if TYPE_CHECKING:
    from agentloop.client.agent_client import AgentClient
    from agentloop.server.streams.hub import RunHub

#: Where the door is mounted.
MCP_PATH = "/mcp"


def transport_security(doors: Doors) -> TransportSecuritySettings:
    """The ``mcp`` package's Host/Origin checks, set to what :class:`Doors`
    accepts: the same host names (at the server's port), the server's own
    origins and the CORS origins. Off where the doors accept any host or any
    origin (a server with tokens and no ``--allowed-host``; ``*``)."""
    if doors.hosts is None or "*" in doors.origins:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    port = f":{doors.port}" if doors.port else ":*"
    hosts = sorted({h + port for h in doors.hosts} | ({h for h in doors.hosts} if doors.port in (None, 80) else set()))
    origins = sorted({f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")} | set(doors.origins))
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                     allowed_origins=origins)


def http_caller(settings: ServerSettings) -> Callable[[ServerRequestContext[Any, Any], Scope], Caller]:
    """Who made an MCP request over HTTP: its bearer token, as for any route."""

    def caller_of(ctx: ServerRequestContext[Any, Any], needed: Scope) -> Caller:
        request = ctx.request
        if not isinstance(request, Request):
            raise MCPError(FORBIDDEN, "no HTTP request carries this message's token")
        try:
            return authorize(settings, request, needed)
        except Problem as problem:
            raise MCPError(FORBIDDEN, f"{problem.title}: {problem.detail}") from None

    return caller_of


def request_hub(ctx: ServerRequestContext[Any, Any]) -> RunHub | None:
    """The hub of the app an MCP request came to over HTTP (None elsewhere)."""
    request = ctx.request
    state = getattr(request.app.state, "agentloop", None) if isinstance(request, Request) else None
    return state.hub if state is not None else None


class McpDoor:
    """The ASGI app at ``/mcp``: a token check, then the ``mcp`` package's
    streamable HTTP session manager (stateless: every request stands alone,
    so a client that reconnects just sends its next request)."""

    def __init__(self, client: AgentClient, settings: ServerSettings, doors: Callable[[], Doors]) -> None:
        self.settings, self.doors = settings, doors
        self.server = AgentTools(client, settings, http_caller(settings), request_hub).server()
        self.manager: StreamableHTTPSessionManager | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Serve while the app runs (entered by its lifespan, once the port is known)."""
        self.manager = StreamableHTTPSessionManager(
            app=self.server, stateless=True, security_settings=transport_security(self.doors()),
            max_request_body_size=self.settings.max_body_bytes)
        async with self.manager.run():
            yield
        self.manager = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        request = Request(scope, receive)
        try:
            caller = authorize(self.settings, request, "read")
            if request.method == "GET":
                # Stateless: the server never sends on its own, so it offers no
                # stream to GET (the transport's 405), rather than one held open for nothing.
                raise Problem(405, "No stream to GET", "this MCP server is stateless and sends nothing "
                              "unasked: POST JSON-RPC requests to /mcp", headers={"Allow": "POST"})
            # Each response (an inline call streams until its run ends) holds a
            # stream slot, as every SSE stream of the server does (--max-streams).
            release = request.app.state.agentloop.streams.take(caller.name) if self.manager else None
        except Problem as problem:
            await problem_response(problem, request)(scope, receive, send)
            return
        if self.manager is None or release is None:
            await problem_response(Problem(503, "Not serving", "the MCP door is not running (the app's lifespan "
                                           "has not started)"), request)(scope, receive, send)
            return
        try:
            await self.manager.handle_request(scope, receive, send)
        finally:
            release()
