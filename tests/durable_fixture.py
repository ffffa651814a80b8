"""Tools and a script for the kill-the-worker test, imported by worker
subprocesses with ``agentloop worker --import tests.durable_fixture``."""

from __future__ import annotations

import asyncio

from agentloop import ToolContext, call, calls, register_scripted_model, reply, tool


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
