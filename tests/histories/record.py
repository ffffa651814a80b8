"""Record the workflow histories that tests/test_replay.py replays.

Run from the repository root when a deliberate, versioned change to the
workflow needs new histories (keep the old ones: runs in flight still have
them)::

    python -m tests.histories.record
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import uuid
from pathlib import Path

from agentloop import (
    AgentClient,
    AgentRunFailed,
    AgentSpec,
    ToolRegistry,
    call,
    calls,
    register_scripted_model,
    reply,
)
from activities.builtin_tools import register_builtin_tools
from agentloop.devserver import DevServer
from workers.worker import build_worker, connect

HERE = Path(__file__).parent

SCENARIOS = {
    # Parallel calls (one unknown), then a sequential step, then an answer.
    "tools_parallel": (
        [
            calls(call("read_file", {"file_path": "a.txt"}), call("nope"), call("list_dir", {"path": "."})),
            calls(call("write_file", {"file_path": "b.txt", "content": "b"})),
            reply("done"),
        ],
        dict(tools=["read_file", "list_dir", "write_file"]),
    ),
    # A run that fails on its finish reason.
    "failed_length": ([reply("cut off", finish_reason="length")], {}),
    # A run that runs out of steps.
    "max_steps": ([calls(call("list_dir")) for _ in range(3)], dict(tools=["list_dir"], max_steps=2)),
}


async def main() -> None:
    registry = ToolRegistry()
    register_builtin_tools(registry)
    with tempfile.TemporaryDirectory() as ws, DevServer() as server:
        (Path(ws) / "a.txt").write_text("alpha\n")
        await server.wait_ready()
        client = await connect(server.address)
        queue = f"record-{uuid.uuid4().hex[:8]}"
        agents = AgentClient(client, task_queue=queue)
        async with build_worker(client, task_queue=queue, registry=registry, workspace=ws):
            for name, (script, options) in SCENARIOS.items():
                register_scripted_model(f"record-{name}", script)
                spec = AgentSpec(model=f"scripted:record-{name}", workspace=ws, **options)
                handle = await agents.start(spec, f"scenario {name}", run_id=f"replay-{name}")
                try:
                    await handle.result()
                except AgentRunFailed:
                    pass
                history = await handle.workflow_handle.fetch_history()
                out = HERE / f"{name}.json"
                out.write_text(json.dumps(json.loads(history.to_json()), indent=1) + "\n")
                print(f"wrote {out} ({len(history.events)} events)")


if __name__ == "__main__":
    asyncio.run(main())
