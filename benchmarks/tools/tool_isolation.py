"""What running a sync tool in a forked child costs, against the thread it used to run in.

Calls ``Tool.run`` (argument validation included) sequentially in a process
that has imported the whole worker (temporalio, the providers, the built-in
tools), so the fork copies a worker-sized address space:

* ``ping``: a tool that returns a short string at once, the pure overhead;
* ``read_file``: the built-in tool on a 100-line file;
* ``grep_files``: the built-in tool over 50 files of 100 lines.

Each with ``isolated=False`` (a thread, as before) and ``isolated=True`` (a
forked child per call, the default for sync tools). Prints per-call mean,
p50 and p95 in ms and the ratio of the means. ``--ballast-mb`` first
allocates (and touches) that much memory, to show how the fork's cost grows
with the worker's resident size.

Then, on an embedded dev server (fast polling), agent runs of ``--steps``
steps with one ``ping`` tool call per step, the tool registered both ways
(alternating runs, ``--repeat`` each): the ms per step, whose difference is
what isolation adds to a tool call end to end. Usage::

    python -m benchmarks.tools.tool_isolation [--calls 300] [--ballast-mb 0] [--steps 25] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentloop import AgentClient, AgentSpec
from agentloop.activities.builtin_tools.file_tools import read_file
from agentloop.activities.builtin_tools.grep_tool import grep_files
from agentloop.testing import call, calls, register_scripted_model, reply
from agentloop.tools.registry import Tool, ToolRegistry
from agentloop.tools.tool_context import ToolContext
from agentloop.workers.devserver import DevServer
from agentloop.workers.worker import build_worker, connect


def ping() -> str:
    """Pong."""
    return "pong"


async def measure(tool: Tool, arguments: dict[str, Any], ctx: ToolContext, calls: int) -> list[float]:
    for _ in range(min(20, calls)):  # warm-up
        await tool.run(arguments, ctx)
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        await tool.run(arguments, ctx)
        times.append((time.perf_counter() - started) * 1000)
    return times


def summary(times: list[float]) -> str:
    q = statistics.quantiles(times, n=20)
    return f"mean {statistics.fmean(times):6.2f}  p50 {statistics.median(times):6.2f}  p95 {q[18]:6.2f}"


async def end_to_end(steps: int, repeat: int) -> None:
    registry = ToolRegistry()
    registry.register(Tool(ping, name="ping_thread", isolated=False))
    registry.register(Tool(ping, name="ping_fork", isolated=True))
    with DevServer() as server:
        await server.wait_ready()
        client = await connect(server.address)
        queue = f"bench-{uuid.uuid4().hex[:8]}"
        agents = AgentClient(client, task_queue=queue)
        per_step: dict[str, list[float]] = {"ping_thread": [], "ping_fork": []}
        async with build_worker(client, task_queue=queue, registry=registry):
            for attempt in range(repeat + 1):  # the first round warms up
                for tool in per_step:
                    model = f"bench-{tool}-{attempt}"
                    register_scripted_model(
                        model, [calls(call(tool)) for _ in range(steps - 1)] + [reply("done")]
                    )
                    spec = AgentSpec(
                        model=f"scripted:{model}", tools=[tool], max_steps=steps + 1,
                        default_permission="allow", stream_deltas=False,
                    )
                    started = time.perf_counter()
                    result = await agents.run(spec, "go")
                    assert result.report.step_count == steps
                    if attempt:
                        per_step[tool].append((time.perf_counter() - started) * 1000 / steps)
    thread, fork = (statistics.median(per_step[t]) for t in ("ping_thread", "ping_fork"))
    print(f"end to end: dev server with fast polling, {steps}-step runs, {repeat} of each, deltas off")
    print(f"per step (LLM step + tool call), thread: {thread:6.1f} ms")
    print(f"per step (LLM step + tool call), fork:   {fork:6.1f} ms  (+{fork - thread:.1f} ms per tool call)")


async def main(calls: int, ballast_mb: int) -> None:
    ballast = bytearray(ballast_mb * 1024 * 1024)
    for i in range(0, len(ballast), 4096):  # touch every page so it is resident
        ballast[i] = 1
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        (ws / "f.txt").write_text("".join(f"line {i}: some text here\n" for i in range(100)))
        for i in range(50):
            (ws / f"m{i}.py").write_text("".join(f"def f{j}(x):\n    return x\n" for j in range(50)))
        ctx = ToolContext(workspace=ws)
        cases: list[tuple[str, Callable[..., Any], dict[str, Any]]] = [
            ("ping", ping, {}),
            ("read_file", read_file, {"file_path": "f.txt"}),
            ("grep_files", grep_files, {"pattern": r"def f4\d\("}),
        ]
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{calls} sequential calls each; process max RSS {rss_mb:.0f} MB (ballast {ballast_mb} MB)")
        print(f"{'tool':11} {'path':8} per call (ms)")
        for name, fn, arguments in cases:
            thread = await measure(Tool(fn, isolated=False), arguments, ctx, calls)
            child = await measure(Tool(fn, isolated=True), arguments, ctx, calls)
            print(f"{name:11} thread   {summary(thread)}")
            print(f"{name:11} fork     {summary(child)}")
            added = statistics.fmean(child) - statistics.fmean(thread)
            print(
                f"{name:11} ratio    {statistics.fmean(child) / statistics.fmean(thread):5.1f}x "
                f"(+{added:.2f} ms per call)"
            )
    del ballast


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--ballast-mb", type=int, default=0)
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.calls, args.ballast_mb))
    asyncio.run(end_to_end(args.steps, args.repeat))
