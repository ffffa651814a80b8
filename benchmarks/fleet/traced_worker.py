"""``agentloop worker`` for the fleet benchmark, each provider request
stamped with when the Temporal server dispatched its activity attempt.

Adds an ``x-dispatched-at`` header (the attempt's ``started_time``, Unix
seconds) to every HTTP request an activity sends through ``httpx2`` (the
OpenAI SDK's transport), so the mock provider keeps both when the server
handed a model call out and when it arrived.

``FLEET_WORKER_OPTIONS`` (JSON) gives every ``temporalio.worker.Worker``
the process builds more options, for experiments: e.g.
``{"max_cached_workflows": 0}`` (no sticky queues) or
``{"sticky_queue_schedule_to_start_timeout": 1.0}`` (seconds).

    python -m benchmarks.fleet.traced_worker worker [agentloop worker options]
"""

from __future__ import annotations

import json
import os
from datetime import timedelta
from typing import Any

import httpx2 as httpx
from temporalio import activity

_send = httpx.AsyncClient.send


async def _stamped_send(self: httpx.AsyncClient, request: httpx.Request, **kwargs: Any) -> httpx.Response:
    if activity.in_activity():
        request.headers["x-dispatched-at"] = repr(activity.info().started_time.timestamp())
    return await _send(self, request, **kwargs)


def _with_options(options: dict[str, Any]) -> None:
    from temporalio.worker import Worker

    init = Worker.__init__
    if "sticky_queue_schedule_to_start_timeout" in options:
        options["sticky_queue_schedule_to_start_timeout"] = timedelta(
            seconds=options["sticky_queue_schedule_to_start_timeout"])

    def patched(self: Worker, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **{**kwargs, **options})

    Worker.__init__ = patched  # type: ignore[method-assign]


if __name__ == "__main__":
    httpx.AsyncClient.send = _stamped_send  # type: ignore[method-assign]
    if os.environ.get("FLEET_WORKER_OPTIONS"):
        _with_options(json.loads(os.environ["FLEET_WORKER_OPTIONS"]))
    from agentloop.cli import entrypoint

    entrypoint()
