"""The A2A door's pure parts: task ids, task states, what a reply answers,
and a run's events as a task's stream updates."""

from __future__ import annotations

from datetime import UTC, datetime

from a2a.types import a2a_pb2 as pb

from agentloop.server.a2a.events import TaskStream
from agentloop.server.a2a.handler import idempotent_run_id
from agentloop.server.a2a.mapping import Decide, Refuse, SubmitOutputs, TaskRef, answer_of, parse_task_id, task_state
from agentloop.shared.definition.activity_io import StreamDelta
from agentloop.shared.definition.approvals import PendingAction, PendingApproval
from agentloop.shared.runs import events as ev
from agentloop.shared.runs.run import RunState
from agentloop.shared.runs.threads import TurnResult

NOW = datetime(2026, 1, 1, tzinfo=UTC)
ASKED = PendingApproval(call_id="c1", tool_name="write_file", arguments={"file_path": "a"}, step=1, asked_at=NOW)


def test_task_ids_name_a_run_and_a_turn() -> None:
    assert parse_task_id("run-1") == TaskRef("run-1", 1) and TaskRef("run-1", 1).task_id == "run-1"
    assert parse_task_id("run-1~3") == TaskRef("run-1", 3) and TaskRef("run-1", 3).task_id == "run-1~3"
    assert parse_task_id("a~b") == TaskRef("a~b", 1) and parse_task_id("x~0") == TaskRef("x~0", 1)
    assert idempotent_run_id("a", "ops", "k") == idempotent_run_id("a", "ops", "k") != idempotent_run_id("a", "x", "k")


def test_task_states_from_the_run() -> None:
    def run(status: str, **fields) -> RunState:
        return RunState(run_id="r", status=status, **fields)  # type: ignore[arg-type]

    assert task_state(run("running", turn=1, busy=True), 1) == "working"
    assert task_state(run("awaiting_approval", turn=1, busy=True), 1) == "input-required"
    assert task_state(run("requires_action", turn=1, busy=True), 1) == "input-required"
    assert task_state(run("idle", turn=1), 1) == "completed"  # the turn ended; the thread waits
    assert task_state(run("running", turn=3, busy=True), 2) == "completed"
    assert task_state(run("idle"), 1) == "submitted"
    assert task_state(run("cancelled"), 1) == "canceled" and task_state(run("failed"), 1) == "failed"
    assert task_state(run("running", turn=2, busy=True), 1, TurnResult(turn=1, status="failed")) == "failed"


def test_what_a_reply_answers() -> None:
    decided = answer_of(["Approve."], [], [ASKED], [], "ops")
    assert isinstance(decided, Decide) and decided.decisions[0].decision == "approve"
    assert decided.decisions[0].by == "ops" and decided.decisions[0].call_id == "c1"
    denied = answer_of([], [{"decision": "deny", "reason": "no"}], [ASKED], [], "ops")
    assert isinstance(denied, Decide) and (denied.decisions[0].decision, denied.decisions[0].reason) == ("deny", "no")
    assert isinstance(answer_of(["maybe"], [], [ASKED], [], "ops"), Refuse)
    other = answer_of([], [{"decision": "approve", "call_id": "zz"}], [ASKED], [], "ops")
    assert isinstance(other, Refuse) and "does not wait" in other.reason
    two = [ASKED, ASKED.model_copy(update={"call_id": "c2"})]
    assert "name each" in answer_of(["yes"], [], two, [], "ops").reason  # type: ignore[union-attr]
    assert isinstance(answer_of([], [{"decision": "maybe"}], [ASKED], [], "ops"), Refuse)
    action = PendingAction(call_id="a1", tool_name="lookup", step=1, asked_at=NOW, reason="client_tool")
    outputs = answer_of([], [{"tool_outputs": [{"call_id": "a1", "output": "7"}]}], [], [action], "ops")
    assert isinstance(outputs, SubmitOutputs) and outputs.tool_outputs[0]["output"] == "7"
    assert isinstance(answer_of(["yes"], [], [], [], "ops"), Refuse)


def test_events_become_status_and_artifact_updates() -> None:
    stream = TaskStream(TaskRef("r", 1))
    assert stream.feed(ev.RunCreated(run_id="r", time=NOW, agent_name="a", model="m"))[0].status.state == \
        pb.TASK_STATE_WORKING
    delta = ev.MessageDelta(run_id="r", time=NOW, message_id="m", delta=StreamDelta(kind="text", text="he"))
    first, second = stream.feed(delta)[0], stream.feed(delta)[0]
    assert (first.append, second.append) == (False, True)
    asked = stream.feed(ev.ApprovalRequested(run_id="r", time=NOW, approval=ASKED))[0]
    assert asked.status.state == pb.TASK_STATE_INPUT_REQUIRED
    assert asked.status.message.parts[-1].data.struct_value.fields["tool"].string_value == "write_file"
    artifact, done = stream.feed(ev.TurnEnded(run_id="r", time=NOW, turn=1, status="completed", final_text="hehe"))
    assert artifact.last_chunk and artifact.artifact.parts[0].text == "hehe"
    assert done.status.state == pb.TASK_STATE_COMPLETED and stream.done


def test_a_later_turn_begins_at_its_turn_and_replies_skip_what_was_answered() -> None:
    later = TaskStream(TaskRef("r", 2), started=False)
    assert later.feed(ev.TurnEnded(run_id="r", time=NOW, turn=1, status="completed")) == []
    assert later.feed(ev.TurnStarted(run_id="r", time=NOW, turn=2))[0].status.state == pb.TASK_STATE_WORKING
    answered = TaskStream(TaskRef("r", 1), skip_until={"c1"})
    assert answered.feed(ev.ApprovalRequested(run_id="r", time=NOW, approval=ASKED)) == []
    assert answered.feed(ev.ApprovalResolved(run_id="r", time=NOW, call_id="c1", decision="approve")) == []
    assert answered.feed(ev.RunCompleted(run_id="r", time=NOW))[-1].status.state == pb.TASK_STATE_COMPLETED
    replay = TaskStream(TaskRef("r", 1), pending=set())
    assert replay.feed(ev.ApprovalRequested(run_id="r", time=NOW, approval=ASKED)) == [] and replay.unsure
