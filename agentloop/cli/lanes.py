"""``agentloop lanes``: the provider lanes of runs on the task queue, with
the limits the Temporal server keeps for them, and setting those limits
(docs/many-tenants.md).

A lane is the task queue ``<queue>-llm-<lane>``; its limits are Temporal's
task-queue config, the same as ``temporal task-queue config get/set``
(``DescribeTaskQueue`` with ``report_config``, ``UpdateTaskQueueConfig``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
from typing import TYPE_CHECKING, Any

from agentloop.cli.common import table
from agentloop.cli.embedded import ops_client
from agentloop.shared.base.errors import UserError
from agentloop.shared.definition.lanes import KNOWN_LANES, check_lane, lane_queue, parse_lanes

if TYPE_CHECKING:
    from agentloop.client.agent_client import AgentClient

#: ``--rps``, ``--fairness-key-rps-limit-default`` and ``--fairness-key-weight KEY=...``
#: take this to remove a limit or weight (as ``temporal task-queue config set`` does).
NO_LIMIT = "default"


def known_lanes(extra: list[str] | None = None) -> list[str]:
    """The lanes to show: the built-in providers', ``AGENTLOOP_LANES``'s and ``extra``.

    Raises:
        UserError: A name that is not a lane name.
    """
    try:
        named = parse_lanes(os.environ.get("AGENTLOOP_LANES", ""))
        lanes = [*KNOWN_LANES, *named, *(check_lane(lane) for lane in extra or [])]
    except ValueError as exc:
        raise UserError(str(exc)) from None
    return list(dict.fromkeys(lanes))


def rate(text: str) -> float | None:
    """A rate in requests per second (0 or more), or :data:`NO_LIMIT` (None)."""
    if text.strip().lower() in (NO_LIMIT, "none"):
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a rate: give requests per second, e.g. 20 or 0.5, "
                                         f"or {NO_LIMIT!r} to remove the limit") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text}: a rate is 0 or more requests per second "
                                         f"({NO_LIMIT!r} removes the limit)")
    return value


def key_weight(text: str) -> tuple[str, float | None]:
    """``KEY=WEIGHT``: a fairness key (a tenant) and its weight, above 0, or
    None for ``KEY=default`` (back to the default weight)."""
    key, sep, weight = text.rpartition("=")
    if sep and key and weight.strip().lower() == NO_LIMIT:
        return key, None
    try:
        value = float(weight) if sep and key else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give KEY=WEIGHT with a weight above 0, e.g. acme=2 "
                                         f"(KEY={NO_LIMIT}: back to the default weight)")
    return key, value


async def cmd_lanes(args: argparse.Namespace) -> int:
    client = await ops_client()
    if args.lanes_command == "set":
        await set_lane(client, args)
        return 0
    return await show_lanes(client, args)


async def describe_lane(client: AgentClient, lane: str) -> dict[str, Any]:
    """A lane's queue, limits, fairness weights, backlog and pollers, as the server says."""
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

    queue = lane_queue(client.task_queue, lane)
    found = await client.temporal.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
        namespace=client.temporal.namespace, task_queue=TaskQueue(name=queue),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY, report_config=True, report_stats=True))
    config = found.config

    def limit(field: Any) -> float | None:
        return field.rate_limit.requests_per_second if field.HasField("rate_limit") else None

    return {
        "lane": lane, "queue": queue,
        "rps_limit": limit(config.queue_rate_limit) if config.HasField("queue_rate_limit") else None,
        "fairness_key_rps_limit_default": (limit(config.fairness_keys_rate_limit_default)
                                           if config.HasField("fairness_keys_rate_limit_default") else None),
        "fairness_key_weights": dict(sorted(config.fairness_weight_overrides.items())),
        "backlog": found.stats.approximate_backlog_count if found.HasField("stats") else 0,
        "pollers": len(found.pollers),
    }


