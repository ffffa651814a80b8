"""A real uvicorn server of ``create_app`` on 127.0.0.1 (a free port), in
the test's event loop, for the AG-UI tests; and a reader of its SSE frames."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import uvicorn

from agentloop.client.agent_client import AgentClient
from agentloop.server import ServerSettings, create_app
from tests.helpers.polling import eventually


@contextlib.asynccontextmanager
async def serving(client: AgentClient, settings: ServerSettings) -> AsyncIterator[str]:
    """Serve the app until the block ends; its base URL (``http://127.0.0.1:PORT``)."""
    server = uvicorn.Server(uvicorn.Config(create_app(client, settings), host="127.0.0.1", port=0,
                                           log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve())
    try:
        await eventually(lambda: server.started or task.done(), "the server to start")
        if task.done():
            task.result()  # raises what stopped it
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str | None, dict[str, Any]]]:
    """``(id, data)`` of each SSE event of a streaming response (comments skipped)."""
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
