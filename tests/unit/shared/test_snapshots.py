"""Export, restore and fork (README "Conversations"): the pure helpers of
agentloop.shared.runs.snapshots (runs and the CLI: tests/server/runs/test_snapshots.py)."""


from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field
from temporalio.contrib.pydantic import pydantic_data_converter

from agentloop import AgentSpec
from agentloop.shared.base.errors import UserError
from agentloop.shared.base.messages import Message, ToolCallPart
from agentloop.shared.base.usage import Usage
from agentloop.shared.definition.approvals import ApprovalDecision, PendingApproval, ToolGate, ToolOutput
from agentloop.shared.runs.report import AgentRunReport, StepReport
from agentloop.shared.runs.run import AgentRunInput
from agentloop.shared.runs.snapshots import (
    AgentSnapshot,
    SnapshotError,
    fork_input,
    load_snapshot,
    messages_through_step,
    restore_input,
    restores_completed,
    tool_changes,
    tool_warnings,
)
from agentloop.shared.runs.state import PendingStep
from agentloop.shared.runs.threads import ThreadOptions


def snapshot_of(messages: list[Message], step_ends: dict[int, int], **kw) -> AgentSnapshot:
    now = datetime.now(UTC)
    return AgentSnapshot(run_id="run-a", status=kw.pop("status", "completed"), exported_at=now,
                         spec=AgentSpec(model="scripted:demo", tools=kw.get("tools", ["read_file"])),
                         messages=messages, step_ends=step_ends, step=len(step_ends),
                         report=AgentRunReport(id="run-a", model="scripted:demo", started_at=now), **kw)


CONVERSATION = [Message.user("go"), Message.assistant("a1"), Message.user("more"), Message.assistant("a2"),
                Message.user("again"), Message.assistant("a3")]


def test_messages_through_step_cuts_at_the_end_of_the_step() -> None:
    snap = snapshot_of(CONVERSATION, {1: 2, 2: 4, 3: 6})
    assert messages_through_step(snap, 1) == CONVERSATION[:2]
    assert messages_through_step(snap, 3) == CONVERSATION
    forked = fork_input(snap, 2, "instead")
    assert forked.messages == [*CONVERSATION[:4], Message.user("instead")]
    assert (forked.origin.kind, forked.origin.from_run, forked.origin.at_step) == ("forked", "run-a", 2)


@pytest.mark.parametrize(("step", "says"), [
    (4, "cannot be forked at step 4: the run has finished 3 steps; fork at a step from 1 to 3"),
    (0, "cannot be forked at step 0: steps are numbered from 1; fork at a step from 1 to 3"),
])
def test_a_step_out_of_range_is_a_sentence(step: int, says: str) -> None:
    with pytest.raises(SnapshotError) as err:
        messages_through_step(snapshot_of(CONVERSATION, {1: 2, 2: 4, 3: 6}), step)
    assert str(err.value) == f"run run-a {says}"


def test_steps_before_a_compaction_cannot_be_forked() -> None:
    # Compaction rewrote the conversation during step 4: steps 1 to 3 are gone.
    with pytest.raises(SnapshotError, match="step 2: its messages were rewritten when the conversation was "
                                            "compacted; fork at a step from 4 to 5"):
        messages_through_step(snapshot_of(CONVERSATION, {4: 4, 5: 6}), 2)


def test_tool_changes_and_their_warnings() -> None:
    assert tool_changes(["a", "b", "c"], ["c", "d", "a"]) == (["b"], ["d"])
    removed, added = tool_warnings(["a", "b"], ["a", "d"], "run-a")
    assert (removed.type, removed.tool, added.type, added.tool) == ("tool_removed", "b", "tool_added", "d")
    assert "not on this worker; the run goes on without it" in removed.message


def test_snapshot_json_round_trip_and_newer_minor_versions() -> None:
    snap = snapshot_of(CONVERSATION, {1: 2})
    assert load_snapshot(snap.to_json()) == snap
    newer = json.loads(snap.to_json()) | {"version": "1.7", "field_from_1_7": {"x": 1}}
    assert load_snapshot(newer) == snap.model_copy(update={"version": "1.7"})  # unknown fields ignored


