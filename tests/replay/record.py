"""Record the workflow histories that tests/replay/test_replay.py replays.

Run from the repository root when a deliberate, versioned change to the
workflow needs new histories (keep the old ones: runs in flight still have
them)::

    python -m tests.replay.record            # scenarios without a file yet
    python -m tests.replay.record NAME ...   # re-record these

Most scenarios share one dev server and worker; those in OWN_WORKERS run
their own workers, and ``thread_upgrade`` (versioned workers) its own dev
server too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Literal

from agentloop import (
    AgentClient,
    AgentRunFailed,
    AgentSpec,
    GuardrailContext,
    GuardrailResult,
    ToolContext,
    guardrail,
    llm_judge,
)
from agentloop.activities.builtin_tools import register_builtin_tools
from agentloop.shared.definition.activity_io import ToolDefinition
from agentloop.shared.definition.compaction import is_summary_message
from agentloop.shared.definition.context_window import ContextPolicy
from agentloop.shared.definition.spec import SubAgent
from agentloop.testing import call, calls, register_scripted_model, reply
from agentloop.tools.registry import Tool, ToolRegistry
from agentloop.workers.devserver import DevServer
from agentloop.workers.worker import build_worker, connect
from tests.helpers.paths import HISTORIES, ROOT

HERE = HISTORIES  # where the recorded histories go

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


def compacting_script(request):
    # Summariser requests get a summary; otherwise read the big file four
    # times (calls counted from the tool results seen), then answer.
    if request.system_prompt.startswith("You summarise"):
        return reply("SUMMARY: the big file was read several times; it is all x.")
    reads = sum(1 for m in request.messages for p in m.content if getattr(p, "type", "") == "tool_result")
    summaries = sum(1 for m in request.messages if is_summary_message(m))
    if reads + 2 * summaries < 4:
        return calls(call("read_file", {"file_path": "big.txt"}), text="Reading it again. " * 200)
    return reply("done reading")


async def drive_bounded_signals(handle) -> None:
    # Text over its limit arrives by signal: cut, noted, and applied (patch
    # agentloop-bounded-signals-1); then a stop whose reason is over its limit.
    await wait_pending(handle, 2)
    raw = handle.workflow_handle
    await raw.signal("approve", {"call_id": "call_0_0", "decision": "deny", "reason": "r" * 12_000, "by": "b" * 300})
    await wait_pending(handle, 1)
    await handle.stop("s" * 12_000)


async def drive_unknown_signal(handle) -> None:
    # A signal of a name the run does not know: noted (patch
    # agentloop-unknown-signals-1), then the call approved.
    await wait_pending(handle, 1)
    await handle.workflow_handle.signal("aprove", {"call_id": "call_0_0"})
    for _ in range(600):
        if (await handle.state()).rejected_signals:
            break
        await asyncio.sleep(0.05)
    await handle.approve("call_0_0")


async def drive_continue_as_new(handle) -> None:
    await wait_pending(handle, 1)  # the write waits, in the second Temporal run
    await handle.approve("call_1_0")


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
    # Pruning and a summary (patch agentloop-long-runs-1): a small window.
    "long_compaction": (
        compacting_script,
        dict(tools=["read_file"], default_permission="allow", max_steps=12,
             context=ContextPolicy(context_window_tokens=4096, reserve_output_tokens=512,
                                   protect_recent_tool_results=1, keep_recent_messages=2)),
    ),
    # Oversize text by signal (patch agentloop-bounded-signals-1): a denial
    # whose reason and `by` are cut, then a stop whose reason is cut.
    "bounded_signals": (
        [
            calls(call("write_file", {"file_path": "g.txt", "content": "g"}),
                  call("write_file", {"file_path": "h.txt", "content": "h"})),
            reply("unreachable"),
        ],
        dict(tools=["write_file"], parallel_tool_calls=False),
        drive_bounded_signals,
    ),
    # A signal of an unknown name, noted (patch agentloop-unknown-signals-1).
    "unknown_signal": (
        [calls(call("write_file", {"file_path": "k.txt", "content": "k"})), reply("done")],
        dict(tools=["write_file"]),
        drive_unknown_signal,
    ),
    # Continue-as-new while an approval waits: both Temporal runs recorded.
    "continue_as_new": (
        [
            calls(call("list_dir", {"path": "."})),
            calls(call("write_file", {"file_path": "f.txt", "content": "f"})),
            reply("done"),
        ],
        dict(tools=["list_dir", "write_file"], continue_as_new_every_steps=2),
        drive_continue_as_new,
    ),
}


async def drive_approval_timeout_then_approve(handle) -> None:
    # The first write times out (1 s); the second step's write is approved.
    await wait_pending(handle, 1)
    await wait_pending(handle, 0)
    await wait_pending(handle, 1)
    await handle.approve("call_1_0", by="ops")


# Recorded after the run became an interpreter over one LoopState (the
# workflows/ modules of agentloop 0.1's restructure): the same paths again,
# plus self-verification and an approval timeout.
SCENARIOS.update({
    "state_tools_parallel": (SCENARIOS["tools_parallel"][0],
                             dict(SCENARIOS["tools_parallel"][1], default_permission="allow")),
    "state_approvals": SCENARIOS["hitl_approvals"],
    "state_client_tool_stop": SCENARIOS["hitl_client_tool_stop"],
    "state_compaction": SCENARIOS["long_compaction"],
    "state_continue_as_new": SCENARIOS["continue_as_new"],
    "state_verify": (
        [reply("draft"), reply("checked: final")],
        dict(verify_before_completing=True),
    ),
    "state_approval_timeout": (
        [
            calls(call("write_file", {"file_path": "t.txt", "content": "t"})),
            calls(call("write_file", {"file_path": "u.txt", "content": "u"})),
            reply("done"),
        ],
        dict(tools=["write_file"], approval_timeout_seconds=1, max_consecutive_failed_tool_steps=2),
        drive_approval_timeout_then_approve,
    ),
})

# Recorded with the hand-over's carry bounded by bytes (patch
# agentloop-carry-bytes-1): the report counts in the carry's limit, and the
# carried events are the newest within CARRIED_EVENT_BYTES.
SCENARIOS["carry_bytes"] = (
    [calls(call("read_file", {"file_path": "big.txt"})) for _ in range(3)] + [reply("done")],
    {"tools": ["read_file"], "default_permission": "allow", "continue_as_new_every_steps": 2},
)


# Recorded with the report's long texts cut (REPORT_TEXT_LIMIT): a call
# whose argument is 20,000 characters, and its report keeps 2,000.
SCENARIOS["report_cut"] = (
    [calls(call("write_file", {"file_path": "long.txt", "content": "w" * 20_000})), reply("written")],
    {"tools": ["write_file"], "default_permission": "allow"},
)


async def drive_cancel_while_waiting(handle) -> None:
    await wait_pending(handle, 1)
    await handle.cancel()


# Recorded after runs started lean (patch agentloop-lean-1): one marker, no
# redundant first upsert, the cancel checks.
SCENARIOS.update({
    "lean_tools": SCENARIOS["state_tools_parallel"],
    "lean_approvals": SCENARIOS["hitl_approvals"],
    "lean_cancel": (
        [calls(call("write_file", {"file_path": "c.txt", "content": "c"}))],
        dict(tools=["write_file"]),
        drive_cancel_while_waiting,
    ),
})


# Tool calls on the run's own queue (no patch: resolve_tools' result in
# history says where they go): a worker of role all answered resolve_tools.
SCENARIOS.update({
    "tools_beside": SCENARIOS["state_tools_parallel"],
})


# Tools looked up on the run's own worker (patch agentloop-lean-2): a local
# activity of the worker of role all, in the run's first workflow task.
SCENARIOS.update({
    "resolve_here": SCENARIOS["state_tools_parallel"],
})


# Model calls on the provider lane's queue, <queue>-llm-scripted (patch
# agentloop-lean-3, standing for the features before it): two steps with
# parallel tool calls between them.
SCENARIOS.update({
    "lanes": SCENARIOS["state_tools_parallel"],
})


# A tool registered local=True (no patch: resolve_tools' result in history
# names the local tools): its calls are local activities of the worker of
# role all running the run, one of them beside a call of an ordinary tool.
def register_local_tools(registry: ToolRegistry) -> None:
    @registry.tool(local=True, read_only=True)
    async def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()


SCENARIOS.update({
    "local_tools": (
        [calls(call("shout", {"text": "hi"}), call("read_file", {"file_path": "a.txt"})),
         calls(call("shout", {"text": "again"})), reply("done")],
        dict(tools=["shout", "read_file"]),
    ),
})



# Recorded with the report's steps carried within REPORT_STEPS_CARRY_BYTES
# (patch agentloop-report-steps-1): each call reports about 160 KB of
# metrics, and the hand-over after step 2 carries the newest step only.
def register_measure(registry: ToolRegistry) -> None:
    @registry.tool
    async def measure(part: int, ctx: ToolContext) -> str:
        """Reports many numbers."""
        ctx.metrics["samples"] = list(range(part * 1_000_000, part * 1_000_000 + 20_000))
        return f"measured {part}"


SCENARIOS["report_steps"] = (
    [calls(call("measure", {"part": i})) for i in range(3)] + [reply("done")],
    {"tools": ["measure"], "default_permission": "allow", "continue_as_new_every_steps": 2},
)


# A tool whose definition() raises on the worker (no patch: before, the
# lookup was retried until it stopped raising): the lookup fails beside the
# run (a marker), then on the tools queue non-retryably (ToolDefinitionError),
# and the run fails with a sentence naming the tool.
class BrokenDefinition(Tool):
    def definition(self) -> ToolDefinition:
        raise KeyError("#/components/schemas/Order")


def register_broken_definition(registry: ToolRegistry) -> None:
    async def order(id: str) -> str:
        """Look an order up."""
        return id

    registry.register(BrokenDefinition(order))


SCENARIOS.update({
    "tool_definition_error": ([reply("never")], dict(tools=["order"])),
})

# Sub-agents (no patch: only runs with sub_agents reach the code): two
# delegations in parallel, one with a forked history, one failing (max_steps);
# the children's histories are recorded too (NAME-sub-N.json).
register_scripted_model("record-sub_agents-researcher", [reply("the answer is 42")])
register_scripted_model("record-sub_agents-critic", [calls(call("list_dir", {"path": "."})) for _ in range(3)])
SCENARIOS.update({
    "sub_agents": (
        [
            calls(call("researcher", {"task": "find the answer"}), call("critic", {"task": "check it"})),
            reply("done"),
        ],
        dict(sub_agents={
            "researcher": SubAgent(spec=AgentSpec(model="scripted:record-sub_agents-researcher", name="researcher"),
                                   description="Finds answers."),
            "critic": SubAgent(spec=AgentSpec(model="scripted:record-sub_agents-critic", name="critic",
                                              tools=["list_dir"], max_steps=2),
                               description="Checks answers.", history="fork"),
        }),
    ),
})


# A tenant's run at priority 2 (AgentRunInput.tenant, AgentSpec.priority):
# a tool call and two sub-agents, one at the run's priority and tenant, one
# whose spec sets a priority of its own.
register_scripted_model("record-tenant_priority-helper", [reply("helped")])
register_scripted_model("record-tenant_priority-urgent", [reply("done first")])
TENANTS = {"tenant_priority": "acme"}
SCENARIOS.update({
    "tenant_priority": (
        [calls(call("list_dir", {"path": "."}), call("helper", {"task": "help"}), call("urgent", {"task": "now"})),
         reply("done")],
        dict(tools=["list_dir"], priority=2, sub_agents={
            "helper": SubAgent(spec=AgentSpec(model="scripted:record-tenant_priority-helper", name="helper"),
                               description="Helps."),
            "urgent": SubAgent(spec=AgentSpec(model="scripted:record-tenant_priority-urgent", name="urgent",
                                              priority=1), description="Goes first."),
        }),
    ),
})


# Guardrails (no patch: only runs whose spec names guardrails reach the
# code): an input guardrail that fails without a tripwire, an LLM judge that
# passes, and an output guardrail whose tripwire ends the run.
def register_guardrails(registry: ToolRegistry) -> None:
    def record_input_note(ctx: GuardrailContext) -> GuardrailResult:
        return GuardrailResult.fail("input noted", severity="low") if ctx.step == 0 else GuardrailResult.ok()

    def record_no_secrets(ctx: GuardrailContext) -> GuardrailResult:
        return GuardrailResult.trip("the answer tells a secret") if "secret" in ctx.text else GuardrailResult.ok()

    register_scripted_model("record-judge", lambda request: reply('{"pass": true, "reason": "fine"}'))
    guardrail(record_input_note, stage="input", registry=registry)
    guardrail(record_no_secrets, stage="output", registry=registry)
    llm_judge("record_judge", stage="output", model="scripted:record-judge", prompt="Judge.", registry=registry)


SCENARIOS.update({
    "guardrails": (
        [calls(call("list_dir", {"path": "."})), reply("the secret is 42")],
        dict(tools=["list_dir"], guardrails=["record_input_note", "record_judge", "record_no_secrets"]),
    ),
})


# MCP tools (no patch: only runs with mcp_servers reach the code): the
# listing of a stdio server (tests/helpers/servers/mcp_server.py) recorded by resolve_tools,
# then a result, an isError result and a JSON-RPC error in parallel.
SCENARIOS.update({
    "mcp_tools": (
        [
            calls(call("notes__add", {"a": 2, "b": 40}), call("notes__fail", {"message": "disk full"}),
                  call("notes__rpc_error")),
            reply("done"),
        ],
        dict(mcp_servers=["notes"], default_permission="allow"),
    ),
})

#: The MCP servers of the recording worker.
MCP_SERVERS = {"notes": {"command": sys.executable, "args": ["-m", "tests.helpers.servers.mcp_server", "stdio"],
                         "cwd": str(ROOT)}}


async def drive_restore(handle):
    # Export the run while its write waits, cancel it, and restore the
    # snapshot as a new run (with a tool the worker lacks: a warning, not a
    # failed start); the restored run's write waits again and is approved.
    # Its history is the one recorded.
    await wait_pending(handle, 1)
    snapshot = await handle.export()
    await handle.cancel()
    spec = snapshot.spec.model_copy(update={"tools": [*snapshot.spec.tools, "gone_tool"]})
    snapshot = snapshot.model_copy(update={"spec": spec, "tools": [*snapshot.tools, "gone_tool"]})
    restored = await AgentClient(handle.workflow_handle._client, task_queue=RECORD_QUEUE[0]).restore(
        snapshot, run_id=f"{handle.run_id}-restored")
    await wait_pending(restored, 1)
    await restored.approve("call_0_0", by="ops")
    return restored


# Restore (no patch: only runs started from a snapshot, AgentRunInput.origin,
# reach the code): a restored run whose approval waits again.
SCENARIOS.update({
    "restored_approval": (
        [calls(call("write_file", {"file_path": "r.txt", "content": "r"})), reply("done")],
        dict(tools=["write_file"]),
        drive_restore,
    ),
})

async def drive_restore_completed(handle):
    # Export the run once it has completed and restore the snapshot with no
    # new message (patch agentloop-restored-completed-1): the restored run
    # ends completed at once, with the snapshot's answer, and calls no model.
    # Its history is the one recorded.
    await handle.result()
    snapshot = await handle.export()
    restored = await AgentClient(handle.workflow_handle._client, task_queue=RECORD_QUEUE[0]).restore(
        snapshot, run_id=f"{handle.run_id}-restored")
    result = await restored.result()
    assert (result.status, result.final_text, result.report.step_count) == ("completed", "the answer", 1), result
    return restored


SCENARIOS.update({
    "restored_completed": ([reply("the answer")], {}, drive_restore_completed),
})

# Threads (no patch: only runs started with AgentRunInput.thread reach the
# code): turns by update and by signal, an enqueued message, steering, an
# interrupt and a rollback (each cancelling a step under way), a reject that
# leaves no trace, and a stop while idle that ends the thread.
THREAD_GATES: dict[str, asyncio.Event] = {}


def thread_gate(name: str) -> asyncio.Event:
    return THREAD_GATES.setdefault(name, asyncio.Event())


async def thread_script(request):
    users = [m.text for m in request.messages if m.role == "user"]
    last_user, last = users[-1], request.messages[-1]
    if last_user in ("scenario thread_turns", "scenario thread_idle") and last.role == "user":
        return calls(call("list_dir", {"path": "."}))
    if last_user in ("a long one", "research this", "steer me") and last.role == "user":
        thread_gate(f"at {last_user}").set()
        await thread_gate(f"release {last_user}").wait()  # never released: cut short
    return reply(f"answer to {last_user}")


async def drive_thread(handle):
    from agentloop.client.handle import AgentRunHandle

    raw = handle.workflow_handle
    await handle.result()  # turn 1: a tool step, then an answer
    await raw.execute_update("send", {"text": "a long one"})  # turn 2
    await thread_gate("at a long one").wait()
    await raw.execute_update("send", {"text": "and a queued one", "strategy": "enqueue"})  # turn 3
    await raw.execute_update("send", {"text": "stop that", "strategy": "interrupt"})  # turn 4, answered next
    await AgentRunHandle(raw, turn=3).result()
    await raw.signal("send", {"text": "steer me"})  # turn 5, by signal
    await thread_gate("at steer me").wait()
    await raw.execute_update("steer", {"text": "use the v2 API"})
    thread_gate("release steer me").set()
    await AgentRunHandle(raw, turn=5).result()
    await raw.execute_update("send", {"text": "research this"})  # turn 6
    await thread_gate("at research this").wait()
    try:
        await raw.execute_update("send", {"text": "refused", "strategy": "reject"})
    except Exception:  # ThreadBusy: refused by the validator, nothing in history
        pass
    await raw.execute_update("send", {"text": "instead this", "strategy": "rollback"})  # turn 7
    await AgentRunHandle(raw, turn=7).result()
    await handle.stop("the conversation is over")  # idle: the thread ends stopped
    return AgentRunHandle(raw)


SCENARIOS.update({
    "thread_turns": (thread_script, dict(tools=["list_dir"]), drive_thread),
    # The same turns with the idle status between them (agentloop-idle-1).
    "thread_idle": (thread_script, dict(tools=["list_dir"]), drive_thread),
})

# A typed run (patch agentloop-typed-output-1): a tool step, an answer that
# is not JSON (fed back as a user message), a final_result call with a wrong
# value (fed back as its error result), then a right one.
SCENARIOS.update({
    "typed_output": (
        [calls(call("list_dir", {"path": "."})), reply("refund, I think"),
         calls(call("final_result", {"result": "maybe"})), calls(call("final_result", {"result": "refund"}))],
        dict(tools=["list_dir"], default_permission="allow", output=Literal["refund", "escalate"]),
    ),
})


def write_history(out: Path, history) -> None:
    out.write_text(json.dumps(json.loads(history.to_json()), indent=1) + "\n")
    print(f"wrote {out} ({len(history.events)} events)")


#: The recording worker's task queue (set in main).
RECORD_QUEUE: list[str] = []


# A run whose tool lookup was answered by a worker that serves the tools on
# the run's queue too (as role all does), while only a models worker polls
# that queue: two parallel calls fail there (NotFoundError) and move to the
# tools queue. Recorded on queues of its own (not in SCENARIOS).
async def record_tools_moved(client, registry: ToolRegistry, ws: str) -> None:
    from temporalio.worker import Worker

    from agentloop.activities.agent_activities import AgentActivities

    name, queue = "tools_moved", f"record-moved-{uuid.uuid4().hex[:8]}"
    acts = AgentActivities(registry, workspace=ws, tools_beside_runs=True)
    register_scripted_model(f"record-{name}", [
        calls(call("read_file", {"file_path": "a.txt"}), call("list_dir", {"path": "."})), reply("moved")])
    async with (build_worker(client, task_queue=queue, registry=registry, role="models"),
                Worker(client, task_queue=f"{queue}-tools", activities=[acts.resolve_tools, acts.execute_tool])):
        spec = AgentSpec(model=f"scripted:record-{name}", workspace=ws, tools=["read_file", "list_dir"],
                         default_permission="allow")
        handle = await AgentClient(client, task_queue=queue).start(spec, f"scenario {name}", run_id=f"replay-{name}")
        await handle.result()
    history = await handle.workflow_handle.fetch_history()
    out = HERE / f"{name}.json"
    write_history(out, history)


# The local tools' lookup answered by a worker that serves the tools beside
# the runs, while only a models worker runs the run: it refuses the local
# call (a marker) and the call, and the next one, run on the tools queue.
async def record_local_tools_moved(client, registry: ToolRegistry, ws: str) -> None:
    from temporalio.worker import Worker

    from agentloop.activities.agent_activities import AgentActivities

    name, queue = "local_tools_moved", f"record-local-moved-{uuid.uuid4().hex[:8]}"
    acts = AgentActivities(registry, workspace=ws, tools_beside_runs=True)
    register_scripted_model(f"record-{name}", [
        calls(call("shout", {"text": "moved"})), calls(call("shout", {"text": "again"})), reply("moved")])
    async with (build_worker(client, task_queue=queue, registry=registry, role="models"),
                Worker(client, task_queue=f"{queue}-tools", activities=[acts.resolve_tools, acts.execute_tool])):
        spec = AgentSpec(model=f"scripted:record-{name}", workspace=ws, tools=["shout"])
        handle = await AgentClient(client, task_queue=queue).start(spec, f"scenario {name}", run_id=f"replay-{name}")
        await handle.result()
    write_history(HERE / f"{name}.json", await handle.workflow_handle.fetch_history())


@contextlib.asynccontextmanager
async def split_deployment(client, queue: str, registry: ToolRegistry, ws: str):
    """A models worker on ``queue`` and a tools worker on its tools queue."""
    async with (build_worker(client, task_queue=queue, registry=registry, workspace=ws, role="models"),
                build_worker(client, task_queue=queue, registry=registry, workspace=ws, role="tools")):
        yield


# A split deployment: the models worker refuses the local lookup (its
# failure is a marker) and the tools queue answers resolve_tools.
async def record_resolve_split(client, registry: ToolRegistry, ws: str) -> None:
    name, queue = "resolve_split", f"record-split-{uuid.uuid4().hex[:8]}"
    register_scripted_model(f"record-{name}", [calls(call("read_file", {"file_path": "a.txt"})), reply("split")])
    async with split_deployment(client, queue, registry, ws):
        spec = AgentSpec(model=f"scripted:record-{name}", workspace=ws, tools=["read_file"])
        handle = await AgentClient(client, task_queue=queue).start(spec, f"scenario {name}", run_id=f"replay-{name}")
        await handle.result()
    write_history(HERE / f"{name}.json", await handle.workflow_handle.fetch_history())


# Tools looked up on a worker of role all; the run waits for an approval
# while the deployment is split, and the models worker goes on with it: the
# approved call, placed beside the run, moves to the tools queue.
async def record_resolve_here_split(client, registry: ToolRegistry, ws: str) -> None:
    name, queue = "resolve_here_split", f"record-here-split-{uuid.uuid4().hex[:8]}"
    register_scripted_model(f"record-{name}", [
        calls(call("write_file", {"file_path": "split.txt", "content": "s"})), reply("split later")])
    agents = AgentClient(client, task_queue=queue)
    spec = AgentSpec(model=f"scripted:record-{name}", workspace=ws, tools=["write_file"])
    async with build_worker(client, task_queue=queue, registry=registry, workspace=ws):
        handle = await agents.start(spec, f"scenario {name}", run_id=f"replay-{name}")
        await wait_pending(handle, 1)
    async with split_deployment(client, queue, registry, ws):
        await handle.approve("call_0_0")
        await handle.result()
    write_history(HERE / f"{name}.json", await handle.workflow_handle.fetch_history())


# Two firings of a schedule that feeds a thread (AgentScheduleFeed): the
# first starts the thread (a child that outlives it), the second signals
# the thread its next message. Started as a schedule would start them.
async def record_schedule_feed(client, registry: ToolRegistry, ws: str) -> None:
    from agentloop.shared.base.contracts import SCHEDULE_FEED_WORKFLOW_NAME
    from agentloop.shared.runs.schedules import ScheduleFeedInput

    register_scripted_model("record-schedule_feed", lambda request: reply("the digest"))
    spec = AgentSpec(model="scripted:record-schedule_feed", workspace=ws)
    for suffix in ("start", "send"):
        feed = ScheduleFeedInput(schedule="replay-digest", thread_id="replay-schedule_feed-thread", spec=spec,
                                 text="what is new?")
        handle = await client.start_workflow(SCHEDULE_FEED_WORKFLOW_NAME, feed, task_queue=RECORD_QUEUE[0],
                                             id=f"replay-schedule_feed_{suffix}")
        await handle.result()
        write_history(HERE / f"schedule_feed_{suffix}.json", await handle.fetch_history())
    await client.get_workflow_handle("replay-schedule_feed-thread").terminate("recorded")


#: The dev server of the versioning scenario: as tests/process/deploy/test_deploying.py
#: sets its own up (drainage and poller history kept short).
VERSIONED_SERVER_CONFIG = {
    "matching.wv.VersionDrainageStatusVisibilityGracePeriod": "\"1s\"",
    "matching.wv.VersionDrainageStatusRefreshInterval": "\"1s\"",
    "matching.PollerHistoryTTL": "\"1s\"",
}


async def set_current_version(server: DevServer, deployment: str, build_id: str) -> None:
    """``temporal worker deployment set-current-version``, retried until the
    server knows the version (once its worker has polled)."""
    from tests.helpers.cli import run_temporal
    from tests.helpers.polling import eventually

    async def attempt() -> bool:
        done = await run_temporal(server, "worker", "deployment", "set-current-version", "--deployment-name",
                                  deployment, "--build-id", build_id, "--yes")
        return done.returncode == 0
    await eventually(attempt, f"{build_id} to become current", timeout=30)


async def record_runs_of(client, workflow_id: str, name: str, count: int) -> list:
    """Write the histories of the ``count`` Temporal runs of ``workflow_id``
    (NAME.json, NAME-2.json, ...), oldest first; return them."""
    from tests.helpers.polling import eventually

    async def listed() -> list:
        runs = [w async for w in client.list_workflows(f'WorkflowId="{workflow_id}"')]
        return runs if len(runs) == count else []
    runs = sorted(await eventually(listed, f"{count} runs of {workflow_id} to be listed"), key=lambda w: w.start_time)
    histories = []
    for index, execution in enumerate(runs):
        history = await client.get_workflow_handle(workflow_id, run_id=execution.run_id).fetch_history()
        write_history(HERE / (f"{name}.json" if index == 0 else f"{name}-{index + 1}.json"), history)
        histories.append(history)
    return histories


def answer_last_user(request):  # noqa: ANN001, ANN201
    """A model that answers the thread's last user message by name."""
    return reply(f"answer to {[m.text for m in request.messages if m.role == 'user'][-1]}")


