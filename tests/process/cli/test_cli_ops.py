"""The ops commands (`agentloop approve/submit/stop/cancel/list/show`) and
approvals while `agentloop run` follows a run: CLI subprocesses against the
session's dev server, runs started by an in-process worker with scripted
models, and `agentloop run` on its own embedded server.

The scripts registered at import are for `agentloop run --import
tests.process.cli.test_cli_ops` subprocesses."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from agentloop import AgentClient, AgentRunFailed, AgentSpec
from agentloop.shared.definition.activity_io import ToolDefinition
from agentloop.testing import call, calls, script
from tests.helpers.agents import echo_results
from tests.helpers.cli import agentloop_async, clean_env, read_until, start_run, write_script
from tests.helpers.polling import eventually
from tests.helpers.runs import wait_status

# Deciding approvals from another process ------------------------------------------


async def test_show_then_approve_write_file_and_run_completes(
    agent_client: AgentClient, worker, workspace: Path, env: dict[str, str]
) -> None:
    async with worker():
        handle = await agent_client.start(AgentSpec(model=write_script(), tools=["write_file"]), "write it")
        await wait_status(handle, "awaiting_approval")

        show = await agentloop_async("show", handle.run_id, env=env)
        assert show.code == 0, show.err
        assert "status:   awaiting_approval" in show.out and "step:     1 (under way)" in show.out
        assert 'call_0_0  write_file {"file_path": "out.txt", "content": "hello\\n"}' in show.out
        assert "why: 'write_file' can change things; approval required" in show.out
        assert f"    agentloop approve {handle.run_id} call_0_0\n" in show.out
        assert f"agentloop approve {handle.run_id} call_0_0 --deny --reason" in show.out
        shown = json.loads((await agentloop_async("show", handle.run_id, "--json", env=env)).out)
        assert shown["status"] == "awaiting_approval"
        assert [a["call_id"] for a in shown["pending_approvals"]] == ["call_0_0"]

        unknown = await agentloop_async("approve", handle.run_id, "unknown-id", env=env)
        assert unknown.code == 1
        assert "no call 'unknown-id' waits for approval" in unknown.err
        assert "waiting now: call_0_0" in unknown.err

        approved = await agentloop_async("approve", handle.run_id, "call_0_0", "--by", "alice", env=env)
        assert approved.code == 0, approved.err
        assert approved.out == (f"approved call_0_0 in run {handle.run_id}; nothing else is pending; "
                                "the run goes on\n")
        result = await handle.result()

        again = await agentloop_async("approve", handle.run_id, "call_0_0", env=env)
        done = await agentloop_async("show", handle.run_id, env=env)
    assert result.status == "completed"
    assert (workspace / "out.txt").read_text() == "hello\n"
    (tool_report,) = result.report.steps[0].tool_calls
    assert (tool_report.decision, tool_report.decided_by) == ("approve", "alice")
    assert again.code == 1
    assert again.err == f"agentloop: run {handle.run_id} has ended (completed); it takes no decisions any more\n"
    assert done.code == 0 and "status:   completed" in done.out
    assert done.out.endswith(f"final text:\n{result.final_text}\n")


async def test_deny_with_reason_reaches_the_model(
    agent_client: AgentClient, worker, workspace: Path, env: dict[str, str]
) -> None:
    async with worker():
        handle = await agent_client.start(AgentSpec(model=write_script(), tools=["write_file"]), "write it")
        await wait_status(handle, "awaiting_approval")
        denied = await agentloop_async("approve", handle.run_id, "call_0_0", "--deny", "--reason", "not on Fridays",
                                 env=env)
        assert denied.code == 0, denied.err
        assert denied.out == (f"denied call_0_0 in run {handle.run_id} (not on Fridays); "
                              "nothing else is pending; the run goes on\n")
        result = await handle.result()
    assert result.status == "completed"
    assert result.final_text.startswith(
        "write_file:ERR The call to 'write_file' was denied: not on Fridays. It did not run."
    )
    assert not (workspace / "out.txt").exists()


async def test_skip_with_result_answers_without_running(
    agent_client: AgentClient, worker, workspace: Path, env: dict[str, str]
) -> None:
    async with worker():
        handle = await agent_client.start(AgentSpec(model=write_script(), tools=["write_file"]), "write it")
        await wait_status(handle, "awaiting_approval")
        skipped = await agentloop_async("approve", handle.run_id, "call_0_0", "--skip", "--result", "already there",
                                  env=env)
        assert skipped.code == 0, skipped.err
        result = await handle.result()
    assert result.final_text == "write_file:already there"
    assert not (workspace / "out.txt").exists()


async def test_approve_usage_errors(env: dict[str, str]) -> None:
    both = await agentloop_async("approve", "r", "c", "--deny", "--skip", env=env)
    assert both.code == 2 and "not allowed with argument" in both.err
    deny_result = await agentloop_async("approve", "r", "c", "--deny", "--result", "x", env=env)
    assert deny_result.code == 2
    assert deny_result.err.startswith("agentloop: --deny takes --reason, not --result; ")


async def test_unknown_run_id_exits_1(env: dict[str, str]) -> None:
    for args in (["approve", "no-such-run", "call_0_0"], ["show", "no-such-run"], ["stop", "no-such-run"]):
        proc = await agentloop_async(*args, env=env)
        assert proc.code == 1, args
        assert proc.err == ("agentloop: no run 'no-such-run' in namespace 'default'; "
                            "`agentloop list` shows the runs there\n")


# Finding runs ----------------------------------------------------------------------


async def test_list_finds_runs_waiting_for_approval(
    agent_client: AgentClient, worker, env: dict[str, str], task_queue: str
) -> None:
    name = f"lister-{task_queue}"
    async with worker():
        handle = await agent_client.start(
            AgentSpec(model=write_script(), tools=["write_file"], name=name), "write it"
        )
        await wait_status(handle, "awaiting_approval")

        async def listed() -> list[dict[str, Any]] | None:
            proc = await agentloop_async("list", "--status", "awaiting_approval", "--name", name, "--json", env=env)
            assert proc.code == 0, proc.err
            runs = [json.loads(line) for line in proc.out.splitlines()]
            return runs if runs and runs[0]["pending_tools"] else None

        (run,) = await eventually(listed, "the run in `agentloop list`")  # visibility lags a little
        table = await agentloop_async("list", "--status", "awaiting_approval", "--name", name, env=env)
        await handle.cancel()
    assert run["run_id"] == handle.run_id
    assert (run["status"], run["agent_name"], run["pending_tools"]) == ("awaiting_approval", name, ["write_file"])
    assert run["model"].startswith("scripted:t")
    header, row = table.out.splitlines()
    assert header.split() == ["RUN", "ID", "STATUS", "AGENT", "MODEL", "PENDING", "TOOLS", "STARTED"]
    assert row.split()[:5] == [handle.run_id, "awaiting_approval", name, run["model"], "write_file"]


async def test_list_with_a_bad_query_is_a_usage_error(env: dict[str, str]) -> None:
    proc = await agentloop_async("list", "--query", "NoSuchAttribute = ", env=env)
    assert proc.code == 2
    assert proc.err.startswith("agentloop: the server rejected the query ")


# Client tools, stop and cancel -------------------------------------------------------


async def test_submit_answers_a_client_tool(
    agent_client: AgentClient, worker, env: dict[str, str]
) -> None:
    lookup = ToolDefinition(name="lookup", parameters={
        "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"],
    })
    model = script(calls(call("lookup", {"query": "apples"})), echo_results)
    async with worker():
        handle = await agent_client.start(AgentSpec(model=model, client_tools=[lookup]), "how many apples?")
        await wait_status(handle, "requires_action")
        show = await agentloop_async("show", handle.run_id, env=env)
        assert 'call_0_0  lookup {"query": "apples"}' in show.out
        assert f"agentloop submit {handle.run_id} call_0_0 OUTPUT" in show.out

        wrong = await agentloop_async("submit", handle.run_id, "call_9_9", "x", env=env)
        assert wrong.code == 1 and "waiting now: call_0_0" in wrong.err
        submitted = await agentloop_async("submit", handle.run_id, "call_0_0", "-", env=env, stdin="42 apples\n")
        assert submitted.code == 0, submitted.err
        assert submitted.out.startswith("submitted output for call_0_0 in run ")
        result = await handle.result()
    assert result.final_text == "lookup:42 apples\n"
    assert result.report.steps[0].tool_calls[0].decision == "client"


async def test_stop_ends_a_run_waiting_for_approval_as_stopped(
    agent_client: AgentClient, worker, workspace: Path, env: dict[str, str]
) -> None:
    async with worker():
        handle = await agent_client.start(AgentSpec(model=write_script(), tools=["write_file"]), "write it")
        await wait_status(handle, "awaiting_approval")
        stopped = await agentloop_async("stop", handle.run_id, "--reason", "enough for today", env=env)
        assert stopped.code == 0, stopped.err
        result = await handle.result()
        show = await agentloop_async("show", handle.run_id, env=env)
    assert (result.status, result.reason, result.error) == ("stopped", "stopped", "stopped: enough for today")
    assert not (workspace / "out.txt").exists()
    assert "status:   stopped\n" in show.out and "error:    stopped: enough for today" in show.out


async def test_cancel_ends_the_run_cancelled(
    agent_client: AgentClient, worker, env: dict[str, str]
) -> None:
    async with worker():
        handle = await agent_client.start(AgentSpec(model=write_script(), tools=["write_file"]), "write it")
        await wait_status(handle, "awaiting_approval")
        cancelled = await agentloop_async("cancel", handle.run_id, env=env)
        assert cancelled.code == 0, cancelled.err
        with pytest.raises(AgentRunFailed) as info:
            await handle.result()
        show = await agentloop_async("show", handle.run_id, "--json", env=env)
        again = await agentloop_async("cancel", handle.run_id, env=env)
    assert info.value.reason == "cancelled"
    assert json.loads(show.out)["status"] == "cancelled"
    assert again.code == 1 and "has ended (cancelled)" in again.err


async def test_cancel_and_stop_without_a_worker_say_so_and_terminate_ends_the_run(
    agent_client: AgentClient, worker, task_queue: str, env: dict[str, str]
) -> None:
    from temporalio.client import WorkflowExecutionStatus

    async with worker():
        handle = await agent_client.start(AgentSpec(model=write_script(), tools=["write_file"]), "write it")
        await wait_status(handle, "awaiting_approval")
    # No worker polls the run's task queue any more: the requests are recorded, nothing happens.
    stop = await agentloop_async("stop", handle.run_id, env=env)
    cancel = await agentloop_async("cancel", handle.run_id, env=env)
    for request, done in (("stop request", stop), ("cancellation", cancel)):
        assert done.code == 1, done.err
        assert done.out == ""
        assert done.err.startswith(f"agentloop: the {request} of run {handle.run_id} is recorded on the server, "
                                   f"but no worker on task queue {task_queue!r} picked it up within 5s"), done.err
        assert f"`agentloop cancel {handle.run_id} --terminate`" in done.err
        assert f"`temporal workflow terminate --workflow-id {handle.run_id}`" in done.err
    assert (await handle.workflow_handle.describe()).status == WorkflowExecutionStatus.RUNNING
    terminated = await agentloop_async("cancel", handle.run_id, "--terminate", env=env)
    assert terminated.code == 0, terminated.err
    assert terminated.out.startswith(f"terminated run {handle.run_id}: it ended at once on the server")
    assert (await handle.workflow_handle.describe()).status == WorkflowExecutionStatus.TERMINATED


# Finding the server ------------------------------------------------------------------


async def test_ops_command_without_a_server_is_a_usage_error(tmp_path: Path) -> None:
    proc = await agentloop_async("list", env=clean_env(tmp_path))
    assert proc.code == 2
    assert proc.err.startswith("agentloop: no Temporal server to talk to: TEMPORAL_ADDRESS is unset")
    assert "set TEMPORAL_ADDRESS" in proc.err and "`agentloop dev`" in proc.err


async def test_run_on_embedded_server_waits_for_approve_from_another_terminal(
    tmp_path: Path, workspace: Path
) -> None:
    env = clean_env(tmp_path)  # no TEMPORAL_ADDRESS: `run` starts the embedded server
    address_file = tmp_path / "home" / "server.address"
    run = await start_run("write it", "scripted:cli-ops-write", workspace, env, "--run-id", "embedded-1")
    try:
        assert run.stdout is not None and run.stderr is not None
        shown = await read_until(run.stdout, "  deny:    ")
        assert "[step 1] tool call write_file" in shown
        assert ('[step 1] approval needed: write_file {"file_path": "out.txt", "content": "hello\\n"} '
                "(call call_0_0)") in shown
        assert "  approve: agentloop approve embedded-1 call_0_0" in shown
        assert address_file.read_text().strip().startswith("127.0.0.1:")

        # Another terminal: same AGENTLOOP_HOME, no TEMPORAL_ADDRESS.
        approved = await agentloop_async("approve", "embedded-1", "call_0_0", env=env)
        assert approved.code == 0, approved.err
        out, err = await asyncio.wait_for(run.communicate(), 60)
    finally:
        if run.returncode is None:
            run.kill()
            await run.wait()
    assert run.returncode == 0, err.decode()
    assert "\nwrite_file:Wrote 6 bytes to out.txt\n" in out.decode()
    assert (workspace / "out.txt").read_text() == "hello\n"
    assert not address_file.exists()  # removed with the server
    # With the server gone, a command that acts finds none; one that reads starts it again, as `show` does.
    after = await agentloop_async("approve", "embedded-1", "call_0_0", env=env)
    assert after.code == 2 and "does not exist" in after.err
    listed = await agentloop_async("list", env=env)
    assert listed.code == 0 and "embedded-1  completed" in listed.out, listed.err
    assert not address_file.exists()


# `agentloop run` and approvals --------------------------------------------------------


@pytest.mark.parametrize("flags", [["--allow", "write_file"], ["--yes"]])
async def test_run_with_allow_or_yes_does_not_wait(
    tmp_path: Path, workspace: Path, env: dict[str, str], flags: list[str]
) -> None:
    proc = await agentloop_async(
        "run", "write it", "--model", "scripted:cli-ops-write", "--workspace", str(workspace),
        "--tool", "write_file", "--local-worker", "--import", "tests.helpers.cli", *flags, env=env,
    )
    assert proc.code == 0, proc.err
    assert "approval needed" not in proc.out
    assert "\nwrite_file:Wrote 6 bytes to out.txt\n" in proc.out
    assert (workspace / "out.txt").read_text() == "hello\n"


async def test_run_asks_on_a_terminal_and_sends_the_answers(
    workspace: Path, env: dict[str, str]
) -> None:
    master, slave = pty.openpty()
    run = await start_run("write both", "scripted:cli-ops-write-two", workspace, env, "--tool", "write_file",
                          "--local-worker", "--run-id", f"tty-{uuid.uuid4().hex[:8]}", stdin=slave)
    os.close(slave)
    try:
        assert run.stderr is not None
        prompt = await read_until(run.stderr, "[y]es/[n]o/[s]kip: ")
        assert 'approve write_file {"file_path": "a.txt", "content": "a\\n"}? [y]es/[n]o/[s]kip: ' in prompt
        os.write(master, b"y\n")
        prompt = await read_until(run.stderr, "[y]es/[n]o/[s]kip: ")
        assert '"file_path": "b.txt"' in prompt
        os.write(master, b"n\n")
        await read_until(run.stderr, "reason, told to the model (Enter for none): ")
        os.write(master, b"only a.txt, please\n")
        out, err = await asyncio.wait_for(run.communicate(), 60)
    finally:
        if run.returncode is None:
            run.kill()
            await run.wait()
        os.close(master)
    assert run.returncode == 0, err.decode()
    text = out.decode()
    assert "  approved call_0_0" in text and "  denied call_0_1" in text
    assert "write_file:ERR The call to 'write_file' was denied: only a.txt, please." in text
    assert (workspace / "a.txt").exists() and not (workspace / "b.txt").exists()


async def test_run_that_is_stopped_prints_its_text_and_exits_0(workspace: Path, env: dict[str, str]) -> None:
    run_id = f"stop-{uuid.uuid4().hex[:8]}"
    run = await start_run("write it", "scripted:cli-ops-write", workspace, env, "--tool", "write_file",
                          "--local-worker", "--run-id", run_id)
    try:
        assert run.stdout is not None
        await read_until(run.stdout, "  deny:    ")
        stopped = await agentloop_async("stop", run_id, "--reason", "changed my mind", env=env)
        assert stopped.code == 0, stopped.err
        out, err = await asyncio.wait_for(run.communicate(), 60)
    finally:
        if run.returncode is None:
            run.kill()
            await run.wait()
    assert run.returncode == 0, err.decode()
    assert f"run {run_id} stopped on request (stopped: changed my mind)" in err.decode()


async def test_run_that_is_cancelled_exits_1(workspace: Path, env: dict[str, str]) -> None:
    run_id = f"cancel-{uuid.uuid4().hex[:8]}"
    run = await start_run("write it", "scripted:cli-ops-write", workspace, env, "--tool", "write_file",
                          "--local-worker", "--run-id", run_id)
    try:
        assert run.stdout is not None
        await read_until(run.stdout, "  deny:    ")
        cancelled = await agentloop_async("cancel", run_id, env=env)
        assert cancelled.code == 0, cancelled.err
        _, err = await asyncio.wait_for(run.communicate(), 60)
    finally:
        if run.returncode is None:
            run.kill()
            await run.wait()
    assert run.returncode == 1
    assert f"run {run_id} was cancelled" in err.decode()


async def test_show_a_cancelled_run_gives_its_steps_and_usage(
    agent_client: AgentClient, worker, env: dict[str, str]
) -> None:
    async with worker():
        handle = await agent_client.start(AgentSpec(model=write_script(), tools=["write_file"]), "write it")
        await wait_status(handle, "awaiting_approval")
        await handle.cancel()
        with pytest.raises(AgentRunFailed):
            await handle.result()
        state = await handle.state()  # what the run knows, read by query
        show = await agentloop_async("show", handle.run_id, env=env)
        shown = json.loads((await agentloop_async("show", handle.run_id, "--json", env=env)).out)
    no_worker = await agentloop_async("show", handle.run_id, env=env)
    assert state.usage.requests == 1 and state.usage.input_tokens > 0
    assert show.code == 0, show.err
    assert "status:   cancelled\n" in show.out
    assert re.search(r"\n  time:     LLM [\d.]+ m?s, tools [\d.]+ m?s, waiting for approval \S+ m?s\n",
                     show.out), show.out
    # The state counts the steps finished (0); the step it was cancelled in had its LLM request.
    assert state.step == 0 and "steps:    1\n" in show.out
    assert (f"usage:    {state.usage.input_tokens} in / {state.usage.output_tokens} out tokens, 1 LLM request\n"
            in show.out)
    # `show --json` is the API's state: the step it was cancelled in is taken, not finished.
    assert state.steps_taken == 1 and state.current_step is None
    assert (shown["status"], shown["step"], shown["steps_taken"], shown["usage"]) == (
        "cancelled", 0, 1, state.usage.model_dump(mode="json"))
    # Without a worker nothing can read them: say so instead of showing zeros.
    assert no_worker.code == 0, no_worker.err
    assert "steps:    ? (steps and usage unknown: a cancelled run keeps them in its workflow state" in no_worker.out
    assert "usage:" not in no_worker.out
