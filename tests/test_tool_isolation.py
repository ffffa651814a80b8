"""Sync tools run in a forked child process: values, errors, heartbeats and
metrics cross the boundary; timeouts and cancellation kill the child; and a
tool spinning in C code that holds the GIL cannot stall the worker (on a real
Temporal dev server)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agentloop import AgentClient, AgentRunFailed, AgentSpec, ToolContext, ToolRegistry
from agentloop.activities.builtin_tools import BUILTIN_TOOLS
from agentloop.shared.errors import ToolError, UserError
from agentloop.tools.isolation import IsolatedToolError
from agentloop.testing import call, calls, last_tool_results, reply, script
from agentloop.tools.registry import Tool
from tests.processes import process_gone, wait_for_pid, wait_until

# Python's re backtracks on (a+)+$ against a run of a's that does not end the
# line: each extra character doubles the time, and the C matcher holds the GIL
# all along. 29 characters: about 30 s on a 2-core CI machine, ~100 s on the
# machine that reported it. Never reached in these tests unless the fix is gone.
HOG_LINE = "a" * 28 + "!"


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


def ctx_for(tmp_path: Path, **kwargs: Any) -> ToolContext:
    return ToolContext(workspace=tmp_path, **kwargs)


# --------------------------------------------------------------------------
# Tool.run: what crosses the process boundary


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


async def test_heartbeats_reach_the_parent(tmp_path: Path) -> None:
    beats: list[tuple[Any, ...]] = []

    def progress(ctx: ToolContext) -> str:
        """Reports progress."""
        ctx.heartbeat("halfway", 50)
        ctx.heartbeat()
        return "done"

    ctx = ctx_for(tmp_path, heartbeat=lambda *details: beats.append(details))
    assert await Tool(progress).run({}, ctx) == "done"
    assert beats == [("halfway", 50), ()]


def hog_tool(name: str = "hog") -> Any:
    """A sync tool that notes its pid (and a grandchild's), then spins in C
    code holding the GIL; it notes 'done' if it ever finishes."""

    def hog(ctx: ToolContext) -> str:
        """Backtracks for a long time."""
        sleeper = subprocess.Popen(["sleep", "300"])
        (ctx.workspace / f"{ctx.call_id or name}.sleeper").write_text(str(sleeper.pid))
        (ctx.workspace / f"{ctx.call_id or name}.pid").write_text(str(os.getpid()))
        re.search(r"(a+)+$", HOG_LINE)
        (ctx.workspace / f"{ctx.call_id or name}.done").write_text("done")
        return "finished"

    hog.__name__ = name
    return hog


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
    assert await wait_until(lambda: process_gone(sleeper))

    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(tool.run({}, ctx_for(tmp_path, call_id="timed")), 0.5)
    pid = int((tmp_path / "timed.pid").read_text())
    assert not Path(f"/proc/{pid}").exists()
    assert not (tmp_path / "timed.done").exists()


WORKER_KILLED_MID_CALL = """
import asyncio, os, sys, time
from pathlib import Path
from agentloop.tools.registry import Tool, ToolContext

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
        cwd=Path(__file__).parent.parent,
    )
    try:
        child = await wait_for_pid(pid_file)
        assert child != worker_process.pid and not process_gone(child)
    finally:
        worker_process.kill()
        worker_process.wait()
    assert await wait_until(lambda: process_gone(child)), "the tool's process outlived the worker"


# --------------------------------------------------------------------------
# On a real worker


def spec(model: str, **kw: Any) -> AgentSpec:
    kw.setdefault("heartbeat_timeout_seconds", 5)
    kw.setdefault("default_permission", "allow")
    return AgentSpec(model=model, **kw)


def echo_results(request: Any) -> Any:
    return reply(" | ".join(f"{'ERR ' if r.is_error else ''}{r.content}" for r in last_tool_results(request)))


async def test_gil_hog_does_not_stall_the_worker(
    agent_client: AgentClient, worker, registry: ToolRegistry, workspace: Path
) -> None:
    registry.tool(hog_tool())

    @registry.tool
    def ping() -> str:
        """Pong."""
        return "pong"

    hog_model = script(calls(call("hog")), echo_results)
    ping_model = script(calls(call("ping")), echo_results)
    async with worker():
        hogging = await agent_client.start(spec(hog_model, tools=["hog"], tool_timeout_seconds=600), "hog")
        pid = await wait_for_pid(workspace / "call_0_0.pid")
        assert pid != os.getpid(), "the sync tool ran inside the worker's process"

        # While it spins: an unrelated run on the same worker completes...
        other = await agent_client.start(spec(ping_model, tools=["ping"]), "ping")
        result = await other.result()
        assert result.final_text == "pong"
        # ...and the hogging run answers queries.
        state = await hogging.state()
        assert state.status == "running"
        assert [c.name for c in state.running_tool_calls] == ["hog"]
        # It was all while the hog ran: it is still running, unfinished.
        assert not process_gone(pid)
        assert not (workspace / "call_0_0.done").exists()

        await hogging.cancel()
        with pytest.raises(AgentRunFailed) as info:
            await hogging.result()
        assert info.value.reason == "cancelled"
        assert await wait_until(lambda: process_gone(pid)), "the cancelled tool's process survived"
        sleeper = int((workspace / "call_0_0.sleeper").read_text())
        assert await wait_until(lambda: process_gone(sleeper))


async def test_gil_hog_times_out_with_an_error_result(
    agent_client: AgentClient, worker, registry: ToolRegistry, workspace: Path
) -> None:
    registry.tool(hog_tool())
    model = script(calls(call("hog")), echo_results)
    async with worker():
        # A second failed step would end the run; one lets the model see the error.
        result = await agent_client.run(
            spec(model, tools=["hog"], tool_timeouts={"hog": 1}, max_consecutive_failed_tool_steps=2),
            "hog",
        )
    (tool_result,) = result.messages[1].tool_results
    assert tool_result.is_error
    assert tool_result.content == (
        "Tool 'hog' timed out after 1s and was stopped; try a smaller task or raise its "
        "timeout (AgentSpec.tool_timeouts)."
    )
    assert result.final_text == "ERR " + tool_result.content
    pid = int((workspace / "call_0_0.pid").read_text())
    assert pid != os.getpid()
    assert await wait_until(lambda: process_gone(pid)), "the timed-out tool's process survived"
    assert not (workspace / "call_0_0.done").exists()


async def test_grep_catastrophic_pattern_answers_with_re2(
    agent_client: AgentClient, worker, workspace: Path
) -> None:
    # The reported case: (a+)+$ on one 29-character line froze the worker for
    # ~100 s with Python's re. RE2 answers in linear time.
    (workspace / "input.txt").write_text(HOG_LINE + "\n" + "aaa\n")
    model = script(calls(call("grep_files", {"pattern": "(a+)+$"})), echo_results)
    async with worker():
        result = await agent_client.run(
            spec(model, tools=["grep_files"], tool_timeouts={"grep_files": 10}), "grep"
        )
    (tool_result,) = result.messages[1].tool_results
    assert not tool_result.is_error, tool_result.content
    assert tool_result.content == "input.txt:2: aaa"
