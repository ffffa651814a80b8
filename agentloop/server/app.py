"""The ASGI app of ``agentloop serve``: the JSON API under ``/v1``, AG-UI
streams, and the web console at ``/``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from agentloop.server import console, diff, evals, problems, quotas, runs, threads
from agentloop.server.a2a import routes as a2a
from agentloop.server.access.doors import DoorGuard, Doors, doors_for
from agentloop.server.agui import routes as agui
from agentloop.server.deps import ServerState
from agentloop.server.mcp.door import MCP_PATH, McpDoor
from agentloop.server.settings import ServerSettings
from agentloop.server.streams.hub import RunHub
from agentloop.server.streams.live_door import live_router
from agentloop.server.streams.live_local import HubSink
from agentloop.server.streams.sse import StreamSlots
from agentloop.shared.live.sinks import in_process

if TYPE_CHECKING:
    from agentloop.client.agent_client import AgentClient

API_VERSION = "v1"


def create_app(client: AgentClient, settings: ServerSettings | None = None) -> FastAPI:
    """The app, serving runs of ``client``'s Temporal namespace and task queue.

    Args:
        client: Starts and reads runs.
        settings: Tokens, CORS origins, registered agents; from the
            environment when None (:meth:`ServerSettings.from_env`).
    """
    settings = settings or ServerSettings.from_env()
    hub = RunHub(client, poll_interval=settings.poll_interval, wait=settings.wait_for_events,
                 live=settings.live_token is not None or settings.live_in_process)
    mcp = McpDoor(client, settings, lambda: server_doors(settings))

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with mcp.running():
            with in_process(HubSink(hub, asyncio.get_running_loop())) if settings.live_in_process \
                    else contextlib.nullcontext():
                yield
        await hub.close()

    app = FastAPI(
        title="agentloop", version=API_VERSION, lifespan=lifespan,
        openapi_url=f"/{API_VERSION}/openapi.json", docs_url=None, redoc_url=None,
        description="Start, follow, approve and steer durable agent runs. Errors are application/problem+json.",
    )
    app.state.agentloop = ServerState(client=client, settings=settings, hub=hub,
                                      streams=StreamSlots(settings.max_streams, settings.max_streams_per_caller))
    problems.install(app)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware, allow_origins=settings.cors_origins, allow_methods=["GET", "POST", "OPTIONS"],
            allow_headers=["Authorization", "Content-Type", "Last-Event-ID"],
            expose_headers=["Location", "Content-Location", "X-Agentloop-Run-Id"],
        )
    app.include_router(runs.router, prefix=f"/{API_VERSION}")
    app.include_router(threads.router, prefix=f"/{API_VERSION}")
    app.include_router(evals.router, prefix=f"/{API_VERSION}")
    app.include_router(diff.router, prefix=f"/{API_VERSION}")
    app.include_router(agui.router, prefix=f"/{API_VERSION}")
    app.include_router(quotas.router, prefix=f"/{API_VERSION}")
    app.include_router(a2a.router)
    app.include_router(live_router(hub, settings.live_token))
    app.include_router(console.router)
    app.add_route(MCP_PATH, mcp, include_in_schema=False)  # type: ignore[arg-type]  # an ASGI app; docs/agent-protocols.md
    # Outermost, so that CORS preflights too answer only to allowed hosts.
    app.add_middleware(DoorGuard, doors=lambda: server_doors(settings))
    return app


def server_doors(settings: ServerSettings) -> Doors:
    """The host, origin, content-type and size checks of ``settings`` (read
    per request, so that a port bound after the app was made counts)."""
    return doors_for(tokens=bool(settings.tokens), allowed_hosts=settings.allowed_hosts,
                     cors_origins=settings.cors_origins, port=settings.port,
                     max_body_bytes=settings.max_body_bytes)
