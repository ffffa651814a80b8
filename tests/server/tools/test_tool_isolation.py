"""Sync tools run in a forked child process: values, errors, heartbeats and
metrics cross the boundary; timeouts and cancellation kill the child; and a
tool spinning in C code that holds the GIL cannot stall the worker (on a real
Temporal dev server)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from agentloop import AgentClient, AgentRunFailed, ToolContext
from agentloop.testing import call, calls, script
from agentloop.tools.registry import Tool, ToolRegistry
from tests.helpers.agents import echo_results, spec
from tests.helpers.processes import process_gone, wait_for_pid, wait_until_exited
from tests.helpers.tools import HOG_LINE, ctx_for, hog_tool

# Python's re backtracks on (a+)+$ against a run of a's that does not end the
# line: each extra character doubles the time, and the C matcher holds the GIL
# all along. 29 characters: about 30 s on a 2-core CI machine, ~100 s on the
# machine that reported it. Never reached in these tests unless the fix is gone.


# --------------------------------------------------------------------------
# Tool.run: what crosses the process boundary


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


# --------------------------------------------------------------------------
# On a real worker


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
        assert result.final_text == "ping:pong"
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
        await wait_until_exited(pid, "the cancelled tool's process survived")
        sleeper = int((workspace / "call_0_0.sleeper").read_text())
        await wait_until_exited(sleeper)


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
    assert result.final_text == "hog:ERR " + tool_result.content
    pid = int((workspace / "call_0_0.pid").read_text())
    assert pid != os.getpid()
    await wait_until_exited(pid, "the timed-out tool's process survived")
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
