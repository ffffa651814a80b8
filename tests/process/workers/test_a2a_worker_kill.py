"""An agentloop agent calls a remote A2A agent (``a2a:<url>``) served by
``agentloop serve`` in another process, with its own worker; the caller's
worker is SIGKILLed while the remote task runs, and the retry on a new
worker resumes the poll: the remote task is started once."""

from __future__ import annotations

import asyncio
import signal
import uuid
from pathlib import Path

import httpx

from agentloop import AgentClient, AgentSpec
from tests.helpers.fixtures.a2a_fixture import SLOW_ANSWER
from tests.helpers.polling import eventually
from tests.helpers.workers import start_worker
from tests.process.http.test_http_serve import start_serve, stop

TOKEN = "caller-secret-0123456789"
FIXTURE = "tests.helpers.fixtures.a2a_fixture"


async def test_a_killed_worker_resumes_the_remote_task_instead_of_starting_it_again(
        agent_client: AgentClient, dev_server, env, spawn_worker, tmp_path: Path) -> None:
    remote_queue = f"remote-{uuid.uuid4().hex[:8]}"
    spec = tmp_path / "oracle.json"
    oracle = f"oracle-{uuid.uuid4().hex[:8]}"  # finds this test's remote runs, and only them
    spec.write_text(f'{{"name": "{oracle}", "model": "scripted:a2a_slow", "heartbeat_timeout_seconds": 5}}')
    remote_worker = start_worker(dev_server, remote_queue, tmp_path / "remote.log", FIXTURE)
    proc, url, _ = await start_serve({**env, "AGENTLOOP_TASK_QUEUE": remote_queue,
                                      "AGENTLOOP_API_TOKENS": f"caller:act:{TOKEN}:agents=oracle"},
                                     "--agent", f"oracle={spec}")
    try:
        agent_url = f"{url}/a2a/oracle"
        caller_env = {"AGENTLOOP_A2A_AGENTS": agent_url, "AGENTLOOP_A2A_TOKENS": f"{agent_url}={TOKEN}"}
        first = spawn_worker(FIXTURE, **caller_env)
        caller = AgentSpec(model="scripted:a2a_caller", tools=[f"a2a:{agent_url}"], default_permission="allow",
                           heartbeat_timeout_seconds=2)
        handle = await agent_client.start(caller, "ask the oracle")
        async with httpx.AsyncClient(base_url=url, timeout=30,
                                     headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            async def remote_runs() -> list[dict]:
                return (await http.get("/v1/runs", params={"name": oracle})).json()["runs"]

            await eventually(remote_runs, f"the remote task to start (worker log: {spawn_worker.log})", timeout=60)
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=10)
            (remote,) = await remote_runs()
            assert remote["status"] == "running"  # killed mid-task
            spawn_worker(FIXTURE, **caller_env)
            result = await asyncio.wait_for(handle.result(), timeout=120)
            assert result.status == "completed", result.error
            (answer,) = [r for m in result.messages for r in m.tool_results]
            assert answer.content == SLOW_ANSWER and not answer.is_error
            # One remote run: the retry polled the task its heartbeat named.
            assert [r["run_id"] for r in await remote_runs()] == [remote["run_id"]]
        history = await handle.workflow_handle.fetch_history()
        attempts = [e.activity_task_started_event_attributes.attempt for e in history.events
                    if e.HasField("activity_task_started_event_attributes")]
        assert max(attempts) >= 2  # the tool call was retried after the kill
    finally:
        await stop(proc)
        remote_worker.kill()
        remote_worker.wait()
