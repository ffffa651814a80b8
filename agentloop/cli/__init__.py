"""The ``agentloop`` command.

``agentloop run``, ``agentloop dev`` and ``agentloop worker`` run agents.
With no ``TEMPORAL_ADDRESS`` in the environment, ``run`` and ``dev`` start
the embedded Temporal dev server (SQLite in ``$AGENTLOOP_HOME``, default
``~/.agentloop``) and a worker in this process, and write the server's
address to ``$AGENTLOOP_HOME/server.address`` while it runs.

The ops commands (``approve``, ``submit``, ``stop``, ``cancel``, ``list``,
``show``, ``watch``) talk to runs on ``TEMPORAL_ADDRESS``, or else on the
embedded server another ``agentloop`` command is running; they never start a
server or a worker. Exit codes: 0 done, 1 the run refused the request or was
not found, 2 usage or configuration error; ``run`` and ``watch`` exit 0 when
the run completed or was stopped and 1 when it failed or was cancelled.

``run`` and ``watch`` render the run's event stream (``agentloop.render``):
a live view on a terminal, ``[step N] ...`` lines otherwise, or with
``--jsonl`` one event per line and nothing else on stdout.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys

from agentloop.cli.common import CommandFailed
from agentloop.cli.ops import cmd_approve, cmd_cancel, cmd_list, cmd_show, cmd_stop, cmd_submit
from agentloop.cli.parser import build_parser
from agentloop.cli.run import cmd_run, cmd_watch
from agentloop.cli.serve import cmd_dev, cmd_worker
from agentloop.errors import DecisionRejected, UserError

__all__ = ["CommandFailed", "build_parser", "entrypoint", "main"]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    level = os.environ.get("AGENTLOOP_LOG_LEVEL")
    logging.basicConfig(level=level or "WARNING", format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not level and args.command == "run":
        # A failed LLM or tool attempt is reported in the run's own output; the
        # SDK's warning with a traceback would only repeat it.
        logging.getLogger("temporalio.activity").setLevel(logging.ERROR)
    # Run from a checkout, `agentloop --import tests.x` should find the checkout's modules.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    command = {
        "run": cmd_run, "dev": cmd_dev, "worker": cmd_worker, "approve": cmd_approve, "submit": cmd_submit,
        "stop": cmd_stop, "cancel": cmd_cancel, "list": cmd_list, "show": cmd_show, "watch": cmd_watch,
    }[args.command]
    try:
        return asyncio.run(command(args))
    except UserError as exc:
        print(f"agentloop: {exc}", file=sys.stderr)
        return 2
    except (DecisionRejected, CommandFailed) as exc:
        print(f"agentloop: {exc}", file=sys.stderr)
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
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    entrypoint()