async def show_lanes(client: AgentClient, args: argparse.Namespace) -> int:
    lanes = [await describe_lane(client, lane) for lane in known_lanes(args.shown_lanes)]
    if args.json:
        for lane in lanes:
            print(json.dumps(lane))
        return 0

    def shown(value: float | None) -> str:
        return "-" if value is None else f"{value:g}/s"

    rows = [["LANE", "QUEUE", "RPS LIMIT", "PER-KEY RPS", "KEY WEIGHTS", "BACKLOG", "POLLERS"]]
    rows += [[lane["lane"], lane["queue"], shown(lane["rps_limit"]), shown(lane["fairness_key_rps_limit_default"]),
              ",".join(f"{k}={w:g}" for k, w in lane["fairness_key_weights"].items()) or "-",
              str(lane["backlog"]), str(lane["pollers"])] for lane in lanes]
    print("\n".join(table(rows)))
    return 0


async def set_lane(client: AgentClient, args: argparse.Namespace) -> None:
    """Set what ``args`` asks on the lane's queue (``UpdateTaskQueueConfig``).

    Raises:
        UserError: An unknown lane, or nothing to set.
    """
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import RateLimit
    from temporalio.api.workflowservice.v1 import UpdateTaskQueueConfigRequest

    lanes = known_lanes(args.lane_extra)
    if args.lane not in lanes:
        raise UserError(f"there is no lane {args.lane!r}: the lanes are {', '.join(lanes)}; a lane of your own "
                        "is named in AGENTLOOP_LANES (as the models workers have it) or with --lane NAME")
    update = UpdateTaskQueueConfigRequest.RateLimitUpdate

    def limit(value: float | None) -> Any:
        return update(rate_limit=RateLimit(requests_per_second=value) if value is not None else None,
                      reason=args.reason or "")

    request = UpdateTaskQueueConfigRequest(
        namespace=client.temporal.namespace, identity=client.temporal.identity,
        task_queue=lane_queue(client.task_queue, args.lane), task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
        set_fairness_weight_overrides={key: w for key, w in args.weights if w is not None},
        unset_fairness_weight_overrides=[key for key, w in args.weights if w is None])
    if args.rps is not False:
        request.update_queue_rate_limit.CopyFrom(limit(args.rps))
    if args.key_rps is not False:
        request.update_fairness_key_rate_limit_default.CopyFrom(limit(args.key_rps))
    if args.rps is False and args.key_rps is False and not args.weights:
        raise UserError("nothing to set: give --rps, --fairness-key-rps-limit-default or --fairness-key-weight")
    await client.temporal.workflow_service.update_task_queue_config(request)
    print(f"lane {args.lane}: set on task queue {request.task_queue!r}")


def add_lanes_parser(sub: Any) -> None:
    """The ``lanes`` command and its ``set`` subcommand."""
    lanes = sub.add_parser(
        "lanes", help="the provider lanes: their rate limits, fairness weights and backlog",
        description="List the provider lanes of runs on the task queue (each a task queue <queue>-llm-<lane> "
                    "that models workers poll) with the limits the Temporal server paces them by, the fairness "
                    "keys' weights and per-key limits, the backlog and the pollers; `lanes set` sets them "
                    "(as `temporal task-queue config set` does).")
    lanes.add_argument("--lane", dest="shown_lanes", action="append", default=[], metavar="NAME",
                       help="show a lane of your own too (AGENTLOOP_LANES's are shown)")
    lanes.add_argument("--json", action="store_true", help="one JSON object per lane")
    actions = lanes.add_subparsers(dest="lanes_command")
    setting = actions.add_parser("set", help="set a lane's rate limit, per-key limit and key weights")
    setting.add_argument("lane", help="the lane: openai, anthropic, scripted or one of your own")
    setting.add_argument("--lane", dest="lane_extra", action="append", default=[], metavar="NAME",
                         help="a lane of your own that may be set (AGENTLOOP_LANES's may)")
    setting.add_argument("--rps", type=rate, default=False, metavar="N",
                         help=f"the lane's rate: N requests per second for the whole fleet ({NO_LIMIT!r}: none)")
    setting.add_argument("--fairness-key-rps-limit-default", dest="key_rps", type=rate, default=False,
                         metavar="N", help=f"each fairness key's (tenant's) rate within the lane ({NO_LIMIT!r}: none)")
    setting.add_argument("--fairness-key-weight", dest="weights", type=key_weight, action="append", default=[],
                         metavar="KEY=W", help=f"a fairness key's (tenant's) weight, e.g. acme=2; KEY={NO_LIMIT} "
                                               "for the default weight (repeatable)")
    setting.add_argument("--reason", help="why, kept with the setting on the server")
