"""A model step and a tool that block until released, for killing a worker
in the middle of them. Imported by worker subprocesses
(``agentloop worker --import tests.helpers.crash_fixture``).

The run's first user message names a directory (``gate=<path>``): each
attempt appends a line to ``<path>/calls.log`` (``llm-start``, or
``tool <idempotency key>``), then waits until ``<path>/release`` exists.
Taking the path from the conversation keeps runs independent and lets a
retry on another worker find it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from agentloop import ToolContext, tool
from agentloop.shared.definition.activity_io import ModelRequest, ModelResponse
from agentloop.testing import call, calls, register_scripted_model, reply


async def _wait_at_gate(gate: Path, line: str) -> None:
    with open(gate / "calls.log", "a") as log:
        log.write(f"{line}\n")
    while not (gate / "release").exists():
        await asyncio.sleep(0.05)


async def _blocking_step(request: ModelRequest) -> ModelResponse:
    first = next(m.text for m in request.messages if m.role == "user")
    await _wait_at_gate(Path(first.split("gate=", 1)[1].strip()), "llm-start")
    return reply("recovered")


register_scripted_model("llm_kill", [_blocking_step])


@tool
async def keyed_block(gate: str, ctx: ToolContext) -> str:
    """Note the call's idempotency key, then wait for the gate's release file."""
    await _wait_at_gate(Path(gate), f"tool {ctx.idempotency_key}")
    return "released"


def _call_keyed_block(request: ModelRequest) -> ModelResponse:
    first = next(m.text for m in request.messages if m.role == "user")
    return calls(call("keyed_block", {"gate": first.split("gate=", 1)[1].strip()}))


register_scripted_model("tool_kill", [_call_keyed_block, reply("done")])
