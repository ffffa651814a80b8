"""benchmarks/streaming/start_trace on the session's dev server: the floor's
two workflows (their activity on the workflow's queue, and on another) and
an agentloop run, each traced from its history: every mark of the path to
the first activity, in order, and what the workflow did before it."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from agentloop import AgentClient, AgentSpec
from agentloop.shared.base.contracts import CALL_MODEL
from agentloop.testing import reply, script
from benchmarks.streaming import start_trace
from benchmarks.streaming.start_trace import Floor, FloorApart, floor_run, mark


async def test_the_trace_follows_each_path_to_its_first_activity(
        temporal_client: Client, task_queue: str, agent_client: AgentClient, worker) -> None:
    traces: list = []
    floor_queue = f"{task_queue}-floor"
    async with Worker(temporal_client, task_queue=floor_queue, workflows=[Floor, FloorApart], activities=[mark],
                      workflow_runner=UnsandboxedWorkflowRunner()), \
            Worker(temporal_client, task_queue=f"{floor_queue}-apart", activities=[mark]):
        ran = [await floor_run(temporal_client, floor_queue, traces=traces),
               await floor_run(temporal_client, floor_queue, f"{floor_queue}-apart", traces=traces)]
    async with worker():
        handle = await agent_client.start(AgentSpec(model=script(reply("hi"))), "go")
        await handle.result()
    history = await handle.workflow_handle.fetch_history()
    traces.append(start_trace.trace(history.events, 0.0, CALL_MODEL))
    for marks, _ in traces:
        assert list(marks) == list(start_trace.MARKS), marks
        assert [marks[m] for m in start_trace.MARKS] == sorted(marks[m] for m in start_trace.MARKS)
    assert all(value > 0 for value in ran)
    assert [before for _, before in traces[:2]] == [["wft"], ["wft"]]  # the floor does nothing else first
    assert "wft" in traces[2][1] and not any(b.startswith("activity ") for b in traces[2][1])
    line = start_trace.report("floor", traces[:1], ran[:1])
    assert line.startswith("floor") and line.endswith("before it: wft")
    assert start_trace.header().split()[-1] == "ran"
