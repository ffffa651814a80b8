"""Human in the loop on a real Temporal dev server: permission policy,
approvals, requires_action, stop, cancel, search attributes, bad input."""

from __future__ import annotations

import asyncio
import uuid
from functools import partial
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    WorkflowHistory,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.exceptions import ApplicationError

from agentloop import AgentClient, AgentRunFailed, AgentSpec, DecisionRejected, PermissionRule
from agentloop.client.handle import AgentRunHandle
from agentloop.shared.base.errors import (
    INVALID_DECISION_ERROR_TYPE,
    INVALID_REQUEST_ERROR_TYPE,
    REQUEST_TOO_LARGE_ERROR_TYPE,
)
from agentloop.shared.base.messages import Message
from agentloop.shared.base.text import cut
from agentloop.shared.definition.activity_io import ToolDefinition
from agentloop.shared.definition.approvals import (
    MAX_BY_CHARS,
    MAX_CALL_ID_CHARS,
    MAX_OUTPUT_CHARS,
    MAX_REASON_CHARS,
    MAX_REQUEST_BYTES,
)
from agentloop.shared.runs.run import MAX_ERROR_CHARS
from agentloop.testing import call, calls, last_tool_results, reply, script
from agentloop.tools.registry import ToolRegistry
from tests.helpers import agents
from tests.helpers.agents import ASKING_TOOLS, awaiting, echo_results, write
from tests.helpers.processes import processes_with_argument, unique_sleep, wait_until_running
from tests.helpers.runs import task_failures, wait_for_end, wait_state

#: Writes ask for approval (the default permission); heartbeat as in tests.helpers.agents.spec.
spec = partial(agents.spec, default_permission="auto", tools=ASKING_TOOLS)


async def refused(handle: AgentRunHandle, name: str, payload) -> str:
    """Send a raw update (as an ops tool would) that must be rejected; its message."""
    try:
        await handle.workflow_handle.execute_update(name, payload)
    except WorkflowUpdateFailedError as err:
        return err.cause.message
    raise AssertionError(f"update {name} {payload!r} was accepted")


# Permission policy ------------------------------------------------------------


async def test_write_asks_read_does_not_and_approve_runs_the_call(
    agent_client: AgentClient, worker, workspace: Path
) -> None:
    (workspace / "in.txt").write_text("hello")
    model = script(
        calls(call("read_file", {"file_path": "in.txt"})),
        calls(write("out.txt", "copied")),
        echo_results,
    )
    async with worker():
        handle = await agent_client.start(spec(model), "copy in.txt to out.txt")
        state = await wait_state(handle, awaiting(), "the write to wait for approval")
        # The read-only read ran without asking; the write waits.
        (pending,) = state.pending_approvals
        assert pending.call_id == "call_1_0" and pending.tool_name == "write_file"
        assert pending.arguments == {"file_path": "out.txt", "content": "copied"}
        assert pending.step == 2 and "approval required" in pending.reason
        # One numbering: step 1 is finished, step 2 (the one asking) is under way.
        assert (state.step, state.current_step, state.steps_taken) == (1, 2, 2)
        assert pending.asked_at is not None and pending.expires_at is None
        assert not (workspace / "out.txt").exists()
        assert (await handle.pending()).approvals == state.pending_approvals

        accepted = await handle.approve("call_1_0", by="alice")
        assert accepted.call_ids == ["call_1_0"] and accepted.still_pending == []
        result = await handle.result()
    assert result.status == "completed"
    assert (workspace / "out.txt").read_text() == "copied"
    steps = result.report.steps
    assert steps[0].tool_calls[0].permission == "allow" and steps[0].tool_calls[0].decision is None
    report = steps[1].tool_calls[0]
    assert (report.permission, report.decision, report.decided_by) == ("ask", "approve", "alice")
    assert report.waited_ms > 0
    # Tool time is the tools' own; the wait for alice is counted apart.
    assert steps[1].approval_wait_ms == report.waited_ms and steps[0].approval_wait_ms == 0
    assert result.report.total_approval_wait_ms == report.waited_ms
    assert result.report.total_tool_time_ms == pytest.approx(
        steps[0].tool_total_ms + steps[1].tool_total_ms - report.waited_ms)


async def test_deny_reaches_the_model_and_the_run_goes_on(
    agent_client: AgentClient, worker, workspace: Path
) -> None:
    model = script(calls(write("out.txt")), echo_results)
    async with worker():
        handle = await agent_client.start(spec(model), "write")
        await wait_state(handle, awaiting(), "approval")
        await handle.deny("call_0_0", "not in production hours")
        result = await handle.result()
    # A denial is an answer, not a failed tool step: the run completes.
    assert result.status == "completed"
    assert not (workspace / "out.txt").exists()
    (tool_result,) = result.messages[1].tool_results
    assert tool_result.is_error
    assert "denied: not in production hours" in tool_result.content
    assert result.report.steps[0].tool_calls[0].decision == "deny"


