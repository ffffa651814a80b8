"""Finding a test's processes from the host, by a unique argument.

A sandboxed command runs in its own PID namespace, so ``$!`` and ``$$`` there
are not the host's pids. Tests start ``sleep`` with an argument no other
process has (:func:`unique_sleep`) and look for it in every ``/proc/*/cmdline``.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from tests.helpers.polling import eventually


def unique_sleep(seconds: int = 301) -> str:
    """A ``sleep`` argument no other process has, e.g. ``301.000482913305``."""
    return f"{seconds}.{uuid.uuid4().int % 10**12:012d}"


def processes_with_argument(argument: str) -> list[int]:
    """Pids of live (not zombie) processes with ``argument`` as one of their arguments."""
    wanted = argument.encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            cmdline = Path(entry.path, "cmdline").read_bytes()
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        if wanted in cmdline.split(b"\0") and stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
            found.append(int(entry.name))
    return found


async def wait_until_gone(argument: str, timeout: float = 10.0) -> list[int]:
    """Wait until no process has ``argument``; returns the survivors (empty when all went)."""
    try:
        await eventually(lambda: not processes_with_argument(argument), f"no process with {argument!r}", timeout)
    except AssertionError:
        return processes_with_argument(argument)
    return []


async def wait_until_running(argument: str, timeout: float = 30.0) -> list[int]:
    """Wait until a process has ``argument``; returns the pids."""
    return await eventually(lambda: processes_with_argument(argument), f"a process with argument {argument!r}", timeout)


def process_gone(pid: int) -> bool:
    """The process has exited (a zombie awaiting its reaper counts as exited)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    # The state follows the parenthesised command name, which may hold spaces.
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


async def wait_until_exited(pid: int, what: str = "the process to exit", timeout: float = 30.0) -> None:
    """Wait until process ``pid`` has exited."""
    await eventually(lambda: process_gone(pid), f"{what} (pid {pid})", timeout)


async def wait_for_pid(pid_file: Path) -> int:
    """The pid a test's process wrote to ``pid_file``, once it has."""
    return int(await eventually(lambda: pid_file.exists() and pid_file.read_text().strip(), f"a pid in {pid_file}"))
