"""The plain ``temporal`` CLI as a client of agent runs: what an operator
types must work (signal and update with JSON input, list by search
attribute, query, cancel)."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest

from agentloop import AgentClient, AgentRunFailed, AgentSpec, DecisionRejected
from agentloop.shared.base.errors import INVALID_DECISION_ERROR_TYPE, INVALID_REQUEST_ERROR_TYPE
from agentloop.shared.definition.approvals import MAX_REASON_CHARS
from agentloop.testing import calls, reply, script
from agentloop.workers.devserver import DevServer
from tests.helpers.agents import awaiting, echo_results, write
from tests.helpers.cli import run_temporal
from tests.helpers.polling import eventually
from tests.helpers.runs import task_failures, wait_for_end, wait_state


async def test_operator_session_with_the_temporal_cli(
    agent_client: AgentClient, worker, workspace: Path, dev_server: DevServer
) -> None:
    model = script(calls(write("a.txt", "A"), write("b.txt", "B")), echo_results)
    name = f"ops-{uuid.uuid4().hex[:6]}"
    async with worker():
        handle = await agent_client.start(AgentSpec(model=model, name=name, tools=["write_file"]), "write two files")
        run = handle.run_id
        await wait_state(handle, awaiting(2), "two approvals")

        # Find it the way ops would.
        query = f'AgentStatus="awaiting_approval" AND AgentName="{name}"'
        for _ in range(100):
            listed = await run_temporal(dev_server, "workflow", "list", "--query", query, "--output", "json")
            assert listed.returncode == 0, listed.stderr
            found = [w["execution"]["workflowId"] for w in json.loads(listed.stdout or "[]")]
            if found:
                break
            await asyncio.sleep(0.1)
        assert found == [run]

        # What is it waiting for?
        pending = await run_temporal(dev_server, "workflow", "query", "--workflow-id", run, "--name", "pending",
                                     "--output", "json")
        assert pending.returncode == 0, pending.stderr
        approvals = json.loads(pending.stdout)["queryResult"][0]["approvals"]
        assert [(a["call_id"], a["tool_name"], a["arguments"]["file_path"]) for a in approvals] == [
            ("call_0_0", "write_file", "a.txt"), ("call_0_1", "write_file", "b.txt"),
        ]

        # A typo in the call id: the update is rejected with the reason, nothing changes.
        typo = await run_temporal(dev_server, "workflow", "update", "execute", "--workflow-id", run,
                                  "--name", "approve", "--input", '{"call_id": "call_0_9", "decision": "approve"}')
        assert typo.returncode != 0
        assert "no call 'call_0_9' waits for approval" in typo.stdout + typo.stderr
        assert "waiting now: call_0_0, call_0_1" in typo.stdout + typo.stderr

        # Deny one by update (answers), approve the other by signal.
        denied = await run_temporal(dev_server, "workflow", "update", "execute", "--workflow-id", run,
                                    "--name", "approve",
                                    "--input", '{"call_id": "call_0_0", "decision": "deny", "reason": "no"}',
                                    "--output", "json")
        assert denied.returncode == 0, denied.stderr
        assert json.loads(denied.stdout)["result"] == {"call_ids": ["call_0_0"], "still_pending": ["call_0_1"]}
        signalled = await run_temporal(dev_server, "workflow", "signal", "--workflow-id", run, "--name", "approve",
                                       "--input", '{"call_id": "call_0_1", "decision": "approve"}')
        assert signalled.returncode == 0, signalled.stderr
        result = await handle.result()
    assert result.status == "completed"
    assert not (workspace / "a.txt").exists() and (workspace / "b.txt").read_text() == "B"
    assert "write_file:ERR The call to 'write_file' was denied: no." in result.final_text

    listed = await run_temporal(dev_server, "workflow", "list", "--query",
                                f'AgentStatus="completed" AND AgentName="{name}"', "--output", "json")
    for _ in range(100):
        if run in listed.stdout:
            break
        await asyncio.sleep(0.1)
        listed = await run_temporal(dev_server, "workflow", "list", "--query",
                                    f'AgentStatus="completed" AND AgentName="{name}"', "--output", "json")
    assert run in listed.stdout


async def test_cancel_and_stop_from_the_temporal_cli(
    agent_client: AgentClient, worker, dev_server: DevServer
) -> None:
    async with worker():
        cancelled = await agent_client.start(
            AgentSpec(model=script(calls(write("x.txt")), reply("x")), tools=["write_file"]), "write"
        )
        stopped = await agent_client.start(
            AgentSpec(model=script(calls(write("y.txt")), reply("y")), tools=["write_file"]), "write"
        )
        await wait_state(cancelled, awaiting(), "approval")
        await wait_state(stopped, awaiting(), "approval")

        out = await run_temporal(dev_server, "workflow", "cancel", "--workflow-id", cancelled.run_id)
        assert out.returncode == 0, out.stderr
        try:
            await cancelled.result()
            raise AssertionError("a cancelled run returned a result")
        except AgentRunFailed as failed:
            assert failed.reason == "cancelled"
        assert (await cancelled.state()).status == "cancelled"

        # `stop` takes no input at all, or a reason.
        out = await run_temporal(dev_server, "workflow", "signal", "--workflow-id", stopped.run_id, "--name", "stop")
        assert out.returncode == 0, out.stderr
        result = await stopped.result()
    assert (result.status, result.error) == ("stopped", "stopped by request")


async def test_malformed_signal_from_the_temporal_cli_is_reported_not_fatal(
    agent_client: AgentClient, worker, dev_server: DevServer, workspace: Path
) -> None:
    model = script(calls(write("z.txt", "Z")), echo_results)
    async with worker():
        handle = await agent_client.start(AgentSpec(model=model, tools=["write_file"]), "write")
        await wait_state(handle, awaiting(), "approval")
        out = await run_temporal(dev_server, "workflow", "signal", "--workflow-id", handle.run_id,
                                 "--name", "approve", "--input", '{"callid": "call_0_0"}')
        assert out.returncode == 0  # signals cannot answer: the run notes why it ignored it
        state = await wait_state(handle, lambda s: s.rejected_signals, "the rejection noted")
        assert "call_id: Field required" in state.rejected_signals[0]
        assert state.status == "awaiting_approval"
        out = await run_temporal(dev_server, "workflow", "signal", "--workflow-id", handle.run_id,
                                 "--name", "approve", "--input", '{"call_id": "call_0_0"}')
        assert out.returncode == 0, out.stderr
        result = await handle.result()
    assert (workspace / "z.txt").read_text() == "Z" and result.status == "completed"


async def test_refused_updates_are_not_retryable(
    agent_client: AgentClient, worker, dev_server: DevServer
) -> None:
    model = script(calls(write("a.txt")), echo_results)
    async with worker():
        handle = await agent_client.start(AgentSpec(model=model, tools=["write_file"]), "write")
        await wait_state(handle, awaiting(), "approval")
        refusals = [
            (['{"call_id": "nope"}'], INVALID_DECISION_ERROR_TYPE, "no call 'nope' waits for approval"),
            (['{"call_id": "call_0_0", "decision": "deny", "result": "x"}'], INVALID_DECISION_ERROR_TYPE,
             "a denial takes a reason, not a result"),
            (['{"call_id": "call_0_0", "decision": "yes"}'], INVALID_REQUEST_ERROR_TYPE,
             "malformed approve payload: decision: Input should be 'approve', 'deny' or 'skip'"),
            (['{"call_id": "call_0_0"}', "{}"], INVALID_REQUEST_ERROR_TYPE,
             "approve takes one JSON object, not 2 inputs"),
        ]
        for inputs, error_type, message in refusals:
            args = [arg for value in inputs for arg in ("--input", value)]
            out = await run_temporal(dev_server, "workflow", "update", "execute", "--workflow-id", handle.run_id,
                                     "--name", "approve", *args)
            said = out.stdout + out.stderr
            assert out.returncode != 0 and message in said, said
            assert f"(type: {error_type}, retryable: false)" in said, said
        # The Python client still raises DecisionRejected for the same refusal.
        with pytest.raises(DecisionRejected, match="no call 'nope' waits for approval"):
            await handle.approve("nope")
        await handle.approve("call_0_0")
        result = await handle.result()
    assert result.status == "completed"


async def test_signals_with_two_inputs_are_noted_not_fatal(
    agent_client: AgentClient, worker, dev_server: DevServer
) -> None:
    model = script(calls(write("a.txt")), reply("unreachable"))
    async with worker():
        handle = await agent_client.start(AgentSpec(model=model, tools=["write_file"]), "write")
        await wait_state(handle, awaiting(), "approval")
        out = await run_temporal(dev_server, "workflow", "signal", "--workflow-id", handle.run_id, "--name", "approve",
                                 "--input", '{"call_id": "call_0_0"}', "--input", "{}")
        assert out.returncode == 0, out.stderr
        state = await wait_state(handle, lambda s: s.rejected_signals, "the rejection noted")
        assert state.rejected_signals == [
            ('approve signal ignored: approve takes one JSON object, not 2 inputs; expected e.g. '
             '{"call_id": "call_0_0", "decision": "approve"}')
        ]
        assert state.status == "awaiting_approval"
        # A stop is a stop, however it is typed.
        out = await run_temporal(dev_server, "workflow", "signal", "--workflow-id", handle.run_id, "--name", "stop",
                                 "--input", "{}", "--input", "{}")
        assert out.returncode == 0, out.stderr
        history = await wait_for_end(handle.workflow_handle)
        result = await handle.result()
    assert task_failures(history) == []
    assert result.status == "stopped"


async def test_a_stop_reason_of_a_megabyte_and_a_half_from_a_file(
    agent_client: AgentClient, worker, dev_server: DevServer, tmp_path: Path
) -> None:
    model = script(calls(write("a.txt")), reply("unreachable"))
    reason = tmp_path / "reason.json"
    reason.write_text(json.dumps({"reason": "r" * 1_500_000}))
    async with worker():
        handle = await agent_client.start(AgentSpec(model=model, tools=["write_file"]), "write")
        await wait_state(handle, awaiting(), "approval")
        out = await run_temporal(dev_server, "workflow", "signal", "--workflow-id", handle.run_id, "--name", "stop",
                                 "--input-file", str(reason))
        assert out.returncode == 0, out.stderr
        history = await wait_for_end(handle.workflow_handle)
        assert task_failures(history) == []
        described = await run_temporal(dev_server, "workflow", "describe", "--workflow-id", handle.run_id,
                                       "--output", "json")
        assert json.loads(described.stdout)["workflowExecutionInfo"]["status"] == "WORKFLOW_EXECUTION_STATUS_COMPLETED"
        state = await run_temporal(dev_server, "workflow", "query", "--workflow-id", handle.run_id, "--name", "state",
                                   "--output", "json")
        assert state.returncode == 0, state.stderr
        error = json.loads(state.stdout)["queryResult"][0]["error"]
    assert error.startswith("stopped: rrr") and error.endswith(" characters cut]")
    assert len(error) <= len("stopped: ") + MAX_REASON_CHARS


def big_update(tmp_path: Path, name: str) -> Path:
    """A 2.1 MB request of update ``name``, as a file for ``temporal workflow update execute --input-file``."""
    filler = "r" * 2_100_000
    big = tmp_path / "big.json"
    big.write_text(json.dumps({
        "approve": {"call_id": "call_0_0", "decision": "deny", "reason": filler},
        "steer": {"text": filler},
    }[name]))
    return big


@pytest.mark.parametrize("name", ["approve", "steer"])
async def test_an_update_over_the_payload_limit_is_refused_at_admission_and_the_next_one_is_taken_at_once(
    name: str, agent_client: AgentClient, worker, dev_server: DevServer, tmp_path: Path
) -> None:
    """2.1 MB through `temporal workflow update execute`, on a server with
    ``history.maxInFlightUpdatePayloads`` below the blob limit (as every server
    agentloop starts or ships): the server refuses it when it arrives, so it
    never reaches a workflow task, and a correct update right after is
    accepted with the run's task history clean."""
    assert int(dev_server.dynamic_config["history.maxInFlightUpdatePayloads"]) < 2 * 1024 * 1024
    model = script(calls(write("a.txt")), echo_results)
    big = big_update(tmp_path, name)
    async with worker():
        handle = await agent_client.start(AgentSpec(model=model, tools=["write_file"]), "write")
        await wait_state(handle, awaiting(), "approval")
        # The CLI retries a refused admission until its deadline: give it a short one.
        out = await run_temporal(dev_server, "workflow", "update", "execute", "--workflow-id", handle.run_id,
                                 "--name", name, "--input-file", str(big), "--command-timeout", "5s")
        assert out.returncode != 0, out.stdout + out.stderr
        out = await run_temporal(dev_server, "workflow", "update", "execute", "--workflow-id", handle.run_id,
                                 "--name", "approve", "--input", '{"call_id": "call_0_0"}', "--command-timeout", "20s")
        assert out.returncode == 0, out.stdout + out.stderr
        history = await wait_for_end(handle.workflow_handle)
        result = await handle.result()
    assert task_failures(history) == []
    assert result.status == "completed"