# Worker Deployment versioning (patch agentloop-upgrade-1; docs/deploying.md),
# on a dev server of its own, with versions v1 and v2 of one deployment run
# in-process (as tests/process/deploy/test_deploying.py runs them). A thread on v1
# asks at its second turn which version is current (the local activity
# current_deployment_version: a marker) and stays; v2 becomes current, and at
# its third turn (Temporal says its target version changed: no question) it
# continues as new with auto-upgrade (thread_upgrade.json);
# the new run, on v2, asks again, stays, answers, and ends on a stop while
# idle (thread_upgrade-2.json). A run (pinned: the default of runs) waits for
# approval on v1 across the switch and finishes on v1, asking nothing
# (pinned_versioned.json; its workflow tasks completed PINNED on v1).
async def record_versioned(_client, registry: ToolRegistry, ws: str) -> None:
    from temporalio.client import WorkflowExecutionStatus

    register_scripted_model("record-thread_upgrade", answer_last_user)
    register_scripted_model("record-pinned_versioned",
                            [calls(call("write_file", {"file_path": "p.txt", "content": "p"})), reply("done on v1")])
    queue, deployment, thread_id = "record-versioned", "replay-deployment", "replay-thread_upgrade"
    with tempfile.TemporaryDirectory() as tmp, DevServer(db_file=Path(tmp) / "temporal.db",
                                                         dynamic_config=VERSIONED_SERVER_CONFIG) as server:
        await server.wait_ready()
        client = await connect(server.address)
        agents = AgentClient(client, task_queue=queue)
        versions = {build_id: build_worker(client, task_queue=queue, registry=registry, workspace=ws,
                                           deployment=(deployment, build_id)) for build_id in ("v1", "v2")}
        thread_spec = AgentSpec(model="scripted:record-thread_upgrade", workspace=ws)
        async with versions["v1"]:
            await set_current_version(server, deployment, "v1")
            await (await agents.send(thread_id, "scenario thread_upgrade", thread_spec)).result()
            pinned = await agents.start(AgentSpec(model="scripted:record-pinned_versioned", workspace=ws,
                                                  tools=["write_file"]),
                                        "scenario pinned_versioned", run_id="replay-pinned_versioned")
            await wait_pending(pinned, 1)
            await (await agents.send(thread_id, "still on v1?")).result()
            async with versions["v2"]:
                await set_current_version(server, deployment, "v2")
                await pinned.approve("call_0_0")
                await pinned.result()
                turn = await agents.send(thread_id, "and now?")
                assert (await turn.result()).final_text == "answer to and now?"
                await turn.stop("recorded")
                await client.get_workflow_handle(thread_id).result()
        first, second = await record_runs_of(client, thread_id, "thread_upgrade", 2)
        assert first.events[-1].HasField("workflow_execution_continued_as_new_event_attributes"), first.events[-1]
        assert second.events[-1].HasField("workflow_execution_completed_event_attributes"), second.events[-1]
        await record_runs_of(client, pinned.run_id, "pinned_versioned", 1)
        described = await client.get_workflow_handle(pinned.run_id).describe()
        assert described.status == WorkflowExecutionStatus.COMPLETED