@pytest.mark.parametrize("answer", [None, "pretend it was written"])
async def test_skip_does_not_run_the_call(
    agent_client: AgentClient, worker, workspace: Path, answer: str | None
) -> None:
    model = script(calls(write("out.txt")), echo_results)
    async with worker():
        handle = await agent_client.start(spec(model), "write")
        await wait_state(handle, awaiting(), "approval")
        await handle.skip("call_0_0", result=answer)
        result = await handle.result()
    assert not (workspace / "out.txt").exists()
    (tool_result,) = result.messages[1].tool_results
    assert not tool_result.is_error
    assert tool_result.content == (answer or "The call to 'write_file' was skipped by the operator and did not run.")
    report = result.report.steps[0].tool_calls[0]
    assert report.decision == "skip" and report.skipped


async def test_approve_with_override_result_answers_without_running(
    agent_client: AgentClient, worker, workspace: Path
) -> None:
    model = script(calls(write("out.txt")), echo_results)
    async with worker():
        handle = await agent_client.start(spec(model), "write")
        await wait_state(handle, awaiting(), "approval")
        await handle.approve("call_0_0", result="wrote 1 byte (reviewed by ops)")
        result = await handle.result()
    assert not (workspace / "out.txt").exists()
    assert result.final_text == "write_file:wrote 1 byte (reviewed by ops)"
    assert result.report.steps[0].tool_calls[0].decision == "override"


@pytest.mark.parametrize("parallel", [True, False])
async def test_two_pending_approvals_decided_in_reverse_order(
    agent_client: AgentClient, worker, workspace: Path, parallel: bool
) -> None:
    model = script(calls(write("a.txt", "A"), write("b.txt", "B")), echo_results)
    async with worker():
        handle = await agent_client.start(spec(model, parallel_tool_calls=parallel), "write both")
        state = await wait_state(handle, awaiting(2), "both writes pending at once")
        assert [p.call_id for p in state.pending_approvals] == ["call_0_0", "call_0_1"]
        second = await handle.approve("call_0_1")
        assert second.still_pending == ["call_0_0"]
        state = await wait_state(handle, awaiting(1), "one approval left")
        assert state.pending_approvals[0].call_id == "call_0_0"
        await handle.approve("call_0_0")
        result = await handle.result()
    assert (workspace / "a.txt").read_text() == "A" and (workspace / "b.txt").read_text() == "B"
    # Results stay in call order whatever order the decisions came in.
    assert [r.id for r in result.messages[1].tool_results] == ["call_0_0", "call_0_1"]


async def test_approval_timeout_denies_the_call(
    agent_client: AgentClient, worker, workspace: Path
) -> None:
    model = script(calls(write("out.txt")), echo_results)
    async with worker():
        handle = await agent_client.start(spec(model, approval_timeout_seconds=1), "write")
        state = await wait_state(handle, awaiting(), "approval")
        pending = state.pending_approvals[0]
        assert (pending.expires_at - pending.asked_at).total_seconds() == 1
        result = await handle.result()
    assert not (workspace / "out.txt").exists()
    (tool_result,) = result.messages[1].tool_results
    assert tool_result.is_error and "no decision within 1s (approval timeout)" in tool_result.content
    assert result.report.steps[0].tool_calls[0].decision == "timeout"
    with pytest.raises(DecisionRejected, match="not running"):
        await handle.approve("call_0_0")


async def test_argument_patterns_allow_deny_and_ask(
    agent_client: AgentClient, worker, workspace: Path
) -> None:
    rules = [
        PermissionRule(tool="shell_command", action="allow", arguments={"command": r"(echo|ls)( .*)?"}),
        PermissionRule(tool="shell_command", action="deny", arguments={"command": r"rm .*"},
                       reason="deleting files is not allowed"),
        PermissionRule(tool="write_*", action="deny"),
    ]
    model = script(
        calls(
            call("shell_command", {"command": "echo hi"}),
            call("shell_command", {"command": "rm -rf ."}),
            call("shell_command", {"command": "touch made.txt"}),
            write("out.txt"),
        ),
        echo_results,
    )
    async with worker():
        handle = await agent_client.start(spec(model, permissions=rules), "go")
        state = await wait_state(handle, awaiting(), "the unmatched command to ask")
        assert [p.call_id for p in state.pending_approvals] == ["call_0_2"]
        await handle.approve("call_0_2")
        result = await handle.result()
    echo, rm, touch, write_result = result.messages[1].tool_results
    assert "hi" in echo.content and not echo.is_error
    assert rm.is_error and "denied: deleting files is not allowed" in rm.content
    assert not touch.is_error and (workspace / "made.txt").exists()
    assert write_result.is_error and "permission rule 3 (write_*: deny)" in write_result.content
    assert [r.permission for r in result.report.steps[0].tool_calls] == ["allow", "deny", "ask", "deny"]