async def test_without_the_admission_limit_an_update_over_the_payload_limit_fails_the_run_s_workflow_task(
    tmp_path: Path,
) -> None:
    """The stall the setting avoids, kept visible so that we learn when
    Temporal fixes it: on a dev server of its own with the server's default
    ``history.maxInFlightUpdatePayloads`` (20 MiB), the same 2.1 MB update is
    admitted, and the SDK's echo of it fails the run's workflow task. When
    this test fails, Temporal no longer needs the setting."""
    from agentloop.activities.builtin_tools import register_builtin_tools
    from agentloop.testing import call
    from agentloop.tools.registry import ToolRegistry
    from agentloop.workers.worker import build_worker, connect

    server = DevServer(db_file=tmp_path / "t.db", log_file=tmp_path / "server.log",
                       dynamic_config={"history.maxInFlightUpdatePayloads": str(20 * 1024 * 1024)}).start()
    try:
        await server.wait_ready()
        client = await connect(server.address)
        queue = f"stall-{uuid.uuid4().hex[:8]}"
        agents = AgentClient(client, task_queue=queue)
        model = script(calls(call("write_file", {"file_path": "a.txt", "content": "x"})), echo_results)
        (tmp_path / "ws").mkdir()
        registry = ToolRegistry()
        register_builtin_tools(registry)
        async with build_worker(client, task_queue=queue, registry=registry, workspace=tmp_path / "ws"):
            handle = await agents.start(AgentSpec(model=model, tools=["write_file"]), "write")
            await wait_state(handle, awaiting(), "approval")
            out = await run_temporal(server, "workflow", "update", "execute", "--workflow-id", handle.run_id,
                                     "--name", "steer", "--input-file", str(big_update(tmp_path, "steer")),
                                     "--command-timeout", "10s")
            assert out.returncode != 0, out.stdout + out.stderr

            async def failed_task() -> list:
                history = await handle.workflow_handle.fetch_history()
                return task_failures(history)

            failures = await eventually(failed_task, "the 2.1 MB update to fail the run's workflow task (if it "
                                        "no longer does, Temporal fixed the stall: drop UPDATE_ADMISSION's reason)",
                                        timeout=60)
            assert failures
            await handle.workflow_handle.terminate("test over")
    finally:
        server.stop()


async def test_a_signal_of_an_unknown_name_is_noted_with_the_known_ones(
    agent_client: AgentClient, worker, dev_server: DevServer
) -> None:
    model = script(calls(write("a.txt")), echo_results)
    async with worker():
        handle = await agent_client.start(AgentSpec(model=model, tools=["write_file"]), "write")
        await wait_state(handle, awaiting(), "approval")
        out = await run_temporal(dev_server, "workflow", "signal", "--workflow-id", handle.run_id,
                                 "--name", "aprove", "--input", '{"call_id": "call_0_0"}')
        assert out.returncode == 0, out.stderr  # a signal cannot answer: the run notes it
        state = await wait_state(handle, lambda s: s.rejected_signals, "the unknown signal noted")
        assert state.rejected_signals == [
            "signal 'aprove' ignored: this run knows no such signal; it takes approve, submit_tool_outputs, stop, "
            "send, steer (send and steer only in threads)"
        ]
        assert state.status == "awaiting_approval"
        await handle.approve("call_0_0")
        history = await wait_for_end(handle.workflow_handle)
        result = await handle.result()
    assert task_failures(history) == [] and result.status == "completed"