def eval_script(request):  # noqa: ANN001, ANN201
    """Reads a.txt and writes e.txt (the write asks for approval); under the
    eval's prompt, lists the workspace too (no recording of that: refused)."""
    from agentloop.testing import last_tool_results, step_of

    if step_of(request) == 0:
        extra = [call("list_dir", {"path": "."})] if "eval" in request.system_prompt else []
        return calls(call("read_file", {"file_path": "a.txt"}), call("write_file", {"file_path": "e.txt",
                     "content": "e"}), *extra)
    return reply(" | ".join(r.content[:20] for r in last_tool_results(request)))


# An eval (AgentEvalWorkflow; its case run carries AgentRunInput.eval, patch
# agentloop-eval-1): a recorded run whose write was approved; the eval's case
# run answers the read from the recording, the write's approval by the
# recorded decision and the write from the recording, and refuses a call the
# recording lacks. eval_run.json is the eval, eval_run-case.json its case run.
async def record_eval_run(client, registry: ToolRegistry, ws: str, name: str = "eval_run") -> None:
    from agentloop.client.evals import Overrides, cases_from_runs, start_eval

    register_scripted_model(f"record-{name}", eval_script)
    agents = AgentClient(client, task_queue=RECORD_QUEUE[0])
    spec = AgentSpec(model=f"scripted:record-{name}", workspace=ws, tools=["read_file", "write_file", "list_dir"])
    recorded = await agents.start(spec, f"scenario {name}", run_id=f"replay-{name}-recorded")
    await wait_pending(recorded, 1)
    await recorded.approve("call_0_1", by="ops")
    await recorded.result()
    cases = await cases_from_runs(agents, [recorded.run_id])
    handle = await start_eval(agents, cases, overrides=Overrides(system_prompt="eval"), eval_id=f"replay-{name}")
    report = await handle.result()
    (case,) = report.cases
    assert (case.candidate.recorded, case.candidate.refused, case.candidate.live) == (2, 1, 0), case
    write_history(HERE / f"{name}.json", await handle.fetch_history())
    write_history(HERE / f"{name}-case.json", await client.get_workflow_handle(case.run_id).fetch_history())


