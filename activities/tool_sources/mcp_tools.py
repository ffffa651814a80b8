"""MCP servers as tool sources (docs/tools.md).

The worker knows its MCP servers by name (:class:`McpServers`): a command
and arguments (stdio), or a URL and headers (streamable HTTP). Secrets stay
on the worker: ``${VAR}`` in a header, an argument or an environment value
is read from the worker's environment when it connects. A spec names the
servers it uses (``AgentSpec.mcp_servers``); the run lists their tools once,
in its ``resolve_tools`` activity, so the list is in the run's history and a
replay never asks a server again. Each tool is offered as ``server__tool``;
a call is an ``execute_tool`` activity. The worker keeps one session per
server open between calls (a stdio server keeps running), closed after
``idle_timeout_seconds`` without a call, re-opened when it died. A stdio
server is started through a guard (``activities/tool_sources/mcp_guard.py``) so that it
dies with the worker.

Errors the server reports (an ``isError`` result, a JSON-RPC error) are
error results the model sees. A server that cannot be reached, or that
exits or breaks the connection during a call, is an ``McpServerUnavailable``
failure: at listing time it fails the run, at call time Temporal retries the
call (``AgentSpec.tool_max_attempts``) and then the model gets an error
result. Limits: starting, connecting and listing take at most the server's
``timeout_seconds``; a call, its tool's timeout (``AgentSpec.tool_timeouts``,
else ``AgentSpec.tool_timeout_seconds``), as for every tool.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentloop.activities.tool_sources.mcp_server import (
    SERVER_NAME,
    HeldSession,
    McpServer,
    McpUnavailable,
    describe_failure,
)
from agentloop.shared.base.errors import UserError
from agentloop.shared.definition.activity_io import ToolDefinition

#: Separates the server's name from its tool's in the name the model sees.
SEPARATOR = "__"

#: The environment variable naming the worker's MCP servers file (JSON or YAML).
MCP_SERVERS_ENV = "AGENTLOOP_MCP_SERVERS"

#: ApplicationError type of a server that cannot be reached (or fails outside a tool).
MCP_UNAVAILABLE_ERROR_TYPE = "McpServerUnavailable"

#: The key of a call's idempotency key in the ``_meta`` of its ``tools/call`` request.
IDEMPOTENCY_META_KEY = "agentloop/idempotency_key"


_TOOL_CHARS = re.compile(r"[^a-zA-Z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    """The name the model sees: ``server__tool``, other characters as ``_``, at most 64."""
    return (server + SEPARATOR + _TOOL_CHARS.sub("_", tool))[:64]


def split_name(name: str) -> tuple[str, str] | None:
    """``(server, tool)`` of an MCP tool name, or None."""
    server, sep, tool = name.partition(SEPARATOR)
    return (server, tool) if sep and server and tool else None


def content_text(result: Any) -> str:
    """What the model sees of a ``CallToolResult``: its text parts, other
    parts described, the structured content when there is no text."""
    parts: list[str] = []
    for item in getattr(result, "content", None) or []:
        kind = getattr(item, "type", "")
        if kind == "text":
            parts.append(item.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} {getattr(item, 'mime_type', '') or ''}]".replace(" ]", "]"))
        elif kind == "resource":
            resource = item.resource
            parts.append(getattr(resource, "text", None) or f"[resource {resource.uri}]")
        elif kind == "resource_link":
            parts.append(f"[resource {item.uri}]")
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        return json.dumps(structured, ensure_ascii=False)
    return "\n".join(parts)


class McpServers:
    """The MCP servers a worker knows, by name.

    Args:
        servers: ``{name: McpServer or its fields as a dict}``. Names are
            letters, digits, ``-`` and single ``_`` (``__`` separates a
            server's name from its tools' names).

    Raises:
        UserError: A name or a server's settings are not valid.
    """

    def __init__(self, servers: dict[str, McpServer | dict[str, Any]] | None = None) -> None:
        self.servers: dict[str, McpServer] = {}
        for name, server in (servers or {}).items():
            if not SERVER_NAME.match(name) or len(name) > 40:
                raise UserError(f"MCP server name {name!r} is not allowed: use letters, digits, '-' and single '_' "
                                "(at most 40 characters; '__' separates a server's name from its tools' names)")
            try:
                self.servers[name] = server if isinstance(server, McpServer) else McpServer.model_validate(server)
            except ValidationError as exc:
                problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or name}: {e['msg']}" for e in exc.errors())
                raise UserError(f"MCP server {name!r}: {problems}") from None
        # The servers' own names of tools whose names the model sees changed.
        self._names: dict[str, str] = {}
        # The open session with each server, shared by this worker's calls.
        self._sessions: dict[str, HeldSession] = {}

    @classmethod
    def from_file(cls, path: str | Path) -> McpServers:
        """Servers from a JSON or YAML file: ``{name: {command, args, ...}}``
        (or the same under a top-level ``mcp_servers`` / ``mcpServers`` key).

        Raises:
            UserError: The file cannot be read or is not such a mapping.
        """
        path = Path(path)
        try:
            text = path.read_text()
        except OSError as exc:
            raise UserError(f"cannot read the MCP servers file {path} ({MCP_SERVERS_ENV}): {exc.strerror}") from None
        import yaml

        try:
            data = yaml.safe_load(text) if path.suffix in (".yaml", ".yml") else json.loads(text)
        except (ValueError, yaml.YAMLError) as exc:
            raise UserError(f"the MCP servers file {path} is not valid {path.suffix.lstrip('.') or 'JSON'}: "
                            f"{str(exc).splitlines()[0]}") from None
        if isinstance(data, dict):
            data = data.get("mcp_servers", data.get("mcpServers", data))
        if not isinstance(data, dict):
            raise UserError(f"the MCP servers file {path} must map server names to their settings")
        return cls(data)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> McpServers:
        """Servers from the file ``AGENTLOOP_MCP_SERVERS`` names; none when unset."""
        path = (os.environ if environ is None else environ).get(MCP_SERVERS_ENV)
        return cls.from_file(path) if path else cls()

    def __contains__(self, name: object) -> bool:
        return name in self.servers

    def names(self) -> list[str]:
        return sorted(self.servers)

    def owns(self, tool: str) -> bool:
        """Whether ``tool`` names a tool of one of these servers."""
        parts = split_name(tool)
        return parts is not None and parts[0] in self.servers

    async def aclose(self) -> None:
        """Close every open session (their stdio servers exit)."""
        sessions, self._sessions = list(self._sessions.values()), {}
        for held in sessions:
            held.close()
        await asyncio.gather(*(held.task for held in sessions), return_exceptions=True)

    async def _open(self, name: str) -> HeldSession:
        """The worker's open session with server ``name``: the one kept from
        an earlier call, or a new one if there is none or it died."""
        held = self._sessions.get(name)
        if held is None or not held.usable:
            if held is not None:
                held.close()
            held = self._sessions[name] = HeldSession(name, self.servers[name])
        await held.opened()
        return held

    @asynccontextmanager
    async def _use(self, name: str) -> AsyncIterator[HeldSession]:
        held = await self._open(name)
        held.users += 1
        completed = False
        try:
            yield held
            completed = True
        finally:
            held.users -= 1
            if not completed:
                held.retire()  # a call cut short (timed out, cancelled) may leave the server busy
            held.touch()

    async def list_tools(self, name: str) -> list[ToolDefinition]:
        """The tools of server ``name``, as the model sees them, within the
        server's ``timeout_seconds`` (starting it, if need be, included).

        Raises:
            McpUnavailable: The server could not be started or reached, or
                did not answer in time.
            MCPError: It answered the listing with an error.
        """
        from mcp.shared.exceptions import MCPError
        from mcp.types import PaginatedRequestParams

        server = self.servers[name]
        definitions: list[ToolDefinition] = []
        try:
            async with asyncio.timeout(server.timeout_seconds):
                async with self._use(name) as held:
                    cursor = None
                    while True:
                        try:
                            listing = await held.session.list_tools(
                                params=PaginatedRequestParams(cursor=cursor) if cursor else None)
                        except MCPError as exc:
                            if held.lost(exc):
                                raise await held.unavailable("while listing its tools") from None
                            raise
                        for tool in listing.tools:
                            shown = tool_name(name, tool.name)
                            self._names[shown] = tool.name
                            annotations = getattr(tool, "annotations", None)
                            definitions.append(ToolDefinition(
                                name=shown, description=tool.description or "",
                                parameters=dict(tool.input_schema or {"type": "object", "properties": {}}),
                                read_only=bool(annotations and getattr(annotations, "read_only_hint", False))))
                        cursor = listing.next_cursor
                        if not cursor:
                            break
        except TimeoutError:
            raise McpUnavailable(f"MCP server {name!r} ({server.transport}) did not start and list its tools within "
                                 f"{server.timeout_seconds:g}s (its timeout_seconds, in the worker's MCP servers "
                                 "settings)") from None
        return definitions

    async def call(self, name: str, arguments: dict[str, Any], idempotency_key: str | None = None) -> tuple[str, bool]:
        """Call tool ``name`` (``server__tool``): its text and whether it is
        an error. No limit of its own: the caller's (the tool's timeout)
        applies; ``idempotency_key`` goes in the request's ``_meta`` as
        :data:`IDEMPOTENCY_META_KEY`.

        Raises:
            McpUnavailable: The server could not be started or reached, or
                broke the connection (or exited) during the call.
        """
        from mcp.shared.exceptions import MCPError

        parts = split_name(name)
        assert parts is not None
        server, shown_tool = parts
        meta = {IDEMPOTENCY_META_KEY: idempotency_key} if idempotency_key else None
        async with self._use(server) as held:
            try:
                original = self._names.get(name) or await self._original_name(held.session, server, name, shown_tool)
                result = await held.session.call_tool(original, arguments, meta=meta)
            except MCPError as exc:
                if held.lost(exc):
                    raise await held.unavailable("during the call") from None
                return f"MCP server {server!r} answered with error {exc.code}: {exc.message}", True
            except (OSError, RuntimeError) as exc:  # a transport broken under the session
                held.retire()
                raise McpUnavailable(f"MCP server {server!r} ({held.server.transport}) broke the connection "
                                     f"during the call: {describe_failure(exc)}") from None
        return content_text(result), bool(getattr(result, "is_error", False))

    async def _original_name(self, session: Any, server: str, name: str, shown_tool: str) -> str:
        """The server's own name of a tool whose name the model sees (listed
        by another worker, or before this one restarted)."""
        listing = await session.list_tools()
        for tool in listing.tools:
            if tool_name(server, tool.name) == name:
                self._names[name] = tool.name
                return tool.name
        return shown_tool