# requires_action -------------------------------------------------------------

LOOKUP = ToolDefinition(
    name="lookup_order",
    description="Look an order up in the client's database.",
    parameters={"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
)


async def test_client_tool_requires_action_until_outputs_arrive(
    agent_client: AgentClient, worker
) -> None:
    seen_tools: list[list[str]] = []

    def first(request):
        seen_tools.append([t.name for t in request.tools])
        return calls(call("lookup_order", {"order_id": "A-1"}), call("read_file", {"file_path": "missing.txt"}))

    model = script(first, echo_results)
    async with worker():
        handle = await agent_client.start(
            spec(model, tools=["read_file"], client_tools=[LOOKUP]), "where is order A-1?"
        )
        state = await wait_state(handle, lambda s: s.status == "requires_action", "requires_action")
        (action,) = state.pending_actions
        assert (action.call_id, action.tool_name, action.reason) == ("call_0_0", "lookup_order", "client_tool")
        assert action.arguments == {"order_id": "A-1"}
        with pytest.raises(DecisionRejected, match="waits for the client's output"):
            await handle.approve("call_0_0")
        accepted = await handle.submit_tool_outputs({"call_0_0": "shipped on Monday"})
        assert accepted.call_ids == ["call_0_0"] and accepted.still_pending == []
        result = await handle.result()
    assert seen_tools == [["read_file", "lookup_order"]]
    assert result.status == "completed"
    assert result.final_text.startswith("lookup_order:shipped on Monday | read_file:ERR")
    assert result.report.steps[0].tool_calls[0].decision == "client"


async def test_continuation_limit_requires_action_then_continues(
    agent_client: AgentClient, worker, workspace: Path
) -> None:
    model = script(
        calls(call("read_file", {"file_path": "a.txt"})),
        calls(call("read_file", {"file_path": "b.txt"})),
        calls(call("read_file", {"file_path": "c.txt"})),
        echo_results,
    )
    (workspace / "a.txt").write_text("A")
    (workspace / "c.txt").write_text("C")
    async with worker():
        handle = await agent_client.start(spec(model, max_tool_call_continuations=1), "read")
        state = await wait_state(handle, lambda s: s.status == "requires_action", "the limit")
        (action,) = state.pending_actions
        assert (action.call_id, action.reason) == ("call_1_0", "max_tool_call_continuations")
        await handle.submit_tool_outputs({"call_1_0": "B (read by the client)"})
        # The count starts again after the client's answer: one more
        # continuation runs tools before the limit applies again.
        result = await handle.result()
    assert result.status == "completed"
    assert result.final_text.startswith("read_file:") and result.final_text.endswith("\tC")
    assert result.messages[3].tool_results[0].content == "B (read by the client)"
    assert result.report.step_count == 4


# Bad input --------------------------------------------------------------------


async def test_bad_decisions_are_rejected_and_the_run_is_unharmed(
    agent_client: AgentClient, worker, workspace: Path
) -> None:
    model = script(calls(write("a.txt", "A"), write("b.txt", "B")), echo_results)
    async with worker():
        handle = await agent_client.start(spec(model), "write")
        await wait_state(handle, awaiting(2), "approvals")
        raw = handle.workflow_handle

        with pytest.raises(DecisionRejected,
                           match=r"no call 'nope' waits for approval .* waiting now: call_0_0, call_0_1"):
            await handle.approve("nope")
        message = await refused(handle, "approve", {"call_id": "call_0_0", "decision": "yes"})
        assert message.startswith("malformed approve payload: decision: Input should be 'approve', 'deny' or 'skip'")
        message = await refused(handle, "approve", {"id": "call_0_0"})
        assert message.startswith("malformed approve payload: call_id: Field required")
        assert "expected e.g. {\"call_id\": \"call_0_0\", \"decision\": \"approve\"}" in message
        message = await refused(handle, "approve", {"call_id": "call_0_0", "decision": "deny", "result": "x"})
        assert "a denial takes a reason, not a result" in message
        with pytest.raises(DecisionRejected, match="no call 'call_0_0' waits for a client output"):
            await handle.submit_tool_outputs({"call_0_0": "x"})
        await handle.approve("call_0_0")
        with pytest.raises(DecisionRejected, match="call call_0_0 was already decided"):
            await handle.deny("call_0_0")

        # Signals cannot answer; rejected ones are noted in the state.
        await raw.signal("approve", {"call": "call_0_1"})
        await raw.signal("approve", "yes please")
        await raw.signal("approve", {"call_id": "ghost"})
        state = await wait_state(handle, lambda s: len(s.rejected_signals) == 3, "rejections noted")
        assert "approve signal ignored: malformed approve payload: call_id: Field required" in state.rejected_signals[0]
        assert "expected e.g." in state.rejected_signals[1]
        assert "no call 'ghost' waits for approval" in state.rejected_signals[2]
        assert [p.call_id for p in state.pending_approvals] == ["call_0_1"]

        await raw.signal("approve", {"call_id": "call_0_1", "decision": "approve"})
        result = await handle.result()
    assert result.status == "completed"
    assert (workspace / "a.txt").exists() and (workspace / "b.txt").exists()
    # Rejected updates never reached history.
    history = await raw.fetch_history()
    updates = [e for e in history.events if e.HasField("workflow_execution_update_accepted_event_attributes")]
    assert len(updates) == 1


async def test_submit_outputs_must_cover_every_pending_call(
    agent_client: AgentClient, worker
) -> None:
    lookup2 = LOOKUP.model_copy(update={"name": "lookup_customer"})
    model = script(
        calls(call("lookup_order", {"order_id": "1"}), call("lookup_customer", {"order_id": "1"})),
        echo_results,
    )
    async with worker():
        handle = await agent_client.start(spec(model, tools=[], client_tools=[LOOKUP, lookup2]), "go")
        await wait_state(handle, lambda s: len(s.pending_actions) == 2, "two actions")
        with pytest.raises(DecisionRejected, match="outputs are missing for call_0_1"):
            await handle.submit_tool_outputs({"call_0_0": "x"})
        with pytest.raises(DecisionRejected, match="no call 'call_9' waits for a client output"):
            await handle.submit_tool_outputs({"call_0_0": "x", "call_0_1": "y", "call_9": "z"})
        message = await refused(handle, "submit_tool_outputs", {"tool_outputs": []})
        assert "tool_outputs: List should have at least 1 item" in message
        # OpenAI's spelling (tool_call_id) and a bare list are accepted too.
        await handle.workflow_handle.signal(
            "submit_tool_outputs",
            [{"tool_call_id": "call_0_0", "output": "order 1"}, {"call_id": "call_0_1", "output": "bob"}],
        )
        result = await handle.result()
    assert result.final_text == "lookup_order:order 1 | lookup_customer:bob"


# Payload limits -----------------------------------------------------------------


def accepted_updates(history: WorkflowHistory) -> int:
    return sum(1 for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED)


async def refusal(handle: AgentRunHandle, name: str, payload) -> ApplicationError:
    """Send a raw update that must be refused; the failure it was refused with."""
    try:
        await handle.workflow_handle.execute_update(name, payload)
    except WorkflowUpdateFailedError as err:
        assert isinstance(err.cause, ApplicationError), err.cause
        return err.cause
    raise AssertionError(f"update {name} was accepted")


async def test_a_stop_reason_over_a_megabyte_is_cut_and_the_run_ends_stopped(
    agent_client: AgentClient, worker, workspace: Path
) -> None:
    model = script(calls(write("out.txt")), reply("unreachable"))
    async with worker():
        handle = await agent_client.start(spec(model), "write")
        await wait_state(handle, awaiting(), "approval")
        await handle.stop("r" * 1_500_000)
        history = await wait_for_end(handle.workflow_handle)
        assert task_failures(history) == []
        result = await handle.result()
        # Queries keep answering after the run ended.
        state = await handle.state()
        report = await handle.report()
    assert (result.status, result.reason) == ("stopped", "stopped")
    assert result.error == "stopped: " + cut("r" * 1_500_000, MAX_REASON_CHARS), result.error[-80:]
    assert len(result.error) <= len("stopped: ") + MAX_REASON_CHARS
    assert result.report.error == result.error == report.error == state.error
    (note,) = state.rejected_signals
    assert note == (
        f"stop signal: reason cut to {MAX_REASON_CHARS:,} characters (it had 1,500,000; "
        f"the limit is {MAX_REASON_CHARS:,})"
    )
    assert not (workspace / "out.txt").exists()


async def test_oversized_decision_fields_by_update_are_refused_and_change_nothing(
    agent_client: AgentClient, worker, workspace: Path
) -> None:
    model = script(calls(write("out.txt")), echo_results)
    async with worker():
        handle = await agent_client.start(spec(model), "write")
        await wait_state(handle, awaiting(), "approval")
        for field, size, limit in (("reason", 20_000, MAX_REASON_CHARS), ("by", 5_000, MAX_BY_CHARS)):
            error = await refusal(handle, "approve", {"call_id": "call_0_0", "decision": "deny", field: "x" * size})
            assert error.type == INVALID_REQUEST_ERROR_TYPE and error.non_retryable
            assert f"{field}: String should have at most {limit} characters" in error.message
            assert len(error.message) < 500
        with pytest.raises(DecisionRejected, match=f"reason: String should have at most {MAX_REASON_CHARS}"):
            await handle.deny("call_0_0", "x" * 20_000)
        with pytest.raises(DecisionRejected, match=f"by: String should have at most {MAX_BY_CHARS}"):
            await handle.approve("call_0_0", by="x" * 5_000)
        state = await handle.state()
        assert [p.call_id for p in state.pending_approvals] == ["call_0_0"] and state.rejected_signals == []
        await handle.approve("call_0_0", by="ops")
        result = await handle.result()
    assert result.status == "completed" and (workspace / "out.txt").exists()
    history = await handle.workflow_handle.fetch_history()
    assert accepted_updates(history) == 1 and task_failures(history) == []


async def test_oversized_decision_fields_by_signal_are_cut_and_listed(
    agent_client: AgentClient, worker, workspace: Path
) -> None:
    model = script(calls(write("out.txt")), echo_results)
    async with worker():
        handle = await agent_client.start(spec(model), "write")
        await wait_state(handle, awaiting(), "approval")
        await handle.workflow_handle.signal(
            "approve", {"call_id": "call_0_0", "decision": "deny", "reason": "r" * 1_500_000, "by": "b" * 5_000}
        )
        state = await wait_state(handle, lambda s: s.rejected_signals, "the cuts noted")
        assert state.rejected_signals == [
            (f"approve signal: reason cut to {MAX_REASON_CHARS:,} characters (it had 1,500,000; "
             f"the limit is {MAX_REASON_CHARS:,})"),
            f"approve signal: by cut to {MAX_BY_CHARS:,} characters (it had 5,000; the limit is {MAX_BY_CHARS:,})",
        ]
        result = await handle.result()
    # The decision was applied, with its fields cut.
    assert result.status == "completed" and not (workspace / "out.txt").exists()
    (denied,) = result.messages[1].tool_results
    assert denied.is_error and "denied: rrrr" in denied.content and " characters cut]" in denied.content
    assert len(denied.content) < MAX_REASON_CHARS + 300
    report = result.report.steps[0].tool_calls[0]
    assert report.decision == "deny" and report.decided_by.startswith("bbbb")
    assert len(report.decided_by) <= MAX_BY_CHARS and report.decided_by == cut("b" * 5_000, MAX_BY_CHARS)


async def test_an_oversized_client_output_is_refused_by_update_and_cut_by_signal(
    agent_client: AgentClient, worker
) -> None:
    model = script(calls(call("lookup_order", {"order_id": "1"})), echo_results)
    async with worker():
        handle = await agent_client.start(spec(model, tools=[], client_tools=[LOOKUP]), "go")
        await wait_state(handle, lambda s: s.status == "requires_action", "requires_action")
        output = "o" * (MAX_OUTPUT_CHARS + 200_000)
        error = await refusal(handle, "submit_tool_outputs",
                              {"tool_outputs": [{"call_id": "call_0_0", "output": output}]})
        assert error.type == INVALID_REQUEST_ERROR_TYPE and error.non_retryable
        assert f"tool_outputs.0.output: String should have at most {MAX_OUTPUT_CHARS} characters" in error.message
        await handle.workflow_handle.signal("submit_tool_outputs", [{"call_id": "call_0_0", "output": output}])
        state = await wait_state(handle, lambda s: s.rejected_signals, "the cut noted")
        assert state.rejected_signals == [
            f"submit_tool_outputs signal: output cut to {MAX_OUTPUT_CHARS:,} characters (it had 1,200,000; "
            f"the limit is {MAX_OUTPUT_CHARS:,})"
        ]
        result = await handle.result()
    # Then cut again to the spec's tool_output_limit, as every answer is.
    (answer,) = result.messages[1].tool_results
    assert answer.content.startswith("ooo") and "the answer exceeded tool_output_limit" in answer.content


async def test_a_two_megabyte_approve_is_refused_at_once_and_a_correct_one_goes_through(
    agent_client: AgentClient, worker, workspace: Path
) -> None:
    # Under Temporal's 2 MiB payload limit and the server's admission limit
    # for updates in flight (history.maxInFlightUpdatePayloads, 1.9 MB on every
    # server agentloop starts), over the run's own: the validator weighs it
    # first and refuses it with a short message, never quoting it back.
    model = script(calls(write("out.txt")), echo_results)
    async with worker():
        handle = await agent_client.start(spec(model), "write")
        await wait_state(handle, awaiting(), "approval")
        error = await refusal(handle, "approve", {"call_id": "call_0_0", "result": "y" * 1_800_000})
        assert error.type == REQUEST_TOO_LARGE_ERROR_TYPE and error.non_retryable
        assert error.message == (
            f"the approve request is 1,800,035 bytes; a run takes requests of at most {MAX_REQUEST_BYTES:,} "
            "bytes: send a shorter result (the model sees it cut to the spec's tool_output_limit anyway)"
        )
        # A bad call id of 1.8 MB, and right after it a correct decision.
        big = asyncio.create_task(refusal(handle, "approve", {"call_id": "X" * 1_800_000, "decision": "approve"}))
        accepted = await handle.approve("call_0_0")
        error = await big
        assert accepted.call_ids == ["call_0_0"]
        assert error.type == REQUEST_TOO_LARGE_ERROR_TYPE and len(error.message) < 300, error.message
        assert f"at most {MAX_REQUEST_BYTES:,} bytes" in error.message and "XXX" not in error.message
        result = await handle.result()
    assert result.status == "completed" and (workspace / "out.txt").exists()
    history = await handle.workflow_handle.fetch_history()
    assert task_failures(history) == [] and accepted_updates(history) == 1


async def test_the_client_refuses_a_request_over_the_limit_without_sending_it(
    agent_client: AgentClient, worker, workspace: Path
) -> None:
    model = script(calls(write("out.txt")), echo_results)
    async with worker():
        handle = await agent_client.start(spec(model), "write")
        await wait_state(handle, awaiting(), "approval")
        before = len((await handle.workflow_handle.fetch_history()).events)
        with pytest.raises(DecisionRejected, match=f"the approve request is 2,100,0[0-9]{{2}} bytes; "
                                                   "a run takes requests of at most "
                                                   f"{MAX_REQUEST_BYTES:,} bytes; nothing was sent"):
            await handle.approve("X" * 2_100_000)
        with pytest.raises(DecisionRejected, match="result: String should have at most 1000000 characters"):
            await handle.skip("call_0_0", result="y" * 2_100_000)
        assert len((await handle.workflow_handle.fetch_history()).events) == before
        await handle.approve("call_0_0")
        assert (await handle.result()).status == "completed"


async def test_refusals_never_echo_a_long_call_id(agent_client: AgentClient, worker) -> None:
    model = script(calls(write("out.txt")), echo_results)
    async with worker():
        handle = await agent_client.start(spec(model), "write")
        await wait_state(handle, awaiting(), "approval")
        error = await refusal(handle, "approve", {"call_id": "X" * 100_000})
        assert error.type == INVALID_REQUEST_ERROR_TYPE and error.non_retryable
        assert len(error.message) < 400 and "X" * 35 + "…[99,965 characters cut]" in error.message, error.message
        assert f"at most {MAX_CALL_ID_CHARS:,}" in error.message
        error = await refusal(handle, "submit_tool_outputs", {"tool_outputs": [{"call_id": "Y" * 900, "output": "o"}]})
        assert error.type == INVALID_DECISION_ERROR_TYPE and len(error.message) < 400, error.message
        await handle.workflow_handle.signal("approve", {"call_id": "Z" * 100_000})
        await handle.workflow_handle.signal("approve", {"call_id": "call_0_0", "Q" * 100_000: 1})
        state = await wait_state(handle, lambda s: len(s.rejected_signals) == 2, "two rejections")
        assert all(len(note) < 600 for note in state.rejected_signals), state.rejected_signals
        await handle.approve("call_0_0")
        await handle.result()


async def test_a_failed_run_whose_error_quotes_megabytes_of_tool_errors_still_fails_once(
    agent_client: AgentClient, worker, registry: ToolRegistry
) -> None:
    # "every tool call of step 1 failed (...)" quotes each call's error; two
    # calls of 450,000 characters each made an error of 0.9 MB, which the run
    # carried three times (result, report, failure message): 2.7 MB.
    from agentloop import ToolError

    @registry.tool
    def shout() -> str:
        """Fails loudly."""
        raise ToolError("e" * 450_000)

    model = script(calls(call("shout"), call("shout")))
    async with worker():
        handle = await agent_client.start(
            spec(model, tools=["shout"], default_permission="allow", tool_output_limit=1_000_000), "go"
        )
        history = await wait_for_end(handle.workflow_handle)
        assert task_failures(history) == []
        with pytest.raises(AgentRunFailed) as info:
            await handle.result()
    error = info.value.result.error
    assert info.value.reason == "tool_error" and error.startswith("every tool call of step 1 failed (shout: Error: eee")
    assert len(error) <= MAX_ERROR_CHARS and error.endswith(" characters cut]")


async def test_transcript_query_arguments_are_bounded(agent_client: AgentClient, worker) -> None:
    # The query's answer can ride in a workflow task's completion: a page is
    # at most 1 MB whatever it asks for, and a bad argument is not echoed.
    big = [Message.user(c * 400_000) for c in "abc"]
    async with worker():
        result = await agent_client.run(spec(script(reply("done")), tools=[]), big)
        raw = agent_client.get_handle(result.run_id).workflow_handle
        page = await raw.query("transcript", {"start": 0, "max_bytes": 10**12})
        assert page["total"] == 4 and len(page["messages"]) == 2
        assert page["messages"][0]["content"][0]["text"].startswith("aaa")
        with pytest.raises(WorkflowQueryFailedError, match="transcript start -5 is negative"):
            await raw.query("transcript", {"start": -5})
        with pytest.raises(WorkflowQueryFailedError) as info:
            await raw.query("transcript", {"start": "Q" * 100_000})
        message = str(info.value)
        assert message.startswith("malformed transcript request: start: Input should be a valid integer")
        assert len(message) < 400 and "QQQQQQQQ" not in message, message


# Stop and cancel ----------------------------------------------------------------


async def test_stop_while_awaiting_approval_ends_stopped(
    agent_client: AgentClient, worker, workspace: Path
) -> None:
    model = script(calls(write("out.txt")), reply("unreachable"))
    async with worker():
        handle = await agent_client.start(spec(model), "write")
        await wait_state(handle, awaiting(), "approval")
        await handle.stop("changed my mind")
        result = await handle.result()
    assert (result.status, result.reason) == ("stopped", "stopped")
    assert result.error == "stopped: changed my mind"
    assert not (workspace / "out.txt").exists()
    (tool_result,) = result.messages[1].tool_results
    assert "did not run: the run was stopped" in tool_result.content
    assert result.report.step_count == 1 and result.report.steps[0].tool_calls[0].decision == "stopped"


async def test_stop_finishes_the_current_step_first(
    agent_client: AgentClient, worker, workspace: Path
) -> None:
    entered = asyncio.Event()
    release = asyncio.Event()

    async def slow_step(request):
        entered.set()
        await release.wait()
        return calls(call("read_file", {"file_path": "f.txt"}))

    (workspace / "f.txt").write_text("content")
    model = script(slow_step, reply("unreachable"))
    async with worker():
        handle = await agent_client.start(spec(model), "read")
        await asyncio.wait_for(entered.wait(), 30)
        await handle.stop()
        await wait_state(handle, lambda s: s.stop_requested, "stop noted")
        release.set()
        result = await handle.result()
    assert result.status == "stopped" and result.error == "stopped by request"
    # The step that was running finished, tools included; no further step ran.
    assert [m.role for m in result.messages] == ["assistant", "tool"]
    assert result.messages[1].tool_results[0].content.endswith("content")
    assert result.report.step_count == 1


async def test_cancel_during_a_long_llm_call(agent_client: AgentClient, worker, workspace: Path) -> None:
    (workspace / "x").write_text("x")
    entered = asyncio.Event()
    outcome: list[str] = []

    async def hang(request):
        entered.set()
        try:
            await asyncio.sleep(300)
        except asyncio.CancelledError:
            outcome.append("cancelled")
            raise
        return reply("unreachable")

    model = script(calls(call("read_file", {"file_path": "x"})), hang)
    async with worker():
        handle = await agent_client.start(spec(model), "think hard")
        await asyncio.wait_for(entered.wait(), 30)
        await handle.cancel()
        with pytest.raises(AgentRunFailed) as info:
            await handle.result()
        assert info.value.reason == "cancelled"
        # The activity received the cancel before the run ended.
        assert outcome == ["cancelled"]
        state = await handle.state()
        messages = await handle.messages()
    assert state.status == "cancelled"
    assert [m.role for m in messages] == ["user", "assistant", "tool"]


async def test_a_cancel_that_finds_the_llm_step_finishing_still_ends_the_run(
    agent_client: AgentClient, worker, workspace: Path
) -> None:
    # The cancel reaches the LLM step as it completes: the step returns its
    # answer anyway (a call that needs approval). The run must not take the
    # answer as a reason to go on and wait for an approval forever.
    entered = asyncio.Event()

    async def finish_despite_cancel(request):
        entered.set()
        try:
            await asyncio.sleep(300)
        except asyncio.CancelledError:
            pass
        return calls(call("write_file", {"file_path": "x.txt", "content": "x"}))

    async with worker():
        handle = await agent_client.start(spec(script(finish_despite_cancel)), "write it")
        await asyncio.wait_for(entered.wait(), 30)
        await handle.cancel()
        # A guard against a hang, not a speed check: the run ends within
        # seconds, or (before the fix) never.
        with pytest.raises(AgentRunFailed) as info:
            await asyncio.wait_for(handle.result(), 60)
        assert info.value.reason == "cancelled"
        assert (await handle.state()).status == "cancelled"
    assert not (workspace / "x.txt").exists()


async def test_cancel_during_a_long_shell_command_kills_it(
    agent_client: AgentClient, worker, workspace: Path
) -> None:
    # The command runs in its own PID namespace: find it by a unique argument.
    tag = unique_sleep(300)
    command = f"exec sleep {tag}"
    model = script(calls(call("shell_command", {"command": command, "timeout_seconds": 600})), reply("x"))
    async with worker():
        handle = await agent_client.start(
            spec(model, tool_timeout_seconds=900, default_permission="allow"), "sleep"
        )
        await wait_until_running(tag)  # the command started
        await handle.cancel()
        with pytest.raises(AgentRunFailed) as info:
            await handle.result()
        assert info.value.reason == "cancelled"
        # The run ended only after the tool stopped: the process is gone.
        assert processes_with_argument(tag) == []
        assert (await handle.state()).running_tool_calls == []


# Search attributes ---------------------------------------------------------------


async def test_search_attributes_follow_the_run(agent_client: AgentClient, worker) -> None:
    model = script(calls(write("out.txt")), reply("ok"))
    agent = AgentSpec(model=model, name=f"indexer-{uuid.uuid4().hex[:6]}", tools=["write_file"])

    async def ids(**filters) -> list[tuple[str, str, list[str]]]:
        runs = await agent_client.list_runs(name=agent.name, **filters)
        return [(r.run_id, r.status, r.pending_tools) for r in runs]

    async def eventually(expected, **filters) -> None:
        deadline = asyncio.get_running_loop().time() + 15
        while (found := await ids(**filters)) != expected:
            assert asyncio.get_running_loop().time() < deadline, f"visibility shows {found}, want {expected}"
            await asyncio.sleep(0.1)

    async with worker():
        handle = await agent_client.start(agent, "write")
        await wait_state(handle, awaiting(), "approval")
        await eventually([(handle.run_id, "awaiting_approval", ["write_file"])], status="awaiting_approval")
        await eventually([(handle.run_id, "awaiting_approval", ["write_file"])],
                         query='AgentPendingTools="write_file"')
        await handle.approve("call_0_0")
        await handle.result()
        await eventually([(handle.run_id, "completed", [])], status="completed")
        await eventually([], status="awaiting_approval")
    (summary,) = await agent_client.list_runs(name=agent.name)
    assert summary.model == model and summary.agent_name == agent.name and summary.closed_at


async def test_worker_registry_unchanged_by_policy(registry: ToolRegistry) -> None:
    # The policy's default leans on each tool's read_only flag: the built-in
    # readers are read-only, the writers and the shell are not.
    flags = {name: registry.get(name).definition().read_only for name in registry.names()}
    assert flags == {
        "apply_patch": False,
        "grep_files": True,
        "list_dir": True,
        "read_file": True,
        "shell_command": False,
        "view_image": True,
        "write_file": False,
    }


async def test_stop_during_the_last_allowed_step_ends_stopped(
    agent_client: AgentClient, worker, workspace: Path
) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    async def slow_step(request):
        entered.set()
        await release.wait()
        return calls(call("read_file", {"file_path": "f.txt"}))

    (workspace / "f.txt").write_text("content")
    async with worker():
        handle = await agent_client.start(spec(script(slow_step), max_steps=1), "read")
        await asyncio.wait_for(entered.wait(), 30)
        await handle.stop("enough")
        await wait_state(handle, lambda s: s.stop_requested, "stop noted")
        release.set()
        result = await handle.result()
    # Stopped, not failed for running out of steps.
    assert (result.status, result.reason) == ("stopped", "stopped")


async def test_client_tool_with_malformed_arguments_answers_the_model(
    agent_client: AgentClient, worker
) -> None:
    from agentloop.shared.base.messages import ToolCallPart

    def first(request):
        results = last_tool_results(request)
        if results:
            return reply(f"{results[0].is_error}: {results[0].content[:40]}")
        from agentloop.shared.definition.activity_io import ModelResponse
        bad = ToolCallPart(id="call_bad", name="lookup_order", arguments={}, arguments_error="not JSON",
                           raw_arguments="{order")
        return ModelResponse(message=Message(role="assistant", content=[bad]), finish_reason="tool_calls")

    async with worker():
        result = await agent_client.run(
            spec(script(first, first), tools=[], client_tools=[LOOKUP], max_consecutive_failed_tool_steps=2), "go"
        )
    assert result.final_text == "True: Invalid arguments for tool 'lookup_order"


async def test_sequential_approval_timeout_counts_from_when_asked(
    agent_client: AgentClient, worker, workspace: Path
) -> None:
    model = script(calls(write("a.txt"), write("b.txt")), echo_results)
    async with worker():
        handle = await agent_client.start(
            spec(model, approval_timeout_seconds=2, parallel_tool_calls=False), "write both"
        )
        state = await wait_state(handle, awaiting(2), "both asked")
        assert len({p.expires_at for p in state.pending_approvals}) == 1
        result = await handle.result()
    # Neither was decided: both time out at the same moment, not one after the other.
    first, second = result.report.steps[0].tool_calls
    assert first.decision == second.decision == "timeout"
    assert second.waited_ms < 1000
