"""Export, restore and fork (README "Conversations"): the pure helpers of
agentloop.shared.runs.snapshots without a server, then runs on the session's real dev
server with scripted models, then the CLI commands as subprocesses."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path

import pytest

from agentloop import AgentClient, AgentSpec
from agentloop.activities.builtin_tools import register_builtin_tools
from agentloop.shared.base.errors import UserError
from agentloop.shared.base.messages import Message
from agentloop.shared.definition.activity_io import ModelRequest
from agentloop.shared.runs.snapshots import SNAPSHOT_VERSION, SnapshotError, load_snapshot
from agentloop.testing import call, calls, reply, script, script_every_step, step_of
from agentloop.tools.registry import ToolRegistry
from tests.helpers.agents import awaiting, echo_results, write
from tests.helpers.cli import agentloop_async
from tests.helpers.runs import wait_state

# Pure helpers, no server ----------------------------------------------------------------


# Runs on the dev server ----------------------------------------------------------------


async def test_export_then_restore_with_a_pending_approval_decided_after(
    agent_client: AgentClient, worker, workspace: Path
) -> None:
    model = script(calls(write("out.txt", "restored")), echo_results)
    spec = AgentSpec(model=model, tools=["write_file", "read_file"], heartbeat_timeout_seconds=5)
    async with worker():
        original = await agent_client.start(spec, "write out.txt")
        await wait_state(original, awaiting(), "the write to wait for approval")
        snapshot = await original.export()
        await original.cancel()
        assert snapshot.format == "agentloop.snapshot" and snapshot.version == SNAPSHOT_VERSION
        assert snapshot.run_id == original.run_id and snapshot.status == "awaiting_approval"
        assert [a.call_id for a in snapshot.pending_approvals] == ["call_0_0"]
        assert snapshot.pending_step is not None and snapshot.tools == ["write_file", "read_file"]
        assert [m.role for m in snapshot.messages] == ["user", "assistant"]
        # Through JSON, as `agentloop export > run.json` then `start --from` would.
        restored = await agent_client.restore(snapshot.to_json())
        state = await wait_state(restored, awaiting(), "the restored run to wait again")
        assert [a.call_id for a in state.pending_approvals] == ["call_0_0"]
        assert not (workspace / "out.txt").exists()
        await restored.approve("call_0_0", by="alice")
        result = await restored.result()
        # The original was cancelled: the decision went to the new run only.
        assert (await original.state()).status == "cancelled"
    assert result.status == "completed" and result.final_text.startswith("write_file:")
    assert (workspace / "out.txt").read_text() == "restored"
    assert result.report.origin.kind == "restored" and result.report.origin.from_run == original.run_id
    assert result.warnings == [] and result.report.steps[0].tool_calls[0].decided_by == "alice"
    assert [m.role for m in result.messages] == ["tool", "assistant"]  # what the restored run added


async def test_restore_with_a_tool_removed_warns_in_result_and_events(
    agent_client: AgentClient, worker, registry: ToolRegistry, workspace: Path
) -> None:
    @registry.tool(read_only=True)
    async def lookup_order(order_id: str) -> str:
        """Look an order up."""
        return f"order {order_id}: shipped"

    model = script(calls(call("lookup_order", {"order_id": "7"})), echo_results, reply("after restore"))
    spec = AgentSpec(model=model, tools=["lookup_order", "read_file"])
    async with worker():
        first = await agent_client.start(spec, "look it up")
        done = await first.result()
        assert done.final_text == "lookup_order:order 7: shipped"
        snapshot = await first.export()
    assert snapshot.status == "completed" and snapshot.tools == ["lookup_order", "read_file"]
    bare = ToolRegistry()
    register_builtin_tools(bare)
    async with worker(registry=bare):
        restored = await agent_client.restore(snapshot, spec.model_copy(update={"tools": [
            "lookup_order", "read_file", "list_dir"]}), message="and now?")
        result = await restored.result()
        events = [e async for e in restored.events()]
    assert result.status == "completed" and result.final_text == "after restore"
    assert [(w.type, w.tool) for w in result.warnings] == [("tool_removed", "lookup_order"),
                                                          ("tool_added", "list_dir")]
    assert result.report.warnings == result.warnings
    changes = [(e.type, e.tool) for e in events if e.type in ("agent.run.tool_removed", "agent.run.tool_added")]
    assert changes == [("agent.run.tool_removed", "lookup_order"), ("agent.run.tool_added", "list_dir")]


async def test_fork_at_step_1_of_a_3_step_run(agent_client: AgentClient, worker, temporal_client) -> None:
    requests: list[tuple[str, list[Message]]] = []

    def answer(request: ModelRequest):
        requests.append((request.messages[0].text, list(request.messages)))
        step = step_of(request)
        return calls(call("list_dir", {"path": "."})) if step < 2 else reply(f"done after {step} steps")

    spec = AgentSpec(model=script_every_step(answer), tools=["list_dir"], default_permission="allow")
    async with worker():
        original = await agent_client.start(spec, "explore")
        result = await original.result()
        assert result.final_text == "done after 2 steps"
        conversation = await original.messages()
        snapshot = await original.export()
        assert snapshot.status == "completed" and snapshot.step_ends == {1: 3, 2: 5, 3: 6}
        assert len(snapshot.messages) == 6 and snapshot.report.step_count == 3
        requests.clear()
        fork = await agent_client.fork(original.run_id, 1, "look somewhere else")
        forked = await fork.result()
    # The fork's first request: the conversation through step 1, then the message.
    assert requests[0][1] == [*conversation[:3], Message.user("look somewhere else")]
    assert forked.status == "completed" and forked.report.origin.model_dump() == {
        "kind": "forked", "from_run": original.run_id, "at_step": 1}
    assert forked.report.steps[0].index == 0  # a fork counts its own steps
    found = []
    deadline = time.monotonic() + 15
    while not found and time.monotonic() < deadline:
        found = await agent_client.list_runs(query=f'AgentForkedFrom="{original.run_id}"')
        await asyncio.sleep(0.1)
    assert [r.run_id for r in found] == [fork.run_id]


async def test_fork_out_of_range_and_unknown_run(agent_client: AgentClient, worker) -> None:
    spec = AgentSpec(model=script(reply("only one step")))
    async with worker():
        run = await agent_client.start(spec, "hi")
        await run.result()
        with pytest.raises(SnapshotError,
                           match="cannot be forked at step 2: the run has finished 1 step; fork at step 1"):
            await agent_client.fork(run.run_id, 2)
        with pytest.raises(UserError, match="no run run-never-started"):
            await agent_client.fork("run-never-started", 1)


async def test_export_of_a_continued_as_new_run_waiting_for_approval(
    agent_client: AgentClient, worker, workspace: Path
) -> None:
    model = script(calls(call("list_dir", {"path": "."})), calls(write("f.txt", "f")), calls(write("g.txt", "g")),
                   reply("done"))
    spec = AgentSpec(model=model, tools=["list_dir", "write_file"], continue_as_new_every_steps=1,
                     permissions=[{"tool": "write_file", "action": "ask", "arguments": {"file_path": "g.txt"}},
                                  {"tool": "*", "action": "allow"}])
    async with worker():
        handle = await agent_client.start(spec, "go")
        await wait_state(handle, awaiting(), "the second write to wait")
        snapshot = await handle.export()
        assert snapshot.report.step_count >= 3
        assert [a.call_id for a in snapshot.pending_approvals] == ["call_2_0"]
        assert [m.role for m in snapshot.messages] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
        assert snapshot.step_ends == {1: 3, 2: 5}
        runs = [w async for w in agent_client.temporal.list_workflows(f'WorkflowId="{handle.run_id}"')]
        assert len(runs) >= 2  # it did continue as new
        await handle.approve("call_2_0")
        assert (await handle.result()).final_text == "done"
        final = await handle.export()
    assert final.status == "completed" and final.pending_approvals == [] and final.pending_step is None
    assert final.step_ends == {1: 3, 2: 5, 3: 7, 4: 8}


async def test_a_restored_thread_waits_for_its_next_message_and_its_fork_is_a_thread(
    agent_client: AgentClient, worker
) -> None:
    asked: list[list[str]] = []

    def answer(request: ModelRequest):
        asked.append([m.text for m in request.messages if m.role == "user"])
        return reply(f"answer {len(asked)}")

    thread = f"thread-{uuid.uuid4().hex[:8]}"
    async with worker():
        first = await agent_client.start(AgentSpec(model=script_every_step(answer)), "one", thread_id=thread)
        assert (await first.result()).final_text == "answer 1"
        snapshot = await first.export()
        assert (snapshot.thread_id, snapshot.turn, snapshot.step_ends) == (thread, 1, {1: 2})

        copy = await agent_client.restore(snapshot, run_id=f"{thread}-copy")
        state = await wait_state(copy, lambda s: s.thread_id == copy.run_id and not s.busy, "the copy to wait")
        assert state.turn == 1 and len(asked) == 1  # restored idle: the model was not asked again
        second = await agent_client.send(copy.run_id, "two")
        assert (await second.result()).final_text == "answer 2" and asked[-1] == ["one", "two"]

        fork = await agent_client.fork(copy.run_id, 1, "other")
        assert fork.turn == 1 and (await fork.result()).final_text == "answer 3" and asked[-1] == ["one", "other"]
        more = await agent_client.send(fork.run_id, "more")
        assert (await more.result()).final_text == "answer 4" and asked[-1] == ["one", "other", "more"]
        for run in (first, copy, fork):
            await run.cancel()


async def test_restore_refuses_another_major_version(agent_client: AgentClient, worker) -> None:
    async with worker():
        run = await agent_client.start(AgentSpec(model=script(reply("hi"))), "hi")
        await run.result()
        data = json.loads((await run.export()).to_json())
    data["version"] = "2.0"
    with pytest.raises(SnapshotError, match="snapshot version 2.0, from a newer agentloop"):
        await agent_client.restore(data)


# The CLI -------------------------------------------------------------------------------------


async def test_cli_export_start_and_fork(agent_client: AgentClient, worker, workspace: Path, tmp_path: Path,
                                         env: dict[str, str]) -> None:
    model = script(calls(call("list_dir", {"path": "."})), calls(write("cli.txt", "c")), echo_results)
    spec = AgentSpec(model=model, tools=["list_dir", "write_file"])
    async with worker():
        handle = await agent_client.start(spec, "cli")
        await wait_state(handle, awaiting(), "the write")
        exported = await agentloop_async("export", handle.run_id, env=env)
        assert exported.code == 0, exported.err
        file = tmp_path / "run.json"
        file.write_text(exported.out)
        assert load_snapshot(exported.out).pending_approvals[0].call_id == "call_1_0"
        await handle.cancel()

        started = await agentloop_async("start", "--from", str(file), "--run-id", f"{handle.run_id}-restored",
                                        "--detach", env=env)
        assert started.code == 0, started.err
        assert "; agent definition unchanged (" in started.out
        assert started.out.startswith(f"started run {handle.run_id}-restored from the snapshot of run "
                                      f"{handle.run_id} (4 messages, 1 steps; waiting again for call_1_0")
        restored = agent_client.get_handle(f"{handle.run_id}-restored")
        await wait_state(restored, awaiting(), "the restored write")
        await restored.approve("call_1_0")
        assert (await restored.result()).status == "completed"
        assert (workspace / "cli.txt").read_text() == "c"

        forked = await agentloop_async("fork", restored.run_id, "--at-step", "1", "--message", "other way",
                                       "--detach", env=env)
        assert forked.code == 0, forked.err
        assert (f"forked from run {restored.run_id} at the end of step 1 (3 messages, then your message; "
                "agent definition unchanged (") in forked.out  # the same spec: the same fingerprint
        fork_id = forked.out.split()[2].rstrip(",")
        messages = await agent_client.get_handle(fork_id).messages()
        assert messages[-1] == Message.user("other way") and len(messages) >= 4

        # Clear sentences, exit 1 for an unknown run, 2 for bad input.
        unknown = await agentloop_async("export", "run-nobody", env=env)
        assert unknown.code == 1 and "no run 'run-nobody'" in unknown.err and "Traceback" not in unknown.err
        out_of_range = await agentloop_async("fork", restored.run_id, "--at-step", "9", env=env)
        assert out_of_range.code == 2 and "cannot be forked at step 9: the run has finished 3 steps" in out_of_range.err
        missing = await agentloop_async("start", "--from", str(tmp_path / "nope.json"), env=env)
        assert missing.code == 2 and "nope.json: no such file" in missing.err
        (tmp_path / "bad.json").write_text("{oops")
        bad = await agentloop_async("start", "--from", str(tmp_path / "bad.json"), env=env)
        assert bad.code == 2 and "is not valid JSON" in bad.err and "Traceback" not in bad.err
        (tmp_path / "v2.json").write_text(json.dumps(json.loads(exported.out) | {"version": "2.0"}))
        v2 = await agentloop_async("start", "--from", str(tmp_path / "v2.json"), env=env)
        assert v2.code == 2 and "is snapshot version 2.0, from a newer agentloop" in v2.err


async def test_a_completed_run_restores_completed_unless_given_a_message(agent_client: AgentClient, worker) -> None:
    from tests.helpers.agents import recording, user_texts

    model, seen = recording(lambda r: reply(f"answer to {user_texts(r)[-1]}"))
    async with worker():
        run = await agent_client.start(AgentSpec(model=model), "first question")
        assert (await run.result()).final_text == "answer to first question"
        snapshot = await run.export()
        assert len(seen) == 1
        # No new message: the restored run is completed at once, with the
        # snapshot's answer, and asks the model nothing.
        restored = await agent_client.restore(snapshot)
        result = await restored.result()
        assert (result.status, result.final_text, len(seen)) == ("completed", "answer to first question", 1)
        assert result.report.origin.kind == "restored" and result.usage == snapshot.usage
        # With one: it goes on, and answers it.
        asked = await agent_client.restore(snapshot, message="second question")
        result = await asked.result()
        assert (result.status, result.final_text, len(seen)) == ("completed", "answer to second question", 2)


async def test_cli_start_and_fork_follow_the_new_run_unless_detached(
    agent_client: AgentClient, worker, tmp_path: Path, env: dict[str, str]
) -> None:
    model = script(calls(call("list_dir", {"path": "."}), text="Looking."), reply("Done looking."))
    async with worker():
        handle = await agent_client.start(AgentSpec(model=model, tools=["list_dir"]), "look")
        await handle.result()
        exported = await agentloop_async("export", handle.run_id, env=env)
        file = tmp_path / "run.json"
        file.write_text(exported.out)

        # A fork from step 1 (the model's next step gives the answer) is followed until it ends, as `run` does.
        forked = await agentloop_async("fork", handle.run_id, "--at-step", "1", "--run-id", f"{handle.run_id}-f",
                                       env=env)
        assert forked.code == 0, forked.err
        assert f"started run {handle.run_id}-f, forked from run {handle.run_id} at the end of step 1" in forked.err
        assert forked.out.endswith("Done looking.\n")
        assert "[1 step, 0 tool calls" in forked.err
        # A restore is followed to its end: a completed run's snapshot, with no
        # new message, restores completed at once, with the snapshot's answer.
        started = await agentloop_async("start", "--from", str(file), "--run-id", f"{handle.run_id}-r", env=env)
        assert started.code == 0, started.err
        assert started.out.endswith("Done looking.\n")
        assert started.err.startswith(f"started run {handle.run_id}-r from the snapshot of run {handle.run_id}")
        # --detach: the id, and return.
        detached = await agentloop_async("fork", handle.run_id, "--at-step", "1", "--detach", env=env)
        assert detached.code == 0, detached.err
        assert detached.out.startswith("started run ") and "follow it with `agentloop watch" in detached.out