# The same eval since patch agentloop-eval-approval-1: the case run's approval
# is answered before the run's status is set (no awaiting_approval).
async def record_eval_approval(client, registry: ToolRegistry, ws: str) -> None:
    await record_eval_run(client, registry, ws, name="eval_approval")


def eval_thread_script(request):  # noqa: ANN001, ANN201
    """Lists the workspace for the latest question, then answers with the
    number of questions it has seen (so the answer needs the earlier turns)."""
    users = [m.text for m in request.messages if m.role == "user"]
    if request.messages[-1].role == "user":
        return calls(call("list_dir", {"path": "."}))
    return reply(f"answered {len(users)} questions")


# An eval of a thread's second turn (AgentEvalWorkflow, the case carrying
# the thread's first turn in EvalCase.messages): the case run starts with
# the thread's messages before the turn, answers list_dir from the recording,
# and its result carries the eval tally. eval_thread.json is the eval,
# eval_thread-case.json its case run.
async def record_eval_thread(client, registry: ToolRegistry, ws: str) -> None:
    from agentloop.client.evals import cases_from_runs, start_eval

    register_scripted_model("record-eval_thread", eval_thread_script)
    agents = AgentClient(client, task_queue=RECORD_QUEUE[0])
    spec = AgentSpec(model="scripted:record-eval_thread", workspace=ws, tools=["list_dir"])
    first = await agents.start(spec, "scenario eval_thread", thread_id="replay-eval_thread-recorded")
    await first.result()
    await (await agents.send("replay-eval_thread-recorded", "and again?")).result()
    cases = await cases_from_runs(agents, ["replay-eval_thread-recorded~2"])
    handle = await start_eval(agents, cases, eval_id="replay-eval_thread")
    report = await handle.result()
    (case,) = report.cases
    assert case.passed and case.turn == 2 and case.candidate.recorded == 1, case
    write_history(HERE / "eval_thread.json", await handle.fetch_history())
    write_history(HERE / "eval_thread-case.json", await client.get_workflow_handle(case.run_id).fetch_history())
    await first.stop("recorded")


