"""An eval survives its worker being SIGKILLed mid-eval, and runs no case twice."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from agentloop import AgentClient, AgentSpec
from agentloop.client.evals import cases_from_runs, start_eval
from tests.helpers.polling import eventually


async def test_an_eval_survives_a_worker_sigkill_and_runs_no_case_twice(
    agent_client: AgentClient, workspace: Path, spawn_worker
) -> None:
    log = workspace / "calls.log"
    first = spawn_worker("tests.helpers.fixtures.eval_fixture")
    spec = AgentSpec(model="scripted:evalkill", tools=["tick"], workspace=str(workspace),
                     heartbeat_timeout_seconds=2, default_permission="allow")
    labels = [f"q{i}" for i in range(4)]
    recorded = [await asyncio.wait_for(agent_client.run(spec, label), 60) for label in labels]
    cases = await cases_from_runs(agent_client, [r.run_id for r in recorded])
    log.unlink()

    (workspace / "hold").touch()
    handle = await start_eval(agent_client, cases, policy="live", concurrency=2)
    await eventually(lambda: log.exists() and log.read_text().count("start") == 2,
                     what=f"two case runs' tools to start (worker log: {spawn_worker.log})", timeout=60)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    assert first.returncode == -signal.SIGKILL
    (workspace / "hold").unlink()
    spawn_worker("tests.helpers.fixtures.eval_fixture")
    report = await asyncio.wait_for(handle.result(), timeout=120)

    assert report.totals.pass_rate == 1.0, [o.reasons for o in report.cases]
    assert [o.candidate.live for o in report.cases] == [1, 1, 1, 1]
    # Each case's tool finished once: the two in flight at the kill started again, nothing else ran twice.
    lines = log.read_text().splitlines()
    assert sorted(x for x in lines if x.startswith("end")) == [f"end {label}" for label in labels]
    # One run per case, by its deterministic id.
    async def case_runs() -> list[str] | None:
        ids = [r.id async for r in agent_client.temporal.list_workflows(f'AgentEval="{handle.id}"')]
        return ids if len(ids) >= len(labels) else None

    ids = await eventually(case_runs, what="the case runs to be listed")
    assert sorted(ids) == sorted(o.run_id for o in report.cases)
