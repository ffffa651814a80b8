"""MCP servers as tool sources (docs/tools.md).

The worker knows its MCP servers by name (:class:`McpServers`): a command
and arguments (stdio), or a URL and headers (streamable HTTP). Secrets stay
on the worker: ``${VAR}`` in a header, an argument or an environment value
is read from the worker's environment when it connects. A spec names the
servers it uses (``AgentSpec.mcp_servers``); the run lists their tools once,
in its ``resolve_tools`` activity, so the list is in the run's history and a
replay never asks a server again. Each tool is offered as ``server__tool``;
a call is an ``execute_tool`` activity that connects, calls and disconnects.

Errors the server reports (an ``isError`` result, a JSON-RPC error) are
error results the model sees. A server that cannot be reached is an
``McpServerUnavailable`` failure: at listing time it fails the run, at call
time Temporal retries the call (``AgentSpec.tool_max_attempts``) and then
the model gets an error result.
"""

from __future__ import annotations

import json
import os
import re
import string
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agentloop.shared.activity_io import ToolDefinition
from agentloop.shared.errors import UserError

#: Separates the server's name from its tool's in the name the model sees.
SEPARATOR = "__"

#: The environment variable naming the worker's MCP servers file (JSON or YAML).
MCP_SERVERS_ENV = "AGENTLOOP_MCP_SERVERS"

#: ApplicationError type of a server that cannot be reached (or fails outside a tool).
MCP_UNAVAILABLE_ERROR_TYPE = "McpServerUnavailable"

_SERVER_NAME = re.compile(r"^[a-zA-Z0-9-]+(?:_[a-zA-Z0-9-]+)*$")
_TOOL_CHARS = re.compile(r"[^a-zA-Z0-9_-]")


class McpServer(BaseModel):
    """One MCP server, as the worker reaches it.

    Attributes:
        command: The program to start for a stdio server.
        args: Its arguments.
        env: Extra environment of the stdio server's process.
        cwd: Working directory of the stdio server's process.
        url: The streamable HTTP endpoint (e.g. ``http://localhost:8000/mcp``).
        headers: HTTP headers, e.g. ``{"Authorization": "Bearer ${TOKEN}"}``.
        timeout_seconds: Most time connecting and listing may take.
    """

    model_config = ConfigDict(extra="forbid")

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_seconds: float = Field(default=30.0, gt=0)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (a stdio server) or url (a streamable HTTP server), not both")
        return self

    @property
    def transport(self) -> str:
        return "stdio" if self.command else "streamable HTTP"


def expand(value: str, environ: dict[str, str] | None = None) -> str:
    """``value`` with ``${VAR}`` read from the worker's environment.

    Raises:
        UserError: A variable is not set (named, its value never shown).
    """
    environ = os.environ if environ is None else environ
    try:
        return string.Template(value).substitute(environ)
    except KeyError as exc:
        raise UserError(f"environment variable {exc.args[0]} is not set on the worker") from None
    except ValueError:
        return value


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


class McpUnavailable(Exception):
    """The server could not be reached, or broke the connection."""


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
            if not _SERVER_NAME.match(name) or len(name) > 40:
                raise UserError(f"MCP server name {name!r} is not allowed: use letters, digits, '-' and single '_' "
                                "(at most 40 characters; '__' separates a server's name from its tools' names)")
            try:
                self.servers[name] = server if isinstance(server, McpServer) else McpServer.model_validate(server)
            except ValidationError as exc:
                problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or name}: {e['msg']}" for e in exc.errors())
                raise UserError(f"MCP server {name!r}: {problems}") from None
        # The servers' own names of tools whose names the model sees changed.
        self._names: dict[str, str] = {}

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

    @asynccontextmanager
    async def session(self, name: str) -> AsyncIterator[Any]:
        """An initialized ``ClientSession`` with server ``name``.

        Raises:
            McpUnavailable: It could not be started, reached or initialized.
        """
        from mcp.client.session import ClientSession

        server = self.servers[name]
        try:
            async with self._transport(server) as (read, write), \
                    ClientSession(read, write, read_timeout_seconds=server.timeout_seconds) as session:
                await session.initialize()
                yield session
        except UserError:
            raise
        except McpUnavailable:
            raise
        except BaseException as exc:
            mcp_error = _mcp_error_in(exc)
            if mcp_error is not None:
                raise mcp_error from None
            if not isinstance(exc, Exception):
                raise
            raise McpUnavailable(f"MCP server {name!r} ({server.transport}) is unreachable: {_describe(exc)}") from None

    @asynccontextmanager
    async def _transport(self, server: McpServer) -> AsyncIterator[Any]:
        if server.command:
            from mcp.client.stdio import StdioServerParameters, stdio_client

            params = StdioServerParameters(
                command=expand(server.command), args=[expand(a) for a in server.args],
                env={k: expand(v) for k, v in server.env.items()} or None, cwd=server.cwd)
            async with stdio_client(params, errlog=_errlog()) as streams:
                yield streams
        else:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            headers = {k: expand(v) for k, v in server.headers.items()}
            timeout = httpx2.Timeout(server.timeout_seconds, read=300.0)
            async with httpx2.AsyncClient(headers=headers, timeout=timeout) as http, \
                    streamable_http_client(expand(server.url or ""), http_client=http) as streams:
                yield streams[0], streams[1]

    async def list_tools(self, name: str) -> list[ToolDefinition]:
        """The tools of server ``name``, as the model sees them.

        Raises:
            McpUnavailable: The server could not be reached.
            MCPError: It answered the listing with an error.
        """
        definitions: list[ToolDefinition] = []
        async with self.session(name) as session:
            cursor = None
            while True:
                from mcp.types import PaginatedRequestParams

                listing = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
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
        return definitions

    async def call(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        """Call tool ``name`` (``server__tool``): its text and whether it is an error.

        Raises:
            McpUnavailable: The server could not be reached, or broke the
                connection during the call.
        """
        from mcp.shared.exceptions import MCPError

        parts = split_name(name)
        assert parts is not None
        server, shown_tool = parts
        try:
            async with self.session(server) as session:
                original = self._names.get(name) or await self._original_name(session, server, name, shown_tool)
                result = await session.call_tool(original, arguments)
        except MCPError as exc:
            return f"MCP server {server!r} answered with error {exc.code}: {exc.message}", True
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


def _mcp_error_in(exc: BaseException) -> Exception | None:
    """An ``MCPError`` in ``exc`` (or in an exception group around it)."""
    from mcp.shared.exceptions import MCPError

    if isinstance(exc, MCPError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _mcp_error_in(inner)
            if found is not None:
                return found
    return None


def _describe(exc: BaseException) -> str:
    """One line about a connection failure, unwrapping exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _errlog() -> Any:
    """Where a stdio server's stderr goes: the worker's stderr (a file
    object with a descriptor, as subprocesses need)."""
    try:
        sys.stderr.fileno()
        return sys.stderr
    except (AttributeError, OSError, ValueError):
        return open(os.devnull, "w")  # pytest's captured stderr has no descriptor