# A run of a tenant with a quota of one step per 2-second window (patch
# agentloop-quota-1): it reserves before each step, waits for the window to
# turn (waiting_for_quota) and gives back what it did not use; and the
# tenant's ledger (AgentQuotaLedger), continued as new once, both its runs.
async def record_quota(client, registry: ToolRegistry, ws: str) -> None:
    from agentloop.shared.base.usage import Usage
    from agentloop.shared.runs import quotas
    from agentloop.shared.runs.quotas import QuotaLimits

    step = Usage(input_tokens=60, output_tokens=40)
    answers = [calls(call("list_dir", {"path": "."})), calls(call("list_dir", {"path": "."})), reply("done")]
    register_scripted_model("record-quota_run", [a.model_copy(update={"usage": step}) for a in answers])
    agents = AgentClient(client, task_queue=RECORD_QUEUE[0])
    tenant = f"replay-{uuid.uuid4().hex[:6]}"
    from agentloop.workflows.quota_ledger import LedgerInput

    # The ledger started as `quota set` starts it, but continuing as new after four updates.
    await client.start_workflow(quotas.QUOTA_WORKFLOW_NAME, LedgerInput(tenant=tenant, updates_per_run=4),
                                id=quotas.ledger_id(tenant), task_queue=RECORD_QUEUE[0])
    await agents.quotas.set(tenant, QuotaLimits(tokens=100, window_seconds=2, at_limit="wait"))
    spec = AgentSpec(model="scripted:record-quota_run", workspace=ws, tools=["list_dir"])
    handle = await agents.start(spec, "scenario quota_run", run_id="replay-quota_run", tenant=tenant)
    await handle.result()
    write_history(HERE / "quota_run.json", await handle.workflow_handle.fetch_history())
    runs = [w async for w in client.list_workflows(f'WorkflowId="{quotas.ledger_id(tenant)}"')]
    runs.sort(key=lambda w: w.start_time)
    for index, execution in enumerate(runs[:2]):
        ledger = client.get_workflow_handle(execution.id, run_id=execution.run_id)
        write_history(HERE / ("quota_ledger.json" if index == 0 else "quota_ledger-2.json"),
                      await ledger.fetch_history())
    await client.get_workflow_handle(quotas.ledger_id(tenant)).terminate("recorded")


