"""Sync tools run in a forked child process: values, errors, heartbeats and
metrics cross the boundary; timeouts and cancellation kill the child (no
server; a GIL-hogging tool in a run: tests/server/tools/test_tool_isolation.py)."""


from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agentloop import ToolContext
from agentloop.activities.builtin_tools import BUILTIN_TOOLS
from agentloop.shared.base.errors import ToolError, UserError
from agentloop.tools.isolation import IsolatedToolError
from agentloop.tools.registry import Tool, ToolRegistry
from tests.helpers.paths import ROOT
from tests.helpers.processes import process_gone, wait_for_pid, wait_until_exited
from tests.helpers.tools import ctx_for, hog_tool

# Python's re backtracks on (a+)+$ against a run of a's that does not end the
# line: each extra character doubles the time, and the C matcher holds the GIL
# all along. 29 characters: about 30 s on a 2-core CI machine, ~100 s on the
# machine that reported it. Never reached in these tests unless the fix is gone.


class Order(BaseModel):
    id: str
    total: float


class TwoArgError(Exception):
    """Pickles, but does not unpickle: its __init__ needs two arguments."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(f"{code}: {text}")


class HalfPicklable:
    """Pickles, but cannot be rebuilt: its reduction gives __init__ too few arguments."""

    def __init__(self, a: int, b: int) -> None:
        self.a, self.b = a, b

    def __reduce__(self) -> Any:
        return (HalfPicklable, (self.a,))


async def test_sync_tools_run_in_a_child_unless_opted_out(tmp_path: Path) -> None:
    def where() -> int:
        """The process id."""
        return os.getpid()

    async def where_async() -> int:
        """The process id."""
        return os.getpid()

    isolated = Tool(where)
    shared = Tool(where, isolated=False)
    assert isolated.isolated and not shared.isolated and not Tool(where_async).isolated
    assert await isolated.run({}, ctx_for(tmp_path)) != os.getpid()
    assert await shared.run({}, ctx_for(tmp_path)) == os.getpid()
    assert await Tool(where_async).run({}, ctx_for(tmp_path)) == os.getpid()
    with pytest.raises(UserError) as info:
        Tool(where_async, isolated=True)
    assert str(info.value) == (
        "tool 'where_async': isolated=True applies to plain functions; an async tool runs on "
        "the worker's event loop (make it a plain function to isolate it)"
    )

    registry = ToolRegistry()

    @registry.tool(isolated=False)
    def in_worker() -> int:
        """The process id."""
        return os.getpid()

    assert registry.get("in_worker").isolated is False


def test_builtin_sync_tools_are_isolated() -> None:
    assert {t.name: t.isolated for t in BUILTIN_TOOLS} == {
        "shell_command": False,  # async: its own subprocess, killed on timeout
        "read_file": True,
        "write_file": True,
        "apply_patch": True,
        "grep_files": True,
        "list_dir": True,
        "view_image": True,
    }


async def test_closures_values_and_metrics_cross(tmp_path: Path) -> None:
    captured = {"prefix": "A-"}

    def lookup(number: int, ctx: ToolContext) -> Order:
        """A closure returning a pydantic model, with metrics."""
        ctx.metrics["lookups"] = 1
        ctx.metrics["pid"] = os.getpid()
        return Order(id=captured["prefix"] + str(number), total=9.5)

    ctx = ctx_for(tmp_path, metrics={"before": True})
    assert await Tool(lookup).run({"number": 7}, ctx) == Order(id="A-7", total=9.5)
    assert ctx.metrics["lookups"] == 1 and ctx.metrics["before"] is True
    assert ctx.metrics["pid"] != os.getpid()


async def test_concurrent_calls_and_large_values(tmp_path: Path) -> None:
    def blob(size: int) -> str:
        """A large value: far more than a pipe holds at once."""
        return str(size % 10) * size

    tool = Tool(blob)
    sizes = [10, 70_000, 5_000_000] * 4
    values = await asyncio.gather(*(tool.run({"size": n}, ctx_for(tmp_path)) for n in sizes))
    assert values == [str(n % 10) * n for n in sizes]


async def test_exceptions_cross(tmp_path: Path) -> None:
    class LocalError(Exception):
        """Defined in a function: cannot be pickled by reference."""

    def refuse() -> str:
        """Fails for the model."""
        raise ToolError("the ledger is closed on Sundays")

    def value_error() -> str:
        """A plain bug."""
        raise ValueError("bad value")

    def local_error() -> str:
        """An exception class the parent cannot unpickle."""
        raise LocalError("local trouble")

    def two_args() -> str:
        """An exception that pickles but does not unpickle."""
        raise TwoArgError(3, "three")

    def exits() -> str:
        """Calls sys.exit: must not end the worker."""
        raise SystemExit(4)

    ctx = ctx_for(tmp_path)
    with pytest.raises(ToolError, match="^the ledger is closed on Sundays$"):
        await Tool(refuse).run({}, ctx)
    with pytest.raises(ValueError, match="^bad value$"):
        await Tool(value_error).run({}, ctx)
    for fn, name, text in [
        (local_error, "LocalError", "local trouble"),
        (two_args, "TwoArgError", "3: three"),
        (exits, "SystemExit", "4"),
    ]:
        with pytest.raises(Exception) as info:
            await Tool(fn).run({}, ctx)
        assert type(info.value).__name__ == name
        assert str(info.value) == text
        assert isinstance(info.value, Exception)


async def test_unpicklable_value_is_a_clear_error(tmp_path: Path) -> None:
    def returns_lambda() -> Any:
        """Returns something that cannot cross a process boundary."""
        return lambda: None

    with pytest.raises(IsolatedToolError) as info:
        await Tool(returns_lambda).run({}, ctx_for(tmp_path))
    message = str(info.value)
    assert message.startswith(
        "Tool 'returns_lambda' returned a function, which cannot be passed back from the "
        "tool's process ("
    )
    assert message.endswith(
        "); return text, numbers, lists, dicts or a pydantic model, or register the tool "
        "with isolated=False"
    )

    def returns_half_picklable() -> Any:
        """Returns something that pickles but cannot be rebuilt."""
        return HalfPicklable(1, 2)

    with pytest.raises(IsolatedToolError) as info:
        await Tool(returns_half_picklable).run({}, ctx_for(tmp_path))
    assert str(info.value) == (
        "Tool 'returns_half_picklable' answered with a value that could not be rebuilt in the "
        "worker (TypeError: HalfPicklable.__init__() missing 1 required positional argument: "
        "'b'); return text, numbers, lists, dicts or a pydantic model, or register the tool "
        "with isolated=False"
    )


async def test_child_death_is_reported(tmp_path: Path) -> None:
    def exit_hard() -> str:
        """Leaves without a word."""
        os._exit(3)

    def killed() -> str:
        """Killed from outside (as the OOM killer would)."""
        os.kill(os.getpid(), signal.SIGKILL)
        return "unreachable"

    with pytest.raises(IsolatedToolError) as info:
        await Tool(exit_hard).run({}, ctx_for(tmp_path))
    assert str(info.value) == (
        "Tool 'exit_hard' ended without a result: its process exited with code 3 (did the "
        "tool call sys.exit or os._exit?)"
    )
    with pytest.raises(IsolatedToolError) as info:
        await Tool(killed).run({}, ctx_for(tmp_path))
    assert str(info.value) == "Tool 'killed' ended without a result: its process was killed by SIGKILL"


async def test_cancellation_and_timeout_kill_the_child(tmp_path: Path) -> None:
    tool = Tool(hog_tool())
    task = asyncio.create_task(tool.run({}, ctx_for(tmp_path, call_id="cancelled")))
    pid = await wait_for_pid(tmp_path / "cancelled.pid")
    sleeper = await wait_for_pid(tmp_path / "cancelled.sleeper")
    assert pid != os.getpid() and not process_gone(pid)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # Killed and reaped by the time the call returns: not even a zombie is left.
    assert not Path(f"/proc/{pid}").exists()
    # What it started in its process group went with it.
    await wait_until_exited(sleeper)

    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(tool.run({}, ctx_for(tmp_path, call_id="timed")), 0.5)
    pid = int((tmp_path / "timed.pid").read_text())
    assert not Path(f"/proc/{pid}").exists()
    assert not (tmp_path / "timed.done").exists()


WORKER_KILLED_MID_CALL = """
import asyncio, os, sys, time
from pathlib import Path
from agentloop.tools.registry import Tool
from agentloop.tools.tool_context import ToolContext

def wait() -> str:
    "Note the pid, then wait."
    Path(sys.argv[1]).write_text(str(os.getpid()))
    time.sleep(300)
    return "never"

asyncio.run(Tool(wait).run({}, ToolContext(workspace=Path("."))))
"""


async def test_child_dies_with_the_worker(tmp_path: Path) -> None:
    # A worker process killed mid-call (OOM killer, kill -9) must not leave
    # its tool's child running.
    pid_file = tmp_path / "child.pid"
    worker_process = subprocess.Popen(
        [sys.executable, "-c", WORKER_KILLED_MID_CALL, str(pid_file)],
        cwd=ROOT,
    )
    try:
        child = await wait_for_pid(pid_file)
        assert child != worker_process.pid and not process_gone(child)
    finally:
        worker_process.kill()
        worker_process.wait()
    await wait_until_exited(child, "the tool's process outlived the worker")
