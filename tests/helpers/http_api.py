"""``agentloop serve``'s app on a real uvicorn server on 127.0.0.1 (in the
test's event loop, next to its in-process worker), and a Server-Sent Events
reader over httpx."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn

from agentloop import AgentClient
from agentloop.server import ServerSettings, create_app


@dataclass
class Served:
    """A running app: its base URL, the app, and an httpx client of it."""

    url: str
    app: Any
    http: httpx.AsyncClient

    @property
    def state(self) -> Any:
        """The app's ServerState (its hub, settings)."""
        return self.app.state.agentloop


@contextlib.asynccontextmanager
async def serve(agent_client: AgentClient, settings: ServerSettings | None = None,
                headers: dict[str, str] | None = None) -> AsyncIterator[Served]:
    """Serve ``create_app(agent_client, settings)`` with uvicorn on a free port."""
    app = create_app(agent_client, settings or ServerSettings())
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    url = f"http://127.0.0.1:{port}"
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=50)
    async with httpx.AsyncClient(base_url=url, headers=headers or {}, timeout=60, limits=limits) as http:
        try:
            yield Served(url, app, http)
        finally:
            server.should_exit = True
            await task
            sock.close()


@dataclass
class Sse:
    """What an SSE stream sent: its events (``id``, parsed ``data``) in
    order, its comment lines, and whether the server ended it."""

    events: list[tuple[int | None, Any]] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    retry: int | None = None
    closed_by_server: bool = False

    @property
    def ids(self) -> list[int | None]:
        return [i for i, _ in self.events]

    @property
    def types(self) -> list[str]:
        return [d.get("type", "") for _, d in self.events]


async def read_sse(source: httpx.Response | AsyncIterator[str], *, stop_after: int | None = None,
                   until: Callable[[Any], bool] | None = None, until_comment: bool = False) -> Sse:
    """Parse ``response``'s event stream until the server closes it, or
    ``stop_after`` events were read, or an event's data satisfies ``until``,
    or (``until_comment``) a comment came. To read on where an earlier call
    stopped, pass the same ``response.aiter_lines()`` each time."""
    sse = Sse()
    lines = source.aiter_lines() if isinstance(source, httpx.Response) else source
    event_id: int | None = None
    data: list[str] = []
    read = 0
    async for line in lines:
        if line == "":
            if data:
                sse.events.append((event_id, json.loads("\n".join(data))))
                read += 1
                event_id, data = None, []
                if (stop_after is not None and read >= stop_after) or (until and until(sse.events[-1][1])):
                    return sse
            continue
        if line.startswith(":"):
            sse.comments.append(line[1:].strip())
            if until_comment:
                return sse
        elif line.startswith("id:"):
            event_id = int(line[3:].strip())
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif line.startswith("retry:"):
            sse.retry = int(line[6:].strip())
    sse.closed_by_server = True
    return sse


async def follow(http: httpx.AsyncClient, run_id: str, *, headers: dict[str, str] | None = None,
                 params: dict[str, Any] | None = None, stop_after: int | None = None,
                 until: Callable[[Any], bool] | None = None) -> Sse:
    """GET the run's events and read them (see :func:`read_sse`)."""
    async with http.stream("GET", f"/v1/runs/{run_id}/events", headers=headers, params=params) as response:
        assert response.status_code == 200, (response.status_code, await response.aread())
        assert response.headers["content-type"].startswith("text/event-stream")
        return await read_sse(response, stop_after=stop_after, until=until)


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str | None, dict[str, Any]]]:
    """``(id, data)`` of each SSE event of a streaming response, as they
    come (comments skipped); :func:`read_sse` collects a whole stream."""
    event_id, data = None, []
    async for line in response.aiter_lines():
        if line == "":
            if data:
                yield event_id, json.loads("\n".join(data))
            event_id, data = None, []
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif line.startswith("id:"):
            event_id = line[3:].strip()