# A cancelled run of a tenant with a quota (patch agentloop-quota-cancel-1): it
# reserved a chunk before its step, waits for an approval, is cancelled and
# gives the reservation back before it ends.
async def record_quota_cancel(client, registry: ToolRegistry, ws: str) -> None:
    from agentloop.shared.runs import quotas
    from agentloop.shared.runs.quotas import QuotaLimits

    register_scripted_model("record-quota_cancel", [calls(call("write_file", {"file_path": "q.txt", "content": "q"}))])
    agents = AgentClient(client, task_queue=RECORD_QUEUE[0])
    tenant = f"replay-{uuid.uuid4().hex[:6]}"
    await agents.quotas.set(tenant, QuotaLimits(tokens=10_000, window_seconds=3600, chunk_tokens=1_000))
    spec = AgentSpec(model="scripted:record-quota_cancel", workspace=ws, tools=["write_file"])
    handle = await agents.start(spec, "scenario quota_cancel", run_id="replay-quota_cancel", tenant=tenant)
    await drive_cancel_while_waiting(handle)
    with contextlib.suppress(AgentRunFailed):
        await handle.result()
    write_history(HERE / "quota_cancel.json", await handle.workflow_handle.fetch_history())
    await client.get_workflow_handle(quotas.ledger_id(tenant)).terminate("recorded")


