"""The ``agentloop`` command.

``agentloop run``, ``agentloop dev`` and ``agentloop worker`` run agents;
``agentloop chat`` is a conversation with one, on a thread. With no
``TEMPORAL_ADDRESS`` in the environment, ``run``, ``chat`` and ``dev`` start
the embedded Temporal dev server (SQLite in ``$AGENTLOOP_HOME``, default
``~/.agentloop``) and a worker in this process, and write the server's
address to ``$AGENTLOOP_HOME/server.address`` while it runs.

The ops commands (``approve``, ``submit``, ``stop``, ``cancel``, ``list``,
``show``, ``watch``) talk to runs on ``TEMPORAL_ADDRESS``, or else on the
embedded server another ``agentloop`` command is running; when none runs,
the read commands ``list``, ``show`` and ``watch`` (and ``export``) start the embedded server and a worker
for as long as they read, the others never start anything. Exit codes: 0 done, 1 the run refused the request or was
not found, 2 usage or configuration error; ``run`` and ``watch`` exit 0 when
the run completed or was stopped and 1 when it failed or was cancelled;
128 + the signal's number when Ctrl-C (130), SIGTERM (143) or SIGHUP (129)
ended the command, after it stopped what it had started (``run`` cancels its
run first).

Modules: :mod:`~agentloop.cli.parser` (the command line; each command module
adds its own subparser, with the shared options of :mod:`~agentloop.cli.options`);
the run path in :mod:`agentloop.cli.runs`: :mod:`~agentloop.cli.runs.run`
(``run``, ``watch``), :mod:`~agentloop.cli.runs.follow` (following a run and
asking its approvals), :mod:`~agentloop.cli.runs.render` and
:mod:`~agentloop.cli.runs.describe` (showing events), :mod:`~agentloop.cli.runs.chat`
(``chat``), :mod:`~agentloop.cli.runs.threads` (``send``, ``steer``); the
commands that keep serving in :mod:`agentloop.cli.servers` (``dev``, ``worker``,
``serve``, ``codec-server``, one module each); :mod:`~agentloop.cli.control`
(``approve``, ``submit``, ``stop``, ``cancel``), :mod:`~agentloop.cli.listing`
(``list``, ``show``), :mod:`~agentloop.cli.snapshots` (``export``, ``start``,
``fork``), :mod:`~agentloop.cli.schedules`, :mod:`~agentloop.cli.replay`,
:mod:`~agentloop.cli.embedded` (the embedded server and finding a server),
:mod:`~agentloop.cli.common`.

``run`` and ``watch`` render the run's event stream (``agentloop.cli.runs.render``):
a live view on a terminal, ``[step N] ...`` lines otherwise, or with
``--jsonl`` one event per line and nothing else on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable

from agentloop.cli.common import CommandFailed, say
from agentloop.cli.control import cmd_approve, cmd_cancel, cmd_stop, cmd_submit
from agentloop.cli.diff import cmd_diff
from agentloop.cli.embedded import describe_rpc_error
from agentloop.cli.evals.command import cmd_eval
from agentloop.cli.lanes import cmd_lanes
from agentloop.cli.listing import cmd_list, cmd_show
from agentloop.cli.parser import build_parser
from agentloop.cli.quotas import cmd_quota
from agentloop.cli.replay import cmd_replay
from agentloop.cli.runs.chat import cmd_chat
from agentloop.cli.runs.run import cmd_run, cmd_watch
from agentloop.cli.runs.threads import cmd_send, cmd_steer
from agentloop.cli.schedules import cmd_schedule
from agentloop.cli.servers.codec_server import cmd_codec_server
from agentloop.cli.servers.dev import cmd_dev
from agentloop.cli.servers.mcp_serve import cmd_mcp_serve
from agentloop.cli.servers.serve import cmd_serve
from agentloop.cli.servers.worker import cmd_worker
from agentloop.cli.snapshots import cmd_export, cmd_fork, cmd_start
from agentloop.shared.base.errors import DecisionRejected, UserError

__all__ = ["CommandFailed", "build_parser", "entrypoint", "main"]


#: Signals that end a command the way Ctrl-C does: what it started is stopped first.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def run_command(command: Callable[[argparse.Namespace], Awaitable[int]], args: argparse.Namespace) -> int:
    """Run a command's coroutine; Ctrl-C, SIGTERM and SIGHUP cancel it, so
    its cleanup (cancel the run, stop the worker and the embedded server)
    runs before the process exits with 128 + the signal's number. A second
    signal cancels again: it cuts a wait in the cleanup short, not the cleanup."""
    received: list[int] = []

    async def cancellable() -> int:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def on_signal(signum: int) -> None:
            received.append(signum)
            task.cancel()

        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, on_signal, sig)
        try:
            return await command(args)
        finally:
            for sig in STOP_SIGNALS:
                loop.remove_signal_handler(sig)

    try:
        return asyncio.run(cancellable())
    except asyncio.CancelledError:
        if received:
            return 128 + received[0]
        raise


def main(argv: list[str] | None = None) -> int:
    from temporalio.service import RPCError

    args = build_parser().parse_args(argv)
    level = os.environ.get("AGENTLOOP_LOG_LEVEL")
    logging.basicConfig(level=level or "WARNING", format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not level and args.command in ("run", "chat"):
        # A failed LLM or tool attempt is reported in the run's own output; the
        # SDK's warning with a traceback would only repeat it.
        logging.getLogger("temporalio.activity").setLevel(logging.ERROR)
    # Run from a checkout, `agentloop --import tests.x` should find the checkout's modules.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    command = {
        "run": cmd_run, "dev": cmd_dev, "worker": cmd_worker, "approve": cmd_approve, "submit": cmd_submit,
        "stop": cmd_stop, "cancel": cmd_cancel, "list": cmd_list, "replay": cmd_replay, "show": cmd_show,
        "watch": cmd_watch,
        "export": cmd_export, "start": cmd_start, "fork": cmd_fork,
        "chat": cmd_chat, "send": cmd_send, "steer": cmd_steer, "serve": cmd_serve, "schedule": cmd_schedule,
        "codec-server": cmd_codec_server, "eval": cmd_eval,
        "diff": cmd_diff, "lanes": cmd_lanes, "quota": cmd_quota,
        "mcp-serve": cmd_mcp_serve,
    }[args.command]
    try:
        return run_command(command, args)
    except UserError as exc:
        say(f"agentloop: {exc}")
        return 2
    except (DecisionRejected, CommandFailed) as exc:
        say(f"agentloop: {exc}")
        return 1
    except RPCError as err:
        say(f"agentloop: {describe_rpc_error(err)}")
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`agentloop watch RUN --jsonl | head`): stop
        # quietly, and let nothing write to the closed pipe again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def entrypoint() -> None:
    """The console script: :func:`main`, then exit without interpreter teardown.

    Temporal's native bridge keeps threads that can touch the GIL while
    CPython finalizes, which aborts a process that had finished cleanly
    (temporalio/sdk-python#300). By here every run, worker and server this
    command started has been shut down, so output is flushed and the process
    exits at once with the command's code.
    """
    code = main()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed terminal (SIGHUP) or pipe
            pass
    os._exit(code)


if __name__ == "__main__":
    entrypoint()
