"""The Temporal workers :class:`~agentloop.workers.plugin.AgentLoopPlugin`
runs beside the user's: one on each provider lane (``<queue>-llm-<lane>``,
``call_model`` alone) for roles ``all`` and ``models``, and one on the tools
queue for role ``all``. They take the user's worker's activity options,
start with it and stop after it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

import temporalio.client
from temporalio.worker import Worker

from agentloop.shared.base.errors import UserError
from agentloop.shared.definition.lanes import check_lane, lane_queue
from agentloop.workers.plugin_config import tool_task_queue
from agentloop.workers.registrations import tools_queue_activities

if TYPE_CHECKING:
    from agentloop.activities.agent_activities import AgentActivities

log = logging.getLogger("agentloop.workers.plugin")

#: Options of the user's Worker that its role ``all`` sibling on the tools
#: queue takes over (the rest are about workflows, or are the SDK's defaults).
TOOLS_WORKER_OPTIONS = (
    "interceptors",
    "identity",
    "max_concurrent_activities",
    "max_concurrent_activity_task_polls",
    "max_activities_per_second",
    "max_task_queue_activities_per_second",
    "max_heartbeat_throttle_interval",
    "default_heartbeat_throttle_interval",
    "graceful_shutdown_timeout",
    "debug_mode",
    "on_fatal_error",
    "activity_task_poller_behavior",
    # The same Worker Deployment Version: a pinned run's tool calls go to its own version's tools.
    "deployment_config",
)


def check_lanes(lanes: Sequence[str]) -> list[str]:
    """``lanes``, each checked.

    Raises:
        UserError: One is not a lane name.
    """
    try:
        return [check_lane(lane) for lane in lanes]
    except ValueError as exc:
        raise UserError(f"AgentLoopPlugin(lanes=...): {exc}") from None


def sibling_workers(worker: Worker, acts: AgentActivities, *, role: str, lanes: Sequence[str]) -> list[Worker]:
    """The Temporal workers beside ``worker``: its lanes' and (role ``all``)
    its tools queue's, with the worker's activity options and a client
    without plugins (the user's other plugins configure the user's worker)."""
    active = worker.config(active_config=True)
    client_config = worker.client.config(active_config=True)  # a copy
    client_config["plugins"] = []
    client = temporalio.client.Client(**client_config)
    options = {key: active[key] for key in TOOLS_WORKER_OPTIONS if key in active}  # type: ignore[literal-required]
    siblings = [Worker(client, task_queue=lane_queue(worker.task_queue, lane), activities=[acts.call_model],
                       **options) for lane in lanes]
    if role == "all":
        siblings.append(Worker(
            client,
            task_queue=tool_task_queue(worker.task_queue),
            activities=tools_queue_activities(acts),
            **options,
        ))
    return siblings


async def run_with(worker: Worker, next: Callable[[Worker], Awaitable[None]], siblings: list[Worker]) -> None:
    """Run ``worker`` (through the rest of its plugin chain) and its
    ``siblings`` together: they stop once ``worker`` has stopped, and a
    fatal error of one stops ``worker`` too and is raised."""
    runs = [asyncio.create_task(s.run(), name=f"agentloop worker {s.task_queue}") for s in siblings]
    stopping: list[asyncio.Task[None]] = []

    def sibling_ended(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None and worker.is_running:
            log.error("the worker %s failed; stopping the worker on %s", task.get_name(), worker.task_queue)
            stopping.append(asyncio.ensure_future(worker.shutdown()))

    for run in runs:
        run.add_done_callback(sibling_ended)
    try:
        await next(worker)
    finally:
        await asyncio.gather(*(s.shutdown() for s in siblings), return_exceptions=True)
        await asyncio.gather(*runs, *stopping, return_exceptions=True)
    for run in runs:
        if not run.cancelled() and run.exception() is not None:
            raise run.exception()  # type: ignore[misc]
