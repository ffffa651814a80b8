"""The worker process: registration, configuration from the environment,
graceful shutdown."""

from __future__ import annotations

import asyncio
import importlib
import logging
import signal
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from activities.agent_activities import AgentActivities
from activities.builtin_tools import register_builtin_tools
from activities.models import ModelResolver
from agentloop.config import TemporalConfig
from agentloop.errors import UserError
from agentloop.search_attributes import SEARCH_ATTRIBUTES, create_commands
from agentloop.tools import ToolRegistry, default_registry
from workflows.agent_run import AgentRunWorkflow

log = logging.getLogger("agentloop.worker")


async def connect(address: str, namespace: str = "default") -> Client:
    """A Temporal client with the pydantic data converter (use it on both sides)."""
    return await Client.connect(address, namespace=namespace, data_converter=pydantic_data_converter)


def import_modules(modules: list[str]) -> None:
    """Import user modules that register tools and scripted models.

    Raises:
        UserError: A module could not be imported.
    """
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise UserError(f"could not import {name!r} for the worker: {exc}") from exc


def build_worker(
    client: Client,
    *,
    task_queue: str,
    registry: ToolRegistry | None = None,
    models: ModelResolver | None = None,
    workspace: str | Path | None = None,
    graceful_shutdown_timeout: timedelta = timedelta(seconds=30),
    **worker_options: Any,
) -> Worker:
    """A worker that runs agent workflows and their activities.

    Args:
        client: Connected with :func:`connect` (pydantic data converter).
        task_queue: The queue runs are started on.
        registry: Tools; the default registry (with the built-in tools) if None.
        models: Model resolution; built-in providers from the environment if None.
        workspace: Default workspace for runs whose spec names none.
        graceful_shutdown_timeout: On shutdown, how long in-flight activities
            may finish before they are cancelled.
        worker_options: Passed on to :class:`temporalio.worker.Worker`.
    """
    if registry is None:
        registry = default_registry
        register_builtin_tools(registry)
    acts = AgentActivities(registry, models, workspace)
    # Cancellation reaches an activity on a heartbeat's response; the SDK's
    # default throttle (up to 0.8 x heartbeat timeout) would delay a cancelled
    # shell command by tens of seconds.
    worker_options.setdefault("max_heartbeat_throttle_interval", timedelta(seconds=1))
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[AgentRunWorkflow],
        activities=[acts.resolve_tools, acts.call_model, acts.execute_tool],
        graceful_shutdown_timeout=graceful_shutdown_timeout,
        **worker_options,
    )


async def missing_search_attributes(client: Client) -> list[str] | None:
    """Names of agentloop's search attributes the client's namespace lacks,
    or None when the server will not say (e.g. no operator permission)."""
    from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
    from temporalio.service import RPCError

    try:
        known = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=client.namespace)
        )
    except RPCError as err:
        log.warning("could not check search attributes (%s); runs fail to index if they are missing", err.message)
        return None
    names = set(known.custom_attributes) | set(known.system_attributes)
    return [name for name in SEARCH_ATTRIBUTES if name not in names]


async def run_worker(config: TemporalConfig, *, workspace: str | None = None) -> None:
    """Run a worker until SIGINT or SIGTERM, then shut down gracefully."""
    if not config.address:
        raise UserError("TEMPORAL_ADDRESS is not set: point the worker at a Temporal server")
    import_modules(config.imports)
    client = await connect(config.address, config.namespace)
    missing = await missing_search_attributes(client)
    if missing:
        raise UserError(
            f"namespace {config.namespace!r} lacks the search attributes {', '.join(missing)}, which "
            "every run keeps up to date; register them once, then start the worker again:\n  "
            + "\n  ".join(create_commands(config.namespace))
        )
    worker = build_worker(client, task_queue=config.task_queue, workspace=workspace)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    log.info("worker polling %s on %s (%s)", config.task_queue, config.address, config.namespace)
    async with worker:
        await stop.wait()
        log.info("shutting down: letting in-flight activities finish")
