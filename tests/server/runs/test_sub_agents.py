"""Sub-agents as child workflows, on the real dev server with scripted models:
delegation and its answer, parallel delegations, forked history, depth,
failing children, one budget for the tree, cancel and stop, an approval in a
child decided with the temporal CLI, a worker killed while a child runs."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus

from agentloop import AgentClient, AgentRunFailed, AgentSpec, UserError
from agentloop.shared.definition.activity_io import ModelRequest
from agentloop.shared.definition.pricing import Budget
from agentloop.shared.definition.spec import SubAgent
from agentloop.shared.runs.search_attributes import AGENT_PARENT_RUN, AGENT_ROOT_RUN
from agentloop.testing import call, calls, reply, script, script_every_step
from tests.helpers.agents import echo_results
from tests.helpers.cli import agentloop_async, clean_env, run_temporal
from tests.helpers.polling import eventually
from tests.helpers.processes import processes_with_argument, unique_sleep, wait_until_running


def lead(model: str, subs: dict[str, SubAgent], **kw) -> AgentSpec:
    kw.setdefault("heartbeat_timeout_seconds", 5)
    return AgentSpec(model=model, name="lead", sub_agents=subs, **kw)


def helper(model: str, name: str = "helper", **kw) -> SubAgent:
    history = kw.pop("history", "none")
    return SubAgent(spec=AgentSpec(model=model, name=name, heartbeat_timeout_seconds=5, **kw),
                    description=f"The {name}.", history=history)


async def test_delegate_and_read_the_childs_answer(agent_client: AgentClient, worker) -> None:
    seen: list[ModelRequest] = []

    def child_model(request: ModelRequest):
        seen.append(request)
        return reply("Paris is the capital of France.")

    parent_seen: list[ModelRequest] = []

    def first(request: ModelRequest):
        parent_seen.append(request)
        return calls(call("researcher", {"task": "What is the capital of France?"}))

    model = script(first, echo_results)
    spec = lead(model, {"researcher": helper(script(child_model), "researcher")})
    async with worker():
        handle = await agent_client.start(spec, "Find the capital of France.")
        result = await handle.result()
        events = [e async for e in handle.events()]
        child_result = await agent_client.get_handle(f"{handle.run_id}-sub-call_0_0").result()
    child_id = f"{handle.run_id}-sub-call_0_0"
    assert result.status == "completed"
    assert result.final_text == "researcher:Paris is the capital of France."
    # The model saw one tool named after the sub-agent, taking a task.
    (tool,) = parent_seen[0].tools
    assert tool.name == "researcher" and tool.description == "The researcher."
    assert tool.parameters["required"] == ["task"]
    # The child saw only the task.
    assert [m.text for m in seen[0].messages] == ["What is the capital of France?"]
    # The child is its own run, with its own result and report.
    assert child_result.final_text == "Paris is the capital of France."
    # Usage rolls up: the parent's total is its own two steps plus the child's.
    report = result.report
    own = report.steps[0].usage + report.steps[1].usage
    assert report.total_usage == own + child_result.usage
    assert result.usage == report.total_usage
    assert report.steps[0].sub_agent_usage == child_result.usage
    (sub,) = report.sub_runs
    assert (sub.name, sub.run_id, sub.call_id, sub.status, sub.reason) == (
        "researcher", child_id, "call_0_0", "completed", "done")
    assert sub.usage == child_result.usage and sub.cost_usd == 0.0
    assert report.steps[0].tool_calls[0].sub_run_id == child_id
    # Events in the parent's stream carry the child's run id, usage and answer.
    started = next(e for e in events if e.type == "agent.sub_agent.invocation.started")
    completed = next(e for e in events if e.type == "agent.sub_agent.invocation.completed")
    assert (started.child_run_id, started.name, started.task) == (
        child_id, "researcher", "What is the capital of France?")
    assert completed.child_run_id == child_id and completed.status == "completed"
    assert completed.final_text == "Paris is the capital of France." and completed.usage == child_result.usage
    # Search attributes: the child names its parent and root.
    described = await agent_client.temporal.get_workflow_handle(child_id).describe()
    attrs = described.typed_search_attributes
    assert attrs.get(AGENT_PARENT_RUN) == handle.run_id and attrs.get(AGENT_ROOT_RUN) == handle.run_id
    assert described.parent_id == handle.run_id


async def test_two_parallel_delegates_run_at_once(agent_client: AgentClient, worker) -> None:
    # Each child waits until the other has started: only parallel children finish.
    started: set[str] = set()

    def child(name: str):
        async def answer(request: ModelRequest):
            started.add(name)
            for _ in range(600):
                if len(started) == 2:
                    return reply(f"{name} done")
                await asyncio.sleep(0.05)
            return reply(f"{name} ran alone")
        return script(answer)

    model = script(calls(call("alpha", {"task": "a"}), call("beta", {"task": "b"})), echo_results)
    spec = lead(model, {"alpha": helper(child("alpha"), "alpha"), "beta": helper(child("beta"), "beta")})
    async with worker():
        result = await (await agent_client.start(spec, "both")).result()
    assert result.final_text == "alpha:alpha done | beta:beta done"
    assert [s.name for s in result.report.sub_runs] == ["alpha", "beta"]


async def test_a_forked_history_reaches_the_child(agent_client: AgentClient, worker) -> None:
    seen: list[ModelRequest] = []

    def child_model(request: ModelRequest):
        seen.append(request)
        return reply("the number was 7")

    model = script(
        calls(call("list_dir", {"path": "."}), text="Looking first."),
        calls(call("recall", {"task": "Which number did the user give?"})),
        echo_results,
    )
    spec = lead(model, {"recall": helper(script_every_step(child_model), "recall", history="fork")},
                tools=["list_dir"])
    async with worker():
        result = await (await agent_client.start(spec, "Remember the number 7.")).result()
    assert result.final_text == "recall:the number was 7"
    messages = seen[0].messages
    # The parent's conversation (its input, its first step and that step's
    # results), then the task; not the delegating message itself.
    assert [m.role for m in messages] == ["user", "assistant", "tool", "user"]
    assert messages[0].text == "Remember the number 7."
    assert messages[1].tool_calls[0].name == "list_dir"
    assert messages[-1].text == "Which number did the user give?"


def nested(depth: int, model: str, **top) -> AgentSpec:
    spec = AgentSpec(model=model, name=f"level{depth}")
    for level in range(depth - 1, -1, -1):
        spec = AgentSpec(model=model, name=f"level{level}",
                         sub_agents={f"level{level + 1}": SubAgent(spec=spec, description="deeper")},
                         **(top if level == 0 else {}))
    return spec


async def test_nesting_past_max_depth_is_refused_with_a_sentence(agent_client: AgentClient, worker) -> None:
    model = script(reply("x"))
    with pytest.raises(UserError) as info:
        await agent_client.start(nested(4, model), "deep")
    assert str(info.value) == (
        "sub-agents nest 4 levels deep (level0 -> level1 -> level2 -> level3 -> level4), past max_depth=3; "
        "flatten the team or raise AgentSpec.max_depth (at most 10) on the top agent"
    )
    with pytest.raises(UserError, match="past max_depth=1"):
        await agent_client.start(nested(2, model, max_depth=1), "deep")
    # At the limit, a tree of three levels runs: each level delegates once.
    answer = script(calls(call("level1", {"task": "go"})), echo_results)
    middle = script(calls(call("level2", {"task": "go"})), echo_results)
    leaf = script(calls(call("level3", {"task": "go"})), echo_results)
    bottom = script(reply("bottom"))
    spec = AgentSpec(model=answer, name="level0", sub_agents={"level1": SubAgent(spec=AgentSpec(
        model=middle, name="level1", sub_agents={"level2": SubAgent(spec=AgentSpec(
            model=leaf, name="level2",
            sub_agents={"level3": SubAgent(spec=AgentSpec(model=bottom, name="level3"))}))}))})
    async with worker():
        handle = await agent_client.start(spec, "deep")
        result = await handle.result()
    assert result.final_text == "level1:level2:level3:bottom"
    leaf_id = f"{handle.run_id}-sub-call_0_0-sub-call_0_0-sub-call_0_0"
    attrs = (await agent_client.temporal.get_workflow_handle(leaf_id).describe()).typed_search_attributes
    assert attrs.get(AGENT_ROOT_RUN) == handle.run_id
    assert attrs.get(AGENT_PARENT_RUN) == f"{handle.run_id}-sub-call_0_0-sub-call_0_0"


def test_sub_agent_names_are_checked() -> None:
    with pytest.raises(ValueError, match="sub-agent name 'two words' is not allowed"):
        AgentSpec(model="scripted:demo", sub_agents={"two words": SubAgent(spec=AgentSpec(model="scripted:demo"))})
    with pytest.raises(ValueError, match="list_dir is both a sub-agent"):
        AgentSpec(model="scripted:demo", tools=["list_dir"],
                  sub_agents={"list_dir": SubAgent(spec=AgentSpec(model="scripted:demo"))})


async def test_a_failing_child_is_an_error_result_not_a_crashed_parent(agent_client: AgentClient, worker) -> None:
    looping = script(*[calls(call("list_dir", {"path": "."})) for _ in range(3)])
    model = script(calls(call("flaky", {"task": "loop"}), call("flaky", {})), echo_results)
    spec = lead(model, {"flaky": helper(looping, "flaky", tools=["list_dir"], max_steps=2)})
    async with worker():
        handle = await agent_client.start(spec, "try")
        result = await handle.result()
    child_id = f"{handle.run_id}-sub-call_0_0"
    assert result.status == "completed"
    first, second = result.final_text.split(" | ")
    assert first.startswith(
        f"flaky:ERR The sub-agent 'flaky' (run {child_id}) did not finish: max_steps: the run used all 2 steps")
    assert second.startswith("flaky:ERR The call to sub-agent 'flaky' needs one argument, task")
    (sub,) = result.report.sub_runs
    assert (sub.status, sub.reason) == ("failed", "max_steps")
    # The failed child's usage still counts.
    assert sub.usage.requests == 2 and result.report.total_usage.requests == 4


async def test_two_parallel_children_together_exceed_the_parents_budget(agent_client: AgentClient, worker) -> None:
    # Each child's answer costs about 250 output tokens: within what remains
    # of the parent's 400 when it starts, over it together.
    long_answer = "word " * 200
    model = script(calls(call("alpha", {"task": "a"}), call("beta", {"task": "b"})), reply("unreachable"))
    spec = lead(model, {"alpha": helper(script(reply(long_answer)), "alpha"),
                        "beta": helper(script(reply(long_answer)), "beta")},
                budget=Budget(max_output_tokens=400))
    async with worker():
        handle = await agent_client.start(spec, "spend")
        with pytest.raises(AgentRunFailed) as info:
            await handle.result()
        report = await handle.report()
    assert info.value.reason == "cost_limit"
    alpha, beta = report.sub_runs
    assert alpha.status == beta.status == "completed"
    own = report.steps[0].usage.output_tokens
    assert alpha.usage.output_tokens < 400 - own and beta.usage.output_tokens < 400 - own
    assert report.total_usage.output_tokens == own + alpha.usage.output_tokens + beta.usage.output_tokens > 400
    assert str(info.value).endswith(
        f"with its sub-agents, the run used {report.total_usage.output_tokens:,} output tokens, over "
        "AgentSpec.budget.max_output_tokens=400; raise the limit or narrow the task")
    # Each child started with what remained of the parent's budget.
    child = await agent_client.get_handle(alpha.run_id).workflow_handle.describe()
    assert child.status == WorkflowExecutionStatus.COMPLETED


async def test_a_child_over_what_remains_ends_cost_limit_and_so_does_the_parent(
    agent_client: AgentClient, worker
) -> None:
    model = script(calls(call("spender", {"task": "a"})), reply("unreachable"))
    spec = lead(model, {"spender": helper(script(reply("word " * 1000)), "spender")},
                budget=Budget(max_output_tokens=100))
    async with worker():
        handle = await agent_client.start(spec, "spend")
        with pytest.raises(AgentRunFailed) as info:
            await handle.result()
        report = await handle.report()
        (sub,) = report.sub_runs
        child = await agent_client.get_handle(sub.run_id).report()
    assert info.value.reason == "cost_limit"
    assert (sub.status, sub.reason) == ("failed", "cost_limit")
    # The child started with what remained of the parent's budget.
    remaining = 100 - report.steps[0].usage.output_tokens
    assert child.error is not None and f"max_output_tokens={remaining}" in child.error


# Cancel and stop -----------------------------------------------------------------


async def test_cancelling_the_parent_kills_a_childs_shell_command(
    agent_client: AgentClient, worker, workspace: Path
) -> None:
    tag = unique_sleep(300)
    member = script(calls(call("shell_command", {"command": f"exec sleep {tag}", "timeout_seconds": 600})),
                    reply("x"))
    model = script(calls(call("sleeper", {"task": "sleep"})), reply("unreachable"))
    spec = lead(model, {"sleeper": helper(member, "sleeper", tools=["shell_command"], default_permission="allow",
                                          tool_timeout_seconds=900)})
    async with worker():
        handle = await agent_client.start(spec, "sleep")
        await wait_until_running(tag)  # the child's command started
        state = await handle.state()
        child_id = f"{handle.run_id}-sub-call_0_0"
        assert state.waiting_on == f"waiting on sleeper (run {child_id})"
        await handle.cancel()
        with pytest.raises(AgentRunFailed) as info:
            await handle.result()
        assert info.value.reason == "cancelled"
        # The parent ended only after its child had stopped, and the child's command with it.
        assert processes_with_argument(tag) == []
        child = await agent_client.temporal.get_workflow_handle(child_id).describe()
        assert child.status == WorkflowExecutionStatus.CANCELED
        assert (await agent_client.get_handle(child_id).state()).status == "cancelled"


async def test_stop_on_the_parent_stops_the_children_after_their_step(agent_client: AgentClient, worker) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    async def member_step(request: ModelRequest):
        entered.set()
        await release.wait()
        return calls(call("list_dir", {"path": "."}), text="half way")

    member = script(member_step, reply("unreachable"))
    model = script(calls(call("member", {"task": "work"})), reply("unreachable"))
    spec = lead(model, {"member": helper(member, "member", tools=["list_dir"])})
    async with worker():
        handle = await agent_client.start(spec, "work")
        await asyncio.wait_for(entered.wait(), 30)
        await handle.stop("enough")
        child = agent_client.get_handle(f"{handle.run_id}-sub-call_0_0")

        async def child_asked_to_stop() -> bool:
            return (await child.state()).stop_requested

        await eventually(child_asked_to_stop, "the stop passed on to the child")
        release.set()
        result = await handle.result()
        child_result = await child.result()
    assert child_result.status == "stopped" and child_result.report.step_count == 1
    assert child_result.error == f"stopped: the parent run {handle.run_id} was stopped: enough"
    assert result.status == "stopped"
    (sub,) = result.report.sub_runs
    assert sub.status == "stopped"
    delegation = result.messages[-1].content[0]
    assert delegation.content.startswith("half way\n[the sub-agent 'member' was stopped before it finished")


# Operators ---------------------------------------------------------------------------


async def test_an_approval_inside_a_child_is_decided_with_the_temporal_cli(
    agent_client: AgentClient, worker, dev_server, workspace: Path
) -> None:

    member = script(calls(call("write_file", {"file_path": "out.txt", "content": "hi"})), reply("written"))
    model = script(calls(call("writer", {"task": "write it"})), echo_results)
    spec = lead(model, {"writer": helper(member, "writer", tools=["write_file"])})
    async with worker():
        handle = await agent_client.start(spec, "write")
        child_id = f"{handle.run_id}-sub-call_0_0"
        query = f'AgentStatus="awaiting_approval" AND AgentRootRun="{handle.run_id}"'

        async def listed() -> list[str]:
            out = await run_temporal(dev_server, "workflow", "list", "--query", query, "--output", "json")
            assert out.returncode == 0, out.stderr
            return [w["execution"]["workflowId"] for w in json.loads(out.stdout or "[]")]

        assert await eventually(listed, "the child listed as awaiting approval") == [child_id]
        waiting = f"waiting on writer (run {child_id})"
        assert (await handle.state()).waiting_on == waiting
        # The workflow's current details say so too (what the Temporal UI shows), and so does `agentloop show`.
        from temporalio.api.sdk.v1 import WorkflowMetadata
        metadata = await handle.workflow_handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
        assert metadata.current_details == waiting
        shown = await agentloop_async("show", handle.run_id, env=clean_env(
            workspace.parent, TEMPORAL_ADDRESS=dev_server.address, AGENTLOOP_TASK_QUEUE="unused"))
        assert f"  {waiting}" in shown.out.splitlines(), shown.out + shown.err
        signalled = await run_temporal(dev_server, "workflow", "signal", "--workflow-id", child_id, "--name",
                                       "approve", "--input", json.dumps({"call_id": "call_0_0", "decision": "approve"}))
        assert signalled.returncode == 0, signalled.stderr
        result = await handle.result()
        assert (await handle.state()).waiting_on == ""
    assert result.final_text == "writer:written"
    assert (workspace / "out.txt").read_text() == "hi"


async def test_a_worker_killed_while_a_child_runs_starts_no_second_child_and_runs_no_tool_twice(
    agent_client: AgentClient, workspace: Path, spawn_worker
) -> None:
    calls_log = workspace / "calls.log"
    first = spawn_worker("tests.helpers.fixtures.sub_agents_fixture")
    member = AgentSpec(model="scripted:sub-member", name="member", tools=["record", "block"],
                       workspace=str(workspace), heartbeat_timeout_seconds=2, default_permission="allow")
    spec = AgentSpec(model="scripted:sub-lead", name="lead", heartbeat_timeout_seconds=2,
                     sub_agents={"member": SubAgent(spec=member)})
    handle = await agent_client.start(spec, "delegate")
    deadline = asyncio.get_running_loop().time() + 60
    while not (calls_log.exists() and "block-start" in calls_log.read_text()):
        assert asyncio.get_running_loop().time() < deadline, f"the child's tool never started ({spawn_worker.log})"
        await asyncio.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    (workspace / "release").touch()
    spawn_worker("tests.helpers.fixtures.sub_agents_fixture")
    result = await asyncio.wait_for(handle.result(), timeout=90)
    assert result.final_text == "lead heard: member survived"
    # The completed tool ran once; only the one in flight at the kill ran again.
    assert calls_log.read_text().splitlines() == ["a", "block-start", "block-start"]
    history = await handle.workflow_handle.fetch_history()
    starts = [e for e in history.events
              if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED]
    assert len(starts) == 1

    async def children() -> list[str]:
        return [w.id async for w in agent_client.temporal.list_workflows(f'AgentParentRun="{handle.run_id}"')]

    child_id = f"{handle.run_id}-sub-call_0_0"
    assert await eventually(children, "the child indexed") == [child_id]


async def test_events_with_children_interleave_the_tree(agent_client: AgentClient, worker) -> None:
    leaf = AgentSpec(model=script(reply("leaf answer")), name="leaf")
    middle = AgentSpec(model=script(calls(call("leaf", {"task": "deeper"})), echo_results), name="middle",
                       sub_agents={"leaf": SubAgent(spec=leaf)})
    model = script(calls(call("middle", {"task": "go"}), call("other", {"task": "also"})), echo_results)
    spec = lead(model, {"middle": SubAgent(spec=middle), "other": helper(script(reply("other answer")), "other")})
    async with worker():
        handle = await agent_client.start(spec, "tree")
        merged = [e async for e in agent_client.events(handle.run_id, include_children=True)]
        own = {run: [e async for e in agent_client.events(run)] for run in
               [handle.run_id, f"{handle.run_id}-sub-call_0_0", f"{handle.run_id}-sub-call_0_1",
                f"{handle.run_id}-sub-call_0_0-sub-call_0_0"]}
    # Every event of every run of the tree, once, each tagged with its run.
    for run, events in own.items():
        assert [(e.type, e.seq) for e in merged if e.run_id == run] == [(e.type, e.seq) for e in events], run
    assert len(merged) == sum(len(events) for events in own.values())
    # The top run's terminal event ends the stream.
    assert merged[-1].run_id == handle.run_id and merged[-1].type == "thread.run.completed"
    # A child's events come between its start and its completion in its parent's stream.
    for started in [e for e in merged if e.type == "agent.sub_agent.invocation.started"]:
        child = started.child_run_id
        positions = [i for i, e in enumerate(merged) if e.run_id == child]
        completed = next(i for i, e in enumerate(merged)
                         if e.type == "agent.sub_agent.invocation.completed" and e.child_run_id == child)
        assert merged.index(started) < positions[0] and positions[-1] < completed


async def test_watch_tree_and_list_tree(agent_client: AgentClient, worker, dev_server, tmp_path: Path,
                                        task_queue: str) -> None:

    env = clean_env(tmp_path, TEMPORAL_ADDRESS=dev_server.address, AGENTLOOP_TASK_QUEUE=task_queue)
    leaf = AgentSpec(model=script(reply("leaf answer")), name="leaf")
    middle = AgentSpec(model=script(calls(call("leaf", {"task": "deeper"})), echo_results), name="middle",
                       sub_agents={"leaf": SubAgent(spec=leaf)})
    model = script(calls(call("middle", {"task": "go"}), call("other", {"task": "also"})), echo_results)
    spec = lead(model, {"middle": SubAgent(spec=middle), "other": helper(script(reply("other answer")), "other")})
    async with worker():
        handle = await agent_client.start(spec, "tree")
        await handle.result()
        run = handle.run_id
        watched = await agentloop_async("watch", run, "--tree", env=env)
        jsonl = await agentloop_async("watch", run, "--tree", "--jsonl", env=env)
        query = f'AgentRootRun="{run}" OR WorkflowId="{run}"'

        async def listed():
            out = await agentloop_async("list", "--tree", "--query", query, env=env)
            return out if out.out.count(run) == 4 else None

        listing = await eventually(listed, "the tree's four runs indexed")
    assert watched.code == 0, watched.err
    lines = watched.out.splitlines()
    middle_id, leaf_id = f"{run}-sub-call_0_0", f"{run}-sub-call_0_0-sub-call_0_0"
    assert f"[step 1] ⇢ middle started (run {middle_id}): go" in lines
    assert f"  [middle] [step 1] ⇢ leaf started (run {leaf_id}): deeper" in lines
    assert "  [middle] [step 1] tool result leaf (ok): leaf answer" in lines
    leaf_done = next(i for i, line in enumerate(lines) if line.startswith(f"  [middle/leaf] run {leaf_id} completed ("))
    middle_done = next(i for i, line in enumerate(lines) if line.startswith(f"  [middle] run {middle_id} completed ("))
    assert lines[leaf_done].endswith(": leaf answer") and lines[middle_done].endswith(": leaf:leaf answer")
    assert any(line.startswith(f"  [other] run {run}-sub-call_0_1 completed (") for line in lines)
    # A child's lines come before its parent hears its answer, and before the lead's end.
    heard = next(i for i, line in enumerate(lines) if line.startswith("[step 1] ⇠ middle completed ("))
    assert leaf_done < middle_done < heard
    assert "middle:leaf:leaf answer | other:other answer" in watched.out
    runs_in_jsonl = {json.loads(line)["run_id"] for line in jsonl.out.splitlines()}
    assert runs_in_jsonl == {run, middle_id, leaf_id, f"{run}-sub-call_0_1"}
    rows = listing.out.splitlines()[1:]
    assert rows[0].startswith(f"{run} ") and "completed" in rows[0]
    # The children under the lead (siblings in start order), the leaf right under the middle.
    children = [row.split()[1] for row in rows[1:]]
    assert sorted(children) == sorted([middle_id, leaf_id, f"{run}-sub-call_0_1"])
    middle_row = children.index(middle_id) + 1
    assert rows[middle_row].startswith(f"└ {middle_id} ") and rows[middle_row + 1].startswith(f"  └ {leaf_id} ")
    assert rows[children.index(f"{run}-sub-call_0_1") + 1].startswith(f"└ {run}-sub-call_0_1 ")


# Helpers for user workflows ------------------------------------------------------------


async def test_chain_and_consolidate_in_a_user_workflow(agent_client: AgentClient, worker, task_queue: str) -> None:
    from tests.helpers.fixtures.user_workflows import ChainWorkflow, ConsolidateWorkflow

    seen: list[str] = []

    def stage(suffix: str) -> str:
        def answer(request: ModelRequest):
            seen.append(request.messages[-1].text)
            return reply(request.messages[-1].text + suffix)
        return script(answer)

    merged_prompts: list[ModelRequest] = []

    def merge(request: ModelRequest):
        merged_prompts.append(request)
        return reply("merged: blue")

    looping = script(calls(call("list_dir", {"path": "."})), reply("unreachable"))
    async with worker(workflows=[ChainWorkflow, ConsolidateWorkflow]):
        chained = await agent_client.temporal.execute_workflow(
            ChainWorkflow.run, [stage(" -> a"), stage(" -> b"), stage(" -> c")],
            id=f"chain-{task_queue}", task_queue=task_queue)
        consolidated = await agent_client.temporal.execute_workflow(
            ConsolidateWorkflow.run, [script(reply("blue")), script(reply("navy blue")), looping, script(merge)],
            id=f"consolidate-{task_queue}", task_queue=task_queue)
    # Each agent received the previous one's output.
    assert seen == ["start", "start -> a", "start -> a -> b"]
    assert chained == "start -> a -> b -> c"
    assert consolidated == ["merged: blue", "AgentRunResult", "AgentRunResult", "ToolStepFailed"]  # no such tool
    (request,) = merged_prompts
    prompt = request.messages[-1].text
    assert "Which colour?" in prompt and "--- answer 1 (expert0) ---\nblue" in prompt
    assert "--- answer 2 (expert1) ---\nnavy blue" in prompt
    assert "--- answer 3 (expert2) ---\n(did not finish:" in prompt
    assert request.tools == []  # one LLM step, without tools


async def test_a_sub_agent_works_inside_its_parents_workspace(
    agent_client: AgentClient, worker, workspace: Path, tmp_path: Path
) -> None:
    """A child naming no workspace gets its parent's; one naming a
    directory inside runs there; one naming a wider one does not start, and
    the parent's model reads why."""
    inner = workspace / "inner"
    inner.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    pwd = script(calls(call("shell_command", {"command": "pwd"})), echo_results)
    model = script(calls(call("same", {"task": "where"}), call("inner", {"task": "where"}),
                         call("wider", {"task": "where"})), echo_results)
    subs = {"same": helper(pwd, "same", tools=["shell_command"], default_permission="allow"),
            "inner": helper(pwd, "inner", tools=["shell_command"], default_permission="allow", workspace=str(inner)),
            "wider": helper(pwd, "wider", tools=["shell_command"], default_permission="allow",
                            workspace=str(elsewhere))}
    spec = lead(model, subs, workspace=str(workspace))
    async with worker(workspace=tmp_path):
        handle = await agent_client.start(spec, "go")
        result = await handle.result()
    results = {r.name: r for m in result.messages for r in m.tool_results}
    assert f"{workspace}\n" in results["same"].content, results["same"].content
    assert f"{inner}\n" in results["inner"].content, results["inner"].content
    assert results["wider"].is_error
    assert results["wider"].content == (
        f"The sub-agent 'wider' cannot start: its workspace {elsewhere} is not inside its parent's workspace "
        f"{workspace}; a sub-agent works in its parent's workspace or in a directory inside it")
