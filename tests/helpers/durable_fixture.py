"""Tools and a script for the kill-the-worker test, imported by worker
subprocesses with ``agentloop worker --import tests.helpers.durable_fixture``."""

from __future__ import annotations

import asyncio

from agentloop import ToolContext, tool
from agentloop.testing import call, calls, register_scripted_model, reply


@tool
def record(label: str, ctx: ToolContext) -> str:
    """Append a label to calls.log in the workspace."""
    with open(ctx.workspace / "calls.log", "a") as log:
        log.write(f"{label}\n")
    return f"recorded {label}"


@tool
async def block(ctx: ToolContext) -> str:
    """Note the start in calls.log, then wait until a file named 'release' appears."""
    with open(ctx.workspace / "calls.log", "a") as log:
        log.write("block-start\n")
    while not (ctx.workspace / "release").exists():
        await asyncio.sleep(0.05)
    return "released"


register_scripted_model(
    "durable",
    [
        calls(call("record", {"label": "a"})),
        calls(call("block")),
        reply("survived"),
    ],
)


@tool
async def slow(seconds: float, ctx: ToolContext) -> str:
    """Note the start, sleep, note the end (in calls.log)."""
    with open(ctx.workspace / "calls.log", "a") as log:
        log.write("slow-start\n")
    await asyncio.sleep(seconds)
    with open(ctx.workspace / "calls.log", "a") as log:
        log.write("slow-end\n")
    return f"slept {seconds}"


register_scripted_model("graceful", [calls(call("slow", {"seconds": 1.5})), reply("finished")])


register_scripted_model("approval", [calls(call("record", {"label": "approved"})), reply("approved and done")])
