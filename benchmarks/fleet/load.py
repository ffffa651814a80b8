"""What the fleet benchmark and its bare baseline share: the load's
options, the lane's limit and B's weight on the server, and percentiles."""

from __future__ import annotations

import argparse
from collections.abc import Iterable

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import RateLimit
from temporalio.api.workflowservice.v1 import UpdateTaskQueueConfigRequest
from temporalio.client import Client


def add_load_arguments(p: argparse.ArgumentParser, what: str) -> None:
    """The burst's shape: ``what`` names the started things (runs, workflows)."""
    p.add_argument("--a", type=int, default=300, help=f"A's {what}, started at once (default 300)")
    p.add_argument("--b", type=int, default=20, help=f"B's {what} (default 20)")
    p.add_argument("--b-after", type=float, default=2.0, help="seconds before B starts (default 2)")
    p.add_argument("--priority", type=int, default=10, help=f"priority-1 {what} in A's backlog (default 10)")
    p.add_argument("--rate", type=float, default=20.0, help="the provider's requests a second (default 20)")
    p.add_argument("--service", type=float, default=0.05, help="seconds the provider takes to answer")
    p.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")


async def set_lane(client: Client, identity: str, lane: str, rps: float, b_weight: float,
                   queue: str, queue_types: Iterable[TaskQueueType.ValueType] = ()) -> None:
    """The lane's limit (``agentloop lanes set LANE --rps RPS``) and B's
    weight on it when not 1 (``--fairness-key-weight B=W``); B's weight also
    on ``queue``'s ``queue_types`` (``temporal task-queue config set
    --task-queue-type ...``)."""
    weights = {"B": b_weight} if b_weight != 1 else {}
    await client.workflow_service.update_task_queue_config(UpdateTaskQueueConfigRequest(
        namespace=client.namespace, identity=identity, task_queue=lane,
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY, set_fairness_weight_overrides=weights,
        update_queue_rate_limit=UpdateTaskQueueConfigRequest.RateLimitUpdate(
            rate_limit=RateLimit(requests_per_second=rps), reason="the provider's rate")))
    for kind in queue_types if weights else ():
        await client.workflow_service.update_task_queue_config(UpdateTaskQueueConfigRequest(
            namespace=client.namespace, identity=identity, task_queue=queue,
            task_queue_type=kind, set_fairness_weight_overrides=weights))


def pct(values: list[float], q: float) -> float:
    """The ``q``-th percentile of ``values`` (nearest rank; NaN for none)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]
