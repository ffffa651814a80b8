"""``agentloop dev``: the embedded Temporal dev server with a worker, until stopped."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentloop.cli.common import existing_workspace, say
from agentloop.cli.embedded import session
from agentloop.cli.options import imports, port_number, workspace
from agentloop.shared.base.errors import UserError
from agentloop.shared.live.pairing import LIVE_FILE, pair_through
from agentloop.shared.live.sinks import live_off
from agentloop.workers.config import WORKER_ROLES, TemporalConfig, agentloop_home


async def cmd_dev(args: argparse.Namespace) -> int:
    config = TemporalConfig.from_env()
    config.imports += args.imports
    if config.address:
        raise UserError(f"{config.source} names a Temporal server ({config.address}), but `agentloop dev` starts "
                        "its own: unset it, or run `agentloop worker` against that server")
    data_dir = Path(args.data_dir) if args.data_dir else None
    role = args.role or config.role
    since = datetime.now(UTC)
    # An `agentloop serve` beside this dev writes where it takes live deltas here (docs/live-deltas.md).
    pairing = pair_through((data_dir or agentloop_home()) / LIVE_FILE) if not live_off() else contextlib.nullcontext()
    with pairing:
        return await _serve_dev(args, config, data_dir, role, since)


async def _serve_dev(args: argparse.Namespace, config: TemporalConfig, data_dir: Path | None, role: str,
                     since: datetime) -> int:
    async with session(
        config, with_worker=True, workspace=existing_workspace(args.workspace), ui=not args.headless,
        port=args.port, ui_port=args.ui_port, ui_codec_endpoint=args.ui_codec_endpoint, data_dir=data_dir,
        role=role, command="dev",
    ) as s:
        from agentloop.activities.shell_sandbox.sandbox import describe
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
        log_file = divert_activity_failures((data_dir or agentloop_home()) / DEV_LOG)
        if log_file is not None:
            print(f"Failed runs: one line each here; details in {log_file}", flush=True)
        reporter = asyncio.ensure_future(report_failed_runs(s.client, since))
        try:
            await asyncio.Event().wait()  # until Ctrl-C, SIGTERM or SIGHUP cancels the command
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            say("stopping the worker and the Temporal server")
        finally:
            reporter.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reporter
    return 0


#: The debug log of ``agentloop dev`` in its data directory: what failed attempts raised, with tracebacks.
DEV_LOG = "dev.log"

#: How often ``agentloop dev`` looks for runs that failed since the last look.
FAILED_RUNS_POLL_SECONDS = 1.0


def divert_activity_failures(log_file: Path) -> Path | None:
    """Send the Temporal SDK's activity log lines (a warning with a
    traceback per failed attempt) to ``log_file`` instead of the terminal,
    where :func:`report_failed_runs` says one line per failed run. Not when
    ``AGENTLOOP_LOG_LEVEL`` is set: then the terminal gets what was asked for."""
    if os.environ.get("AGENTLOOP_LOG_LEVEL"):
        return None
    handler = logging.FileHandler(log_file)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    activity_log = logging.getLogger("temporalio.activity")
    activity_log.addHandler(handler)
    activity_log.propagate = False
    return log_file


async def report_failed_runs(client: Any, since: datetime) -> None:
    """Say one line on stderr per run that fails while ``agentloop dev`` runs:
    its id and why (the run's own error)."""
    from temporalio.service import RPCError

    from agentloop.cli.runs.describe import short
    from agentloop.client.agent_client import AgentClient
    from agentloop.shared.runs.result import AgentRunFailed

    agents = AgentClient(client)
    seen: set[tuple[str, str]] = set()
    query = f'AgentStatus="failed" AND CloseTime >= "{since.isoformat().replace("+00:00", "Z")}"'
    while True:
        try:
            failed = [wf async for wf in client.list_workflows(query)]
        except RPCError:
            failed = []  # the server is busy or stopping: look again next time
        for wf in sorted(failed, key=lambda wf: wf.close_time or since):
            if (wf.id, wf.run_id) in seen:
                continue
            seen.add((wf.id, wf.run_id))
            try:
                await agents.get_handle(wf.id).result()
                why = f"run {wf.id} failed"
            except AgentRunFailed as exc:
                why = str(exc)
            except RPCError as exc:
                why = f"run {wf.id} failed ({exc.message})"
            say(short(why, 500))
        await asyncio.sleep(FAILED_RUNS_POLL_SECONDS)


def add_dev_parser(sub: Any) -> None:
    """The ``dev`` command and its options."""
    dev = sub.add_parser(
        "dev", help="keep a local Temporal server and a worker running",
        description="Keep the embedded Temporal server (SQLite in $AGENTLOOP_HOME) and a worker running until "
                    "Ctrl-C, with the Temporal web UI. Other agentloop commands in other terminals use it; it "
                    "prints the address to export as TEMPORAL_ADDRESS for other tools.",
    )
    dev.add_argument("--port", type=port_number, default=7233,
                     help="the server's gRPC port (default: 7233; 0: a free one, printed)")
    dev.add_argument("--ui-port", type=port_number, default=8233,
                     help="the web UI's port (default: 8233; 0: a free one)")
    dev.add_argument("--headless", action="store_true", help="no web UI")
    dev.add_argument("--ui-codec-endpoint", metavar="URL",
                     help="the codec endpoint the web UI decodes payloads with (an `agentloop codec-server`, e.g. "
                          "http://127.0.0.1:8081), for encrypted payloads")
    dev.add_argument("--data-dir", help="where the SQLite file lives (default: $AGENTLOOP_HOME)")
    workspace(dev, "default workspace for runs that name none")
    dev.add_argument("--role", choices=WORKER_ROLES, help="what its worker runs (default: "
                     "$AGENTLOOP_WORKER_ROLE, else all); see `agentloop worker --help`")
    imports(dev)
