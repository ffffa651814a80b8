"""One MCP server: its settings (:class:`McpServer`, with ``${VAR}`` expanded from
the environment), and its session, held open across calls: the transport (a guarded
stdio child or HTTP), the tail of its stderr for error messages, and how a broken
connection is told from an error the server reported.
"""

from __future__ import annotations

import asyncio
import contextlib
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

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentloop.activities.tool_sources.mcp_guard import EXIT_LINE
from agentloop.shared.base.errors import UserError

#: How many of a stdio server's last stderr lines a failure quotes.
STDERR_LINES = 8


#: The script a stdio server is started through (it dies with the worker).
GUARD = Path(__file__).with_name("mcp_guard.py")


SERVER_NAME = re.compile(r"^[a-zA-Z0-9-]+(?:_[a-zA-Z0-9-]+)*$")


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
    try:
        return string.Template(value).substitute(os.environ if environ is None else environ)
    except KeyError as exc:
        raise UserError(f"environment variable {exc.args[0]} is not set on the worker") from None
    except ValueError:
        return value


class McpUnavailable(Exception):
    """The server could not be reached, or broke the connection."""


class _StderrTail:
    """A stdio server's stderr: forwarded to the worker's stderr, its last
    lines kept, and the exit code its guard reports (activities/tool_sources/mcp_guard.py)."""

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


class HeldSession:
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
                return McpUnavailable(f"{where} cannot be started: {describe_failure(self.failure)}")
            return McpUnavailable(f"{where} closed the connection {when}; {self.stderr.describe()}")
        if self.failure is not None:
            return McpUnavailable(f"{where} is unreachable: {describe_failure(self.failure)}")
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


def describe_failure(exc: BaseException) -> str:
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
