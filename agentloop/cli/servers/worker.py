"""``agentloop worker``: a worker on a Temporal server, until stopped."""

from __future__ import annotations

import argparse
from typing import Any

from agentloop.cli.common import existing_workspace
from agentloop.cli.options import imports, workspace
from agentloop.workers.config import WORKER_ROLES, TemporalConfig


async def cmd_worker(args: argparse.Namespace) -> int:
    from agentloop.workers.worker import run_worker

    config = TemporalConfig.from_env()
    config.imports += args.imports
    if args.role:
        config.role = args.role
    if args.deployment_name:
        config.deployment_name = args.deployment_name.strip()
    if args.build_id:
        config.build_id = args.build_id.strip()
    lanes = None
    if args.lanes is not None:
        from agentloop.workers.config import lanes_from_env

        lanes = lanes_from_env({"AGENTLOOP_LANES": args.lanes})
    await run_worker(config, workspace=existing_workspace(args.workspace), metrics_port=args.metrics_port,
                     lanes=lanes)
    return 0


def add_worker_parser(sub: Any) -> None:
    """The ``worker`` command and its options."""
    worker = sub.add_parser(
        "worker", help="run a worker against $TEMPORAL_ADDRESS",
        description="Run a worker. Role models polls the task queue (workflows and LLM calls: give it the "
                    "provider keys); role tools polls <task queue>-tools (tool calls: it refuses to start "
                    "with provider keys in its environment); role all does both in one process.",
    )
    workspace(worker, "default workspace for runs that name none")
    worker.add_argument("--metrics-port", type=int, metavar="PORT",
                        help="serve Prometheus metrics (agentloop's and Temporal's) on /metrics of this port "
                             "(default: $AGENTLOOP_METRICS_PORT, else none)")
    worker.add_argument("--role", choices=WORKER_ROLES,
                        help="models, tools or all (default: $AGENTLOOP_WORKER_ROLE, else all)")
    worker.add_argument("--deployment-name", metavar="NAME",
                        help="register as a version of this Temporal Worker Deployment (default: "
                             "$AGENTLOOP_DEPLOYMENT_NAME; with neither it and a build id, an unversioned worker)")
    worker.add_argument("--build-id", metavar="ID",
                        help="this code's version within the deployment, e.g. a git commit (default: "
                             "$AGENTLOOP_BUILD_ID); runs stay on the version they started on (docs/deploying.md)")
    worker.add_argument("--lanes", metavar="LANE,...",
                        help="the provider lanes whose model calls a models (or all) worker takes, each on "
                             "<task queue>-llm-<lane>: 'all' for openai, anthropic and scripted, 'all,NAME' for "
                             "those and a lane of your own, 'none' for none (default: $AGENTLOOP_LANES, else all)")
    imports(worker)
