"""The agent workflow and Temporal's workflow sandbox.

Production workers run ``AgentRunWorkflow`` without the sandbox (it costs
about a fifth of a worker's CPU per step); this suite runs it inside the
sandbox (``AGENTLOOP_WORKFLOW_SANDBOX=1``, set in conftest), so a
non-deterministic call in workflow code fails here at once. The default mode
is checked in a subprocess that has no such setting: a live run with tools,
and every committed history replayed.
"""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
from pathlib import Path

from tests.helpers.paths import HISTORIES

DEFAULT_MODE = textwrap.dedent(
    """
    import asyncio, sys, uuid
    from pathlib import Path

    from temporalio import workflow
    from temporalio.client import WorkflowHistory
    from temporalio.worker import Replayer, Worker

    from agentloop import AgentClient, AgentLoopPlugin, AgentSpec
    from agentloop.tools.registry import ToolRegistry
    from agentloop.testing import call, calls, reply, script
    from agentloop.workflows.agent_run import AgentRunWorkflow

    async def main(address: str, histories: str, workspace: str) -> None:
        defn = workflow._Definition.from_class(AgentRunWorkflow)
        print("sandboxed", defn.sandboxed)
        registry = ToolRegistry()

        @registry.tool(read_only=True)
        async def shout(text: str) -> str:
            '''Say it louder.

            Args:
                text: What to say.
            '''
            return text.upper()

        queue = f"tq-{uuid.uuid4().hex[:8]}"
        client = await AgentClient.connect(address, task_queue=queue)
        model = script(calls(call("shout", {"text": "a"})), calls(call("shout", {"text": "b"})), reply("done"))
        plugin = AgentLoopPlugin(registry=registry, workspace=workspace)
        async with Worker(client.temporal, task_queue=queue, plugins=[plugin]):
            result = await client.run(AgentSpec(model=model, tools=["shout"], default_permission="allow"),
                                      "shout twice")
        print("run", result.final_text, result.report.step_count,
              [m.tool_results[0].content for m in result.messages if m.tool_results])
        replayer = Replayer(workflows=[], plugins=[AgentLoopPlugin()])
        failures, count = [], 0
        for path in sorted(Path(histories).glob("*.json")):
            history = WorkflowHistory.from_json(f"replay-{path.stem}", path.read_text())
            replay = await replayer.replay_workflow(history, raise_on_replay_failure=False)
            count += 1
            if replay.replay_failure is not None:
                failures.append(f"{path.stem}: {replay.replay_failure}")
        print("replayed", count, "failures", failures)

    asyncio.run(main(*sys.argv[1:]))
    """
)


async def test_by_default_a_run_goes_without_the_sandbox_and_every_history_replays(
    dev_server, tmp_path: Path
) -> None:
    await dev_server.wait_ready()
    env = {k: v for k, v in os.environ.items() if k != "AGENTLOOP_WORKFLOW_SANDBOX"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", DEFAULT_MODE, dev_server.address, str(HISTORIES), str(tmp_path),
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 240)
    output = out.decode()
    assert proc.returncode == 0, output
    lines = output.splitlines()
    assert "sandboxed False" in lines, output
    assert "run done 3 ['A', 'B']" in lines, output
    replayed = next(line for line in lines if line.startswith("replayed "))
    count = len(list(HISTORIES.glob("*.json")))
    assert replayed == f"replayed {count} failures []", output
    assert count > 20
