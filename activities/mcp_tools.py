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
server is started through a guard (``activities/mcp_guard.py``) so that it
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
import contextlib
import json
import os
import re
import shutil
import string
import sys
import threading
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agentloop.shared.definition.activity_io import ToolDefinition
from agentloop.activities.mcp_guard import EXIT_LINE
from agentloop.shared.base.errors import UserError

#: Separates the server's name from its tool's in the name the model sees.
SEPARATOR = "__"

#: The environment variable naming the worker's MCP servers file (JSON or YAML).
MCP_SERVERS_ENV = "AGENTLOOP_MCP_SERVERS"

#: ApplicationError type of a server that cannot be reached (or fails outside a tool).
MCP_UNAVAILABLE_ERROR_TYPE = "McpServerUnavailable"

#: The key of a call's idempotency key in the ``_meta`` of its ``tools/call`` request.
IDEMPOTENCY_META_KEY = "agentloop/idempotency_key"

#: How many of a stdio server's last stderr lines a failure quotes.
STDERR_LINES = 8

#: The script a stdio server is started through (it dies with the worker).
GUARD = Path(__file__).with_name("mcp_guard.py")

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
        timeout_seconds: Most time starting the server, connecting and
            listing its tools may take (not a call's limit: a call has its
            tool's timeout, ``AgentSpec.tool_timeouts``).
        idle_timeout_seconds: How long the worker keeps a session (and a
            stdio server's process) open without a call; 0 opens one per call.
    """

    model_config = ConfigDict(extra="forbid")

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_seconds: float = Field(default=30.0, gt=0)
    idle_timeout_seconds: float = Field(default=300.0, ge=0)

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
        # The open session with each server, shared by this worker's calls.
        self._sessions: dict[str, _HeldSession] = {}

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

    async def _open(self, name: str) -> _HeldSession:
        """The worker's open session with server ``name``: the one kept from
        an earlier call, or a new one if there is none or it died."""
        held = self._sessions.get(name)
        if held is None or not held.usable:
            if held is not None:
                held.close()
            held = self._sessions[name] = _HeldSession(name, self.servers[name])
        await held.opened()
        return held

    @asynccontextmanager
    async def _use(self, name: str) -> AsyncIterator[_HeldSession]:
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
                                     f"during the call: {_describe(exc)}") from None
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


class _StderrTail:
    """A stdio server's stderr: forwarded to the worker's stderr, its last
    lines kept, and the exit code its guard reports (activities/mcp_guard.py)."""

    def __init__(self, name: str, on_exit: Any) -> None:
        read_fd, write_fd = os.pipe()
        self.writer: Any = os.fdopen(write_fd, "w")  # the server's stderr
        self.lines: deque[str] = deque(maxlen=STDERR_LINES)
        self.exit_code: int | None = None
        self.ended = threading.Event()
        self._name, self._on_exit = name, on_exit
        threading.Thread(target=self._read, args=(read_fd,), name=f"MCP server {name} stderr", daemon=True).start()

    def close_writer(self) -> None:
        """Close the worker's copy of the write end (the server has its own),
        so the reader sees the end when the server's side closes."""
        if not self.writer.closed:
            self.writer.close()

    def _read(self, fd: int) -> None:
        with os.fdopen(fd, "rb") as pipe:
            for raw in pipe:
                line = raw.decode(errors="replace").rstrip("\r\n")
                if line.startswith(EXIT_LINE):
                    with contextlib.suppress(ValueError):
                        self.exit_code = int(line.removeprefix(EXIT_LINE).strip())
                    self._on_exit()
                    continue
                self.lines.append(line)
                with contextlib.suppress(Exception):
                    _errlog().write(f"[MCP server {self._name}] {line}\n")
        self.ended.set()
        self._on_exit()

    def describe(self) -> str:
        tail = [line for line in self.lines if line.strip()]
        if not tail:
            return "it wrote nothing on stderr"
        return "the last lines of its stderr: " + " | ".join(line.strip()[:300] for line in tail)


class _HeldSession:
    """A session with one server, held open by a task of its own (anyio's
    context managers are left by the task that entered them), shared by the
    calls of this worker, closed after ``idle_timeout_seconds`` unused."""

    def __init__(self, name: str, server: McpServer) -> None:
        self.name, self.server = name, server
        self.session: Any = None
        self.users = 0
        self.failure: BaseException | None = None
        self.ended = False
        self.retired = False
        self._loop = asyncio.get_running_loop()
        self._ready = asyncio.Event()
        self._wake = asyncio.Event()
        self._stop = False
        self.stderr = _StderrTail(name, self._exited_soon) if server.command else None
        self.task = asyncio.create_task(self._hold(), name=f"MCP session {name}")

    @property
    def usable(self) -> bool:
        """Open (or opening), not retired, and its server still running."""
        exited = self.stderr is not None and (self.stderr.exit_code is not None or self.stderr.ended.is_set())
        return not (self.ended or self.retired or self._stop or exited)

    def _exited_soon(self) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to wake
            self._loop.call_soon_threadsafe(self.retire)

    def touch(self) -> None:
        """A call ended: the idle time counts from now (or it closes, when retired or kept for no time)."""
        if self.users == 0 and (self.retired or self.server.idle_timeout_seconds == 0):
            self.close()
        self._wake.set()

    def retire(self) -> None:
        """Give it to no new call; close it once its calls are done."""
        self.retired = True
        if self.users == 0:
            self.close()

    def close(self) -> None:
        self._stop = True
        self._wake.set()

    async def opened(self) -> None:
        """Wait until the session is initialized.

        Raises:
            McpUnavailable: The server could not be started or reached, or
                did not answer within its ``timeout_seconds``.
            MCPError: It answered the initialization with an error.
        """
        try:
            async with asyncio.timeout(self.server.timeout_seconds):
                await asyncio.shield(self._ready.wait())
        except TimeoutError:
            self.close()
            raise McpUnavailable(f"MCP server {self.name!r} ({self.server.transport}) did not start and answer "
                                 f"within {self.server.timeout_seconds:g}s (its timeout_seconds, in the worker's MCP "
                                 "servers settings)") from None
        if self.session is None:
            if isinstance(self.failure, UserError):
                raise self.failure
            mcp_error = _mcp_error_in(self.failure) if self.failure is not None else None
            if mcp_error is not None and not _is_connection_closed(mcp_error):
                raise mcp_error
            raise await self.unavailable("before it answered")

    def lost(self, exc: BaseException) -> bool:
        """Whether an error of a request is the connection's end (the server
        exited or went away), not the server's answer; the session is then retired."""
        if _is_connection_closed(exc) or self.ended:
            self.retire()
            return True
        return False

    async def unavailable(self, when: str) -> McpUnavailable:
        """The server is gone: why, in one sentence (a stdio server's exit
        code and the last lines of its stderr)."""
        self.retire()
        where = f"MCP server {self.name!r} ({self.server.transport})"
        if self.stderr is not None:
            # The guard reports the exit code as soon as the server exits.
            for _ in range(100):
                if self.stderr.exit_code is not None or self.stderr.ended.is_set():
                    break
                await asyncio.sleep(0.02)
            if self.stderr.exit_code is not None:
                return McpUnavailable(f"{where} exited with code {self.stderr.exit_code} {when}; "
                                      f"{self.stderr.describe()}")
            if self.failure is not None and not _is_connection_closed(self.failure):
                return McpUnavailable(f"{where} cannot be started: {_describe(self.failure)}")
            return McpUnavailable(f"{where} closed the connection {when}; {self.stderr.describe()}")
        if self.failure is not None:
            return McpUnavailable(f"{where} is unreachable: {_describe(self.failure)}")
        return McpUnavailable(f"{where} closed the connection {when}")

    async def _hold(self) -> None:
        from mcp.client.session import ClientSession

        try:
            async with _transport(self.server, self.stderr) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                self.session = session
                self._ready.set()
                await self._idle()
        except BaseException as exc:  # noqa: BLE001 - kept, and told to the calls waiting for the session
            self.failure = exc
            if not isinstance(exc, Exception):
                raise
        finally:
            self.ended = True
            self._ready.set()
            if self.stderr is not None:
                self.stderr.close_writer()

    async def _idle(self) -> None:
        """Until told to close, or unused for ``idle_timeout_seconds``."""
        import anyio

        while not self._stop:
            self._wake.clear()
            # Kept for no time (0): the call that opened it closes it (touch).
            idle = self.server.idle_timeout_seconds if self.users == 0 else None
            idle = idle or None
            with anyio.move_on_after(idle):
                await self._wake.wait()
                continue
            if self.users == 0:
                return


@asynccontextmanager
async def _transport(server: McpServer, stderr: _StderrTail | None) -> AsyncIterator[Any]:
    if server.command:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        assert stderr is not None
        command = expand(server.command)
        env = {k: expand(v) for k, v in server.env.items()}
        path = {**os.environ, **env}.get("PATH")
        if shutil.which(command, path=path) is None:
            stderr.close_writer()
            raise UserError(f"the command {command!r} is not found on the worker's PATH; install it there or give "
                            "its full path")
        # Started through the guard, so the server dies with the worker.
        params = StdioServerParameters(
            command=sys.executable, args=["-I", "-S", str(GUARD), str(os.getpid()), command,
                                          *[expand(a) for a in server.args]],
            env=env or None, cwd=server.cwd)
        try:
            async with stdio_client(params, errlog=stderr.writer) as streams:
                stderr.close_writer()
                yield streams
        finally:
            stderr.close_writer()
    else:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        headers = {k: expand(v) for k, v in server.headers.items()}
        # Connecting is bounded by timeout_seconds; a call by its tool's timeout (no read limit here).
        timeout = httpx2.Timeout(server.timeout_seconds, read=None)
        async with httpx2.AsyncClient(headers=headers, timeout=timeout) as http, \
                streamable_http_client(expand(server.url or ""), http_client=http) as streams:
            yield streams[0], streams[1]


def _is_connection_closed(exc: BaseException) -> bool:
    from mcp.shared.exceptions import MCPError
    from mcp.types import CONNECTION_CLOSED

    found = _mcp_error_in(exc)
    return isinstance(found, MCPError) and found.code == CONNECTION_CLOSED


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