#: Histories recorded on workers and queues of their own (not in SCENARIOS).
OWN_WORKERS = {
    "eval_run": record_eval_run,
    "eval_thread": record_eval_thread,  # and eval_thread-case
    "eval_approval": record_eval_approval,  # and eval_approval-case
    "quota_run": record_quota,  # and quota_ledger, quota_ledger-2
    "quota_cancel": record_quota_cancel,
    "schedule_feed_start": record_schedule_feed,
    "tools_moved": record_tools_moved,
    "resolve_split": record_resolve_split,
    "resolve_here_split": record_resolve_here_split,
    "local_tools_moved": record_local_tools_moved,
    "thread_upgrade": record_versioned,  # and thread_upgrade-2, pinned_versioned: on a server of its own
}


async def main() -> None:
    registry = ToolRegistry()
    register_builtin_tools(registry)
    register_guardrails(registry)
    register_local_tools(registry)
    register_broken_definition(registry)
    register_measure(registry)
    with tempfile.TemporaryDirectory() as ws, DevServer() as server:
        (Path(ws) / "a.txt").write_text("alpha\n")
        (Path(ws) / "big.txt").write_text("x" * 6000)
        await server.wait_ready()
        client = await connect(server.address)
        queue = f"record-{uuid.uuid4().hex[:8]}"
        RECORD_QUEUE.append(queue)
        agents = AgentClient(client, task_queue=queue)
        async with build_worker(client, task_queue=queue, registry=registry, workspace=ws, mcp_servers=MCP_SERVERS):
            wanted = sys.argv[1:] or [n for n in [*SCENARIOS, *OWN_WORKERS] if not (HERE / f"{n}.json").exists()]
            for name in [n for n in wanted if n in OWN_WORKERS]:
                await OWN_WORKERS[name](client, registry, ws)
                wanted.remove(name)
            for name in wanted:
                script, options, *drive = SCENARIOS[name]
                register_scripted_model(f"record-{name}", script)
                spec = AgentSpec(model=f"scripted:record-{name}", workspace=ws, **options)
                handle = await agents.start(spec, f"scenario {name}", run_id=f"replay-{name}",
                                            thread_id=f"replay-{name}" if name.startswith("thread_") else None,
                                            tenant=TENANTS.get(name))
                if drive:
                    handle = await drive[0](handle) or handle  # a drive may hand over to a new run
                try:
                    await handle.result()
                except AgentRunFailed:
                    pass
                runs = [w async for w in client.list_workflows(f'WorkflowId="{handle.run_id}"')]
                runs.sort(key=lambda w: w.start_time)
                for index, execution in enumerate(runs):
                    run = client.get_workflow_handle(handle.run_id, run_id=execution.run_id)
                    history = await run.fetch_history()
                    out = HERE / (f"{name}.json" if index == 0 else f"{name}-{index + 1}.json")
                    write_history(out, history)
                children = [w async for w in client.list_workflows(f'AgentRootRun="{handle.run_id}"')]
                children.sort(key=lambda w: w.id)
                for index, execution in enumerate(children):
                    history = await client.get_workflow_handle(execution.id, run_id=execution.run_id).fetch_history()
                    out = HERE / f"{name}-sub-{index + 1}.json"
                    write_history(out, history)


if __name__ == "__main__":
    asyncio.run(main())