@pytest.mark.parametrize(("data", "says"), [
    ("{not json", ("the snapshot is not valid JSON (Expecting property name enclosed in double quotes at line 1, "
                   "column 2)")),
    ("[1, 2]", "the snapshot is not an agentloop snapshot: it is not a JSON object"),
    ('{"format": "other"}', "the snapshot is not an agentloop snapshot: its \"format\" is not 'agentloop.snapshot'"),
    ('{"format": "agentloop.snapshot", "version": "2.0"}',
     ("the snapshot is snapshot version 2.0, from a newer agentloop; this agentloop reads version 1.x snapshots "
      "only")),
    ('{"format": "agentloop.snapshot", "version": "0.9"}', "from an older agentloop"),
    ('{"format": "agentloop.snapshot", "version": "one"}', "has no valid \"version\""),
    ('{"format": "agentloop.snapshot", "version": "1.0", "run_id": "r"}', "the snapshot is not a valid snapshot: "),
])
def test_what_is_not_a_snapshot_of_this_major_version_is_refused(data: str, says: str) -> None:
    with pytest.raises(SnapshotError) as err:
        load_snapshot(data)
    assert says in str(err.value)
    assert isinstance(err.value, UserError)


def test_restore_input_carries_the_step_under_way() -> None:
    now = datetime.now(UTC)
    write_call = ToolCallPart(id="c1", name="write_file", arguments={"file_path": "x"})
    gate = ToolGate(call=write_call, approval=PendingApproval(call_id="c1", tool_name="write_file", step=2,
                                                              asked_at=now))
    under_way = PendingStep(gates=[gate], report=StepReport(index=1, type="tool_followup"))
    snap = snapshot_of(CONVERSATION, {1: 2}, status="awaiting_approval", tools=["write_file"],
                       pending_step=under_way, pending_approvals=[gate.approval])
    built = restore_input(snap)
    assert built.messages == CONVERSATION and built.origin.kind == "restored"
    assert built.origin.tools == ["write_file"] and built.origin.pending_step == under_way
    with pytest.raises(SnapshotError, match="has calls under way; a new message cannot follow them"):
        restore_input(snap, message="next")
    # A run that ended waits for nothing: a new message may follow it.
    ended = snap.model_copy(update={"status": "cancelled"})
    assert restore_input(ended).origin.pending_step is None
    assert restore_input(ended, message="next").messages[-1] == Message.user("next")


def completed_snapshot(**kw) -> AgentSnapshot:
    """A snapshot of a run that completed (as the ``export`` query writes
    one: status ``completed``, its report's reason ``done``)."""
    snap = snapshot_of(CONVERSATION, {1: 2, 2: 4, 3: 6}, **kw)
    return snap.model_copy(update={"report": snap.report.model_copy(update={"reason": "done",
                                                                            "completed_at": snap.exported_at})})


def test_a_completed_run_restored_without_a_message_restores_completed() -> None:
    snap = completed_snapshot()
    assert restores_completed(restore_input(snap))
    # A new message asks the model something.
    assert not restores_completed(restore_input(snap, message="more"))
    # A run that ended otherwise, or a thread, goes on as before.
    stopped = snap.model_copy(update={"status": "stopped", "report": snap.report.model_copy(
        update={"reason": "stopped"})})
    assert not restores_completed(restore_input(stopped))
    thread = restore_input(snap).model_copy(update={"thread": ThreadOptions(id="t-1")})
    assert not restores_completed(thread)
    # Forks start a new run on the conversation.
    assert not restores_completed(fork_input(snap, 3))


class RunOriginBefore(BaseModel):
    """``RunOrigin`` as agentloop before agentloop-restored-completed-1 has it
    (``git show main:agentloop/shared/runs/run.py``): a worker of that version
    validates the run input with it, and refuses fields it does not know."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["restored", "forked"]
    from_run: str
    at_step: int | None = None
    tools: list[str] | None = None
    step: int = 0
    step_ends: dict[int, int] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)
    report: AgentRunReport | None = None
    pending_step: PendingStep | None = None
    decisions: dict[str, ApprovalDecision] = Field(default_factory=dict)
    outputs: dict[str, ToolOutput] = Field(default_factory=dict)
    turn: int = 0


class AgentRunInputBefore(AgentRunInput):
    origin: RunOriginBefore | None = None


def test_a_completed_restore_is_an_input_a_worker_of_the_previous_version_takes() -> None:
    # A newer client restores a completed run while the worker is older:
    # the input, as the client's converter writes it, validates under the
    # previous RunOrigin (extra="forbid"): no key it lacks but `definition`
    # (the snapshot's agent definition, agentloop-fingerprint: a restore or
    # fork needs workers that know it, docs/deploying.md says so).
    for built in (restore_input(completed_snapshot()), restore_input(completed_snapshot(), message="more")):
        payload = pydantic_data_converter.payload_converter.to_payloads([built])[0]
        data = json.loads(payload.data)
        assert data["origin"].pop("definition")["fingerprint"] == built.origin.definition.fingerprint
        assert set(data["origin"]) <= set(RunOriginBefore.model_fields)
        before = AgentRunInputBefore.model_validate(data)
        assert before.origin.model_dump() == built.origin.model_dump(exclude={"definition"})
