"""Runs a stdio MCP server so that it dies with the worker that started it.

``python -I -S mcp_guard.py WORKER_PID COMMAND [ARG...]``, with the server's
stdin, stdout and stderr. The guard asks Linux to signal it when the worker
dies (``PR_SET_PDEATHSIG``), starts the server as its child, in its own
process group (the worker's MCP client starts the guard in a new session),
and waits. When the worker dies, or when the guard is told to stop, it kills
the whole group: the server and whatever the server started. When the server
exits, the guard writes one line to stderr (:data:`EXIT_LINE` and the exit
code), which the worker reads to report a crash, and exits with the same code.

Standard library only, started with ``-I -S``: a few milliseconds per server.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

#: The guard's last line on stderr: this, then the server's exit code.
EXIT_LINE = "agentloop-mcp-guard: the server exited with code"

_PR_SET_PDEATHSIG = 1


def _kill_group(signum: int = 0, frame: object = None) -> None:
    os.killpg(0, signal.SIGKILL)  # the server, its children, and this guard


def _die_with(parent: int) -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGUSR1, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the worker died before the request took effect
        _kill_group()


def main(argv: list[str]) -> int:
    parent, command = int(argv[0]), argv[1:]
    for signum in (signal.SIGUSR1, signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, _kill_group)
    _die_with(parent)
    child = os.fork()
    if child == 0:
        for signum in (signal.SIGUSR1, signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(signum, signal.SIG_DFL)
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            sys.stderr.write(f"cannot start {command[0]}: {exc.strerror or exc}\n")
            sys.stderr.flush()
        os._exit(127)
    _, status = os.waitpid(child, 0)
    code = os.waitstatus_to_exitcode(status)
    sys.stderr.write(f"{EXIT_LINE} {code}\n")
    sys.stderr.flush()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
