"""Tools and scripted models of the telemetry process test, imported by
worker subprocesses with ``agentloop worker --import tests.helpers.telemetry_fixture``."""

from __future__ import annotations

import logging

from agentloop import ToolContext, tool
from agentloop.testing import call, calls, register_scripted_model, reply

log = logging.getLogger("tests.telemetry_fixture")


@tool(read_only=True)
async def note(label: str, ctx: ToolContext) -> str:
    """Log a line (it carries the run id, step and call id) and answer."""
    log.info("noting %s", label)
    return f"noted {label}"


register_scripted_model(
    "observed",
    [
        calls(call("note", {"label": "a"})),
        calls(call("write_file", {"file_path": "out.txt", "content": "x"})),
        reply("done"),
    ],
)

# Calls a tool at every step: with max_steps=1 the run fails (max_steps).
register_scripted_model("endless", [calls(call("note", {"label": "again"}))] * 3)
