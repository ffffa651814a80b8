"""The deploy test: new code while runs wait, on a real dev server of its
own, with two versions of a worker (in-process, Worker Deployment
versioning; docs/deploying.md).

Version 1 offers ``lookup`` and ``refund`` and a house prompt "house v1";
version 2 drops ``refund`` and says "house v2". A run waiting for approval
under version 1 finishes on version 1 once version 2 is current; a new run
takes version 2; a thread moves to version 2 at its next turn; version 1 is
then drained, and retired (deleted) once its worker is gone. And
``agentloop replay`` passes over those runs with today's code and fails with
a deliberately incompatible workflow."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from agentloop import AgentClient, AgentSpec
from agentloop.activities.builtin_tools import register_builtin_tools
from agentloop.shared.definition.fingerprint import agent_fingerprint
from agentloop.shared.runs.search_attributes import AGENT_VERSION
from agentloop.testing import call, calls, last_tool_results, reply, script_every_step, step_of
from agentloop.tools.context_providers import context_provider
from agentloop.tools.registry import ToolRegistry
from agentloop.workers.devserver import DevServer
from agentloop.workers.worker import build_worker, connect
from tests.helpers.cli import clean_env, run_temporal
from tests.helpers.paths import ROOT
from tests.helpers.polling import eventually
from tests.helpers.runs import wait_state

#: Drainage and poller history kept short, so a version drains and can be
#: deleted within the test (the defaults are minutes).
FAST_DRAINAGE = {
    "matching.wv.VersionDrainageStatusVisibilityGracePeriod": "\"1s\"",
    "matching.wv.VersionDrainageStatusRefreshInterval": "\"1s\"",
    "matching.PollerHistoryTTL": "\"1s\"",
}


def registry_of(version: int) -> ToolRegistry:
    """The tools and house prompt of worker version ``version``."""
    reg = ToolRegistry()
    register_builtin_tools(reg)

    @reg.tool(read_only=True)
    def lookup(order: str) -> str:
        """Look an order up."""
        return f"{order} found by v{version}"

    if version == 1:
        @reg.tool
        def refund(order: str) -> str:
            """Refund an order."""
            return f"{order} refunded by v1"

    @context_provider(when="run", name="house_prompt", registry=reg)
    def house(request: object) -> str:
        return f"house v{version}"

    return reg


def answer(request):  # noqa: ANN001, ANN201
    """Call the tool the user names, then say which house prompt it saw and what the tools said."""
    results = last_tool_results(request)
    if not results and step_of(request) == 0 and "refund" in request.messages[-1].text:
        return calls(call("refund", {"order": "A-1"}))
    house = ("house v2" if "house v2" in request.system_prompt
             else "house v1" if "house v1" in request.system_prompt else "?")
    said = " | ".join(f"{r.name}:{r.content}" for r in results)
    return reply(f"{house} {said}".strip())


MODEL = script_every_step(answer)


def spec(version: int, **extra: object) -> AgentSpec:
    fields = {"tools": ["lookup", "refund"] if version == 1 else ["lookup"],
              "system_prompt": "You help with orders." if version == 1 else "You help with orders, briefly.",
              "context_providers": ["house_prompt"], "heartbeat_timeout_seconds": 5, **extra}
    return AgentSpec(model=MODEL, **fields)


async def temporal(server: DevServer, *args: str) -> str:
    done = await run_temporal(server, *args)
    assert done.returncode == 0, f"temporal {' '.join(args)}: {done.stdout}{done.stderr}"
    return done.stdout


async def set_current(server: DevServer, deployment: str, build_id: str) -> None:
    # The version exists once its worker has polled: retry until the server knows it.
    async def attempt() -> bool:
        done = await run_temporal(server, "worker", "deployment", "set-current-version", "--deployment-name",
                                  deployment, "--build-id", build_id, "--yes")
        return done.returncode == 0
    await eventually(attempt, f"{build_id} to become current", timeout=30)


async def deployment_of(client: AgentClient, run_id: str) -> tuple[str, str]:
    info = (await client.temporal.get_workflow_handle(run_id).describe()).raw_description.workflow_execution_info
    vi = info.versioning_info
    return vi.deployment_version.build_id, vi.behavior


@pytest.fixture
def server(tmp_path: Path) -> DevServer:
    dev = DevServer(db_file=tmp_path / "temporal.db", log_file=tmp_path / "server.log",
                    dynamic_config=FAST_DRAINAGE).start()
    yield dev
    dev.stop()


async def test_a_deploy_while_runs_wait(server: DevServer, tmp_path: Path) -> None:
    await server.wait_ready()
    temporal_client = await connect(server.address)
    queue, deployment = f"tq-{uuid.uuid4().hex[:8]}", f"support-{uuid.uuid4().hex[:6]}"
    client = AgentClient(temporal_client, task_queue=queue)
    v1 = build_worker(temporal_client, task_queue=queue, registry=registry_of(1), workspace=tmp_path,
                      telemetry=False, deployment=(deployment, "v1"))
    v2 = build_worker(temporal_client, task_queue=queue, registry=registry_of(2), workspace=tmp_path,
                      telemetry=False, deployment=(deployment, "v2"))
    async with v1:
        await set_current(server, deployment, "v1")
        waiting = await client.start(spec(1), "please refund A-1")
        await wait_state(waiting, lambda s: s.status == "awaiting_approval", "the refund to wait for approval")
        thread_id = f"thread-{uuid.uuid4().hex[:6]}"
        first = await client.send(thread_id, "look A-2 up", spec(1, tools=["lookup"]))
        assert (await first.result()).final_text == "house v1"
        assert await deployment_of(client, waiting.run_id) == ("v1", 1)  # VERSIONING_BEHAVIOR_PINNED

        async with v2:
            await set_current(server, deployment, "v2")
            # The waiting run finishes on version 1: its tool (gone from v2) and its house prompt.
            pending = (await waiting.state()).pending_approvals[0]
            await waiting.approve(pending.call_id)
            result = await waiting.result()
            assert result.final_text == "house v1 refund:A-1 refunded by v1"
            assert (await deployment_of(client, waiting.run_id))[0] == "v1"

            # A new run takes version 2, and is found by its definition's fingerprint.
            fresh = await client.start(spec(2), "hello")
            assert (await fresh.result()).final_text == "house v2"
            assert (await deployment_of(client, fresh.run_id))[0] == "v2"
            report = await fresh.report()
            assert report.agent_version == agent_fingerprint(spec(2)) != agent_fingerprint(spec(1))
            found = [w.id async for w in temporal_client.list_workflows(f'AgentVersion="{report.agent_version}"')]
            assert found == [fresh.run_id]
            described = await temporal_client.get_workflow_handle(waiting.run_id).describe()
            assert described.typed_search_attributes.get(AGENT_VERSION) == agent_fingerprint(spec(1))

            # The thread moves to version 2 at its next turn (continue-as-new with auto-upgrade).
            second = await client.send(thread_id, "and now?")
            assert (await second.result()).final_text == "house v2"
            assert (await deployment_of(client, thread_id))[0] == "v2"

            described = await temporal(server, "worker", "deployment", "describe-version", "--deployment-name",
                                       deployment, "--build-id", "v1", "--output", "json")
            assert json.loads(described)["drainageInfo"]["drainageStatus"] in ("draining", "drained")
            # The replay check passes over these runs with today's code.
            env = clean_env(tmp_path, TEMPORAL_ADDRESS=server.address)
            ok = subprocess.run([sys.executable, "-m", "agentloop.cli", "replay", "--last", "10", "--json"],
                                env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
            assert ok.returncode == 0, ok.stdout + ok.stderr
            lines = [json.loads(line) for line in ok.stdout.splitlines()]
            assert {r["run_id"] for r in lines} >= {waiting.run_id, fresh.run_id} and all(r["ok"] for r in lines)
            # ... and reports a deliberately incompatible workflow (exit 1).
            broken = subprocess.run([sys.executable, "-c", INCOMPATIBLE, "replay", "--last", "10"], env=env,
                                    cwd=ROOT, capture_output=True, text=True, timeout=120)
            assert broken.returncode == 1, broken.stdout + broken.stderr
            assert f"{waiting.run_id} (" in broken.stdout and "does not replay" in broken.stdout
            assert "would fail (non-determinism)" in broken.stderr

    # Version 1 has no runs left and no worker: drained, then retired.
    async def drained() -> bool:
        out = await temporal(server, "worker", "deployment", "describe-version", "--deployment-name", deployment,
                             "--build-id", "v1", "--output", "json")
        return json.loads(out)["drainageInfo"]["drainageStatus"] == "drained"
    await eventually(drained, "version 1 to be drained", timeout=60)

    async def deleted() -> bool:
        done = await run_temporal(server, "worker", "deployment", "delete-version", "--deployment-name",
                                  deployment, "--build-id", "v1")
        return done.returncode == 0
    await eventually(deleted, "version 1 to be deleted", timeout=60)
    out = await temporal(server, "worker", "deployment", "describe", "--name", deployment)
    assert "v2" in out and " v1 " not in out


#: ``agentloop replay`` with a workflow whose loop schedules an extra timer
#: first: every recorded run's commands differ from it.
INCOMPATIBLE = """
import sys
from datetime import timedelta
from temporalio import workflow
import agentloop.workflows.agent_run as agent_run
original = agent_run.AgentRunWorkflow._loop
async def _loop(self, spec):
    await workflow.sleep(timedelta(seconds=1))
    return await original(self, spec)
agent_run.AgentRunWorkflow._loop = _loop
from agentloop.cli import main
sys.exit(main(sys.argv[1:]))
"""
