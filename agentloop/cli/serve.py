"""``agentloop dev`` and ``agentloop worker``: processes that keep serving."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from agentloop.cli.common import existing_workspace, say
from agentloop.cli.embedded import session
from agentloop.workers.config import TemporalConfig
from agentloop.shared.errors import UserError


async def cmd_dev(args: argparse.Namespace) -> int:
    config = TemporalConfig.from_env()
    config.imports += args.imports
    if config.address:
        raise UserError(f"{config.source} names a Temporal server ({config.address}), but `agentloop dev` starts "
                        "its own: unset it, or run `agentloop worker` against that server")
    data_dir = Path(args.data_dir) if args.data_dir else None
    role = args.role or config.role
    async with session(
        config, with_worker=True, workspace=existing_workspace(args.workspace), ui=not args.headless,
        port=args.port, ui_port=args.ui_port, data_dir=data_dir, role=role, command="dev",
    ) as s:
        from agentloop.activities.sandbox import describe
        from agentloop.workers.worker import tool_task_queue

        print(f"Temporal dev server: {s.config.address} (namespace {s.config.namespace})")
        if s.ui_url:
            print(f"Temporal UI:         {s.ui_url}")
        queues = {"all": f"{s.config.task_queue!r} and {tool_task_queue(s.config.task_queue)!r}",
                  "models": f"{s.config.task_queue!r} (start a tools worker: agentloop worker --role tools)",
                  "tools": f"{tool_task_queue(s.config.task_queue)!r}"}[role]
        print(f"Worker ({role}) polling task queue {queues}. Ctrl-C stops both.")
        if role != "models":
            print(describe())
        print(f"\n  export TEMPORAL_ADDRESS={s.config.address}", flush=True)
        print("\nRuns waiting for you (from another terminal):  agentloop list --status awaiting_approval",
              flush=True)
        try:
            await asyncio.Event().wait()  # until Ctrl-C, SIGTERM or SIGHUP cancels the command
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            say("stopping the worker and the Temporal server")
    return 0


async def cmd_worker(args: argparse.Namespace) -> int:
    from agentloop.workers.worker import run_worker

    config = TemporalConfig.from_env()
    config.imports += args.imports
    if args.role:
        config.role = args.role
    await run_worker(config, workspace=existing_workspace(args.workspace))
    return 0
