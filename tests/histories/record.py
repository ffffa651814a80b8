"""Record the workflow histories that tests/test_replay.py replays.

Run from the repository root when a deliberate, versioned change to the
workflow needs new histories (keep the old ones: runs in flight still have
them)::

    python -m tests.histories.record            # scenarios without a file yet
    python -m tests.histories.record NAME ...   # re-record these
"""

from __future__ import annotations

import asyncio
import json
import sys
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
from agentloop.activity_io import ToolDefinition
from activities.builtin_tools import register_builtin_tools
from agentloop.devserver import DevServer
from workers.worker import build_worker, connect

HERE = Path(__file__).parent

async def wait_pending(handle, count: int) -> None:
    for _ in range(600):
        pending = await handle.pending()
        if len(pending.approvals) + len(pending.actions) == count:
            return
        await asyncio.sleep(0.05)
    raise RuntimeError(f"{handle.run_id}: never had {count} pending calls")


async def drive_approvals(handle) -> None:
    # Two writes wait at once; one approved by signal (as `temporal workflow
    # signal` sends it), one denied by update; a malformed signal is ignored.
    await wait_pending(handle, 2)
    raw = handle.workflow_handle
    await raw.signal("approve", {"call": "oops"})
    await raw.signal("approve", {"call_id": "call_0_1", "decision": "approve"})
    await handle.deny("call_0_0", "not today")


async def drive_client_tool_then_stop(handle) -> None:
    await wait_pending(handle, 1)
    await handle.submit_tool_outputs({"call_0_0": "order shipped"})
    await wait_pending(handle, 1)  # the write of step 2 waits for approval
    await handle.stop("enough")


LOOKUP = ToolDefinition(name="lookup_order", parameters={"type": "object", "properties": {"id": {"type": "string"}}})

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
    # Approvals (patch agentloop-hitl-1): both decided, out of order.
    "hitl_approvals": (
        [
            calls(call("write_file", {"file_path": "c.txt", "content": "c"}),
                  call("write_file", {"file_path": "d.txt", "content": "d"})),
            reply("done"),
        ],
        dict(tools=["write_file"], approval_timeout_seconds=3600),
        drive_approvals,
    ),
    # requires_action for a client tool, then a stop while an approval waits.
    "hitl_client_tool_stop": (
        [
            calls(call("lookup_order", {"id": "7"})),
            calls(call("write_file", {"file_path": "e.txt", "content": "e"})),
            reply("unreachable"),
        ],
        dict(tools=["write_file"], client_tools=[LOOKUP]),
        drive_client_tool_then_stop,
    ),
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
            wanted = sys.argv[1:] or [n for n in SCENARIOS if not (HERE / f"{n}.json").exists()]
            for name in wanted:
                script, options, *drive = SCENARIOS[name]
                register_scripted_model(f"record-{name}", script)
                spec = AgentSpec(model=f"scripted:record-{name}", workspace=ws, **options)
                handle = await agents.start(spec, f"scenario {name}", run_id=f"replay-{name}")
                if drive:
                    await drive[0](handle)
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
