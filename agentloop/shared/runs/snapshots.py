"""Snapshots of runs: export, restore and fork (docs/conversations.md).

A snapshot is one JSON document that holds what a run is: its spec, its
conversation, its report and usage, the calls it waits for, the tools it
offered and where each of its steps ended. The workflow's ``export`` query
returns one (:meth:`AgentRunHandle.export <agentloop.AgentRunHandle.export>`,
``agentloop export RUN``); a new run starts from one
(:meth:`AgentClient.restore <agentloop.AgentClient.restore>`, ``agentloop
start --from FILE``), or from the conversation of a run up to the end of one
of its steps (:meth:`AgentClient.fork <agentloop.AgentClient.fork>`,
``agentloop fork RUN --at-step N``).

Snapshots are versioned ``MAJOR.MINOR``: a reader takes any snapshot of its
major version (fields a newer minor version added are ignored) and refuses
another major version with a sentence (:func:`load_snapshot`).

Everything here is pure: no Temporal, no I/O.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentloop.shared.base.errors import UserError, describe_validation_error
from agentloop.shared.base.messages import Message
from agentloop.shared.base.usage import Usage
from agentloop.shared.definition.approvals import ApprovalDecision, PendingAction, PendingApproval, ToolOutput
from agentloop.shared.definition.fingerprint import agent_definition
from agentloop.shared.definition.spec import AgentSpec
from agentloop.shared.runs.report import AgentRunReport, RunOriginReport, RunStatus, RunWarning
from agentloop.shared.runs.run import AgentRunInput, RunOrigin
from agentloop.shared.runs.state import PendingStep
from agentloop.shared.runs.threads import TurnResult

#: What every snapshot's ``format`` field says.
SNAPSHOT_FORMAT: Final = "agentloop.snapshot"

#: The version this code writes; it reads every ``1.x``.
SNAPSHOT_VERSION = "1.1"

#: Statuses of a run that has ended: its snapshot waits for nothing.
ENDED_STATUSES = ("completed", "failed", "cancelled", "stopped")


class SnapshotError(UserError):
    """A snapshot that cannot be read or used (not JSON, not a snapshot,
    another major version, invalid fields), or a fork step out of range;
    the message says what was wrong and what to do."""


class AgentSnapshot(BaseModel):
    """A run, exported (query ``export``).

    Attributes:
        format: Always ``agentloop.shared.runs.snapshots``.
        version: ``MAJOR.MINOR``; readers refuse another major version.
        run_id: The run it was taken of.
        thread_id: The thread the run belongs to, if any (a run restored or
            forked from it is a thread too, with its own id).
        turn: The thread's turn under way or last (0: not a thread).
        turns: A thread's recent turns (``TurnResult``, oldest first): where
            each began and ended in ``messages``, and how it ended (an eval
            takes a case at a later turn from them; since version 1.1).
        status: The run's status when it was taken.
        exported_at: When (the run's workflow time).
        spec: The agent's spec.
        messages: The whole conversation, input included.
        input_count: How many of ``messages`` were the run's input.
        step: Steps finished.
        step_ends: Step (1-based) -> how many messages the conversation had
            at the end of that step (where a fork at that step cuts).
        usage: Usage so far.
        report: The run report so far.
        tools: Names of the tools the run offered the model.
        pending_approvals: Calls waiting for an operator's decision.
        pending_actions: Calls waiting for the client's outputs.
        pending_step: The step whose tool calls were under way or waiting
            (a restored run runs those of its calls that have no answer yet).
        decisions: Decisions that had arrived for calls of ``pending_step``.
        outputs: Client outputs that had arrived for calls of ``pending_step``.
        origin: Where the run itself came from, if it was restored or forked.
    """

    # Same major version, newer minor: fields we do not know are ignored.
    model_config = ConfigDict(extra="ignore")

    format: Literal["agentloop.snapshot"] = SNAPSHOT_FORMAT
    version: str = SNAPSHOT_VERSION
    run_id: str
    thread_id: str | None = None
    turn: int = 0
    status: RunStatus
    exported_at: datetime
    spec: AgentSpec
    messages: list[Message]
    input_count: int = 0
    step: int = 0
    step_ends: dict[int, int] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)
    report: AgentRunReport
    tools: list[str] = Field(default_factory=list)
    pending_approvals: list[PendingApproval] = Field(default_factory=list)
    pending_actions: list[PendingAction] = Field(default_factory=list)
    pending_step: PendingStep | None = None
    decisions: dict[str, ApprovalDecision] = Field(default_factory=dict)
    outputs: dict[str, ToolOutput] = Field(default_factory=dict)
    origin: RunOriginReport | None = None
    turns: list[TurnResult] = Field(default_factory=list)

    @property
    def steps(self) -> int:
        """The last step a fork may cut at (0: none)."""
        return max(self.step_ends, default=0)

    def to_json(self) -> str:
        """The snapshot as JSON (what ``agentloop export`` prints)."""
        return self.model_dump_json(indent=1)


# Reading a snapshot -------------------------------------------------------------------


def major_version(version: Any) -> int | None:
    """The major part of ``MAJOR.MINOR`` (None when it is not one)."""
    if not isinstance(version, str):
        return None
    head = version.split(".", 1)[0]
    return int(head) if head.isdigit() else None


def check_version(data: Any, source: str = "the snapshot") -> None:
    """Refuse what is not a snapshot of this major version.

    Raises:
        SnapshotError: Not a JSON object, not an agentloop snapshot, or
            another major version (the sentence names both versions).
    """
    if not isinstance(data, dict):
        raise SnapshotError(f"{source} is not an agentloop snapshot: it is not a JSON object "
                            "(`agentloop export RUN > run.json` writes one)")
    if data.get("format") != SNAPSHOT_FORMAT:
        raise SnapshotError(f"{source} is not an agentloop snapshot: its \"format\" is not "
                            f"{SNAPSHOT_FORMAT!r} (`agentloop export RUN > run.json` writes one)")
    ours, theirs = major_version(SNAPSHOT_VERSION), major_version(data.get("version"))
    if theirs is None:
        raise SnapshotError(f"{source} has no valid \"version\" (MAJOR.MINOR, e.g. {SNAPSHOT_VERSION!r}); "
                            "export the run again")
    if theirs != ours:
        newer = "a newer" if theirs > ours else "an older"  # type: ignore[operator]
        raise SnapshotError(
            f"{source} is snapshot version {data['version']}, from {newer} agentloop; this agentloop reads "
            f"version {ours}.x snapshots only. Restore it with an agentloop whose snapshots are version "
            f"{theirs}.x, or export the run again with this one")


def load_snapshot(data: str | bytes | dict[str, Any] | AgentSnapshot, source: str = "the snapshot") -> AgentSnapshot:
    """A snapshot from JSON text or a decoded JSON object, checked.

    Raises:
        SnapshotError: Not JSON, not a snapshot, another major version, or a
            field that does not validate (the sentence says which; the
            snapshot itself is never quoted).
    """
    if isinstance(data, AgentSnapshot):
        data = data.model_dump(mode="json")
    if isinstance(data, (str, bytes)):
        try:
            data = json.loads(data)
        except ValueError as exc:
            raise SnapshotError(f"{source} is not valid JSON ({_json_problem(exc)}); "
                                "`agentloop export RUN > run.json` writes a snapshot") from None
    check_version(data, source)
    try:
        return AgentSnapshot.model_validate(data)
    except ValidationError as exc:
        raise SnapshotError(f"{source} is not a valid snapshot: {describe_validation_error(exc)}") from None


def _json_problem(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno}, column {exc.colno}"
    return "it is not UTF-8 text"


# Pure helpers ------------------------------------------------------------------------


def tool_changes(before: list[str], after: list[str]) -> tuple[list[str], list[str]]:
    """(removed, added): tools of ``before`` missing from ``after``, and the reverse, in order."""
    return [t for t in before if t not in after], [t for t in after if t not in before]


def tool_warnings(before: list[str], after: list[str], from_run: str) -> list[RunWarning]:
    """The ``tool_removed`` and ``tool_added`` warnings of a run whose snapshot
    offered ``before`` and that offers ``after``."""
    removed, added = tool_changes(before, after)
    return [
        *(RunWarning(type="tool_removed", tool=t, message=(
            f"tool {t!r} of run {from_run}'s snapshot is not on this worker; the run goes on without it "
            "(the model's calls to it are answered as unknown-tool errors)")) for t in removed),
        *(RunWarning(type="tool_added", tool=t, message=(
            f"tool {t!r} is offered to the model but was not in run {from_run}'s snapshot")) for t in added),
    ]


def messages_through_step(snapshot: AgentSnapshot, at_step: int) -> list[Message]:
    """The conversation up to the end of step ``at_step`` (1-based).

    Raises:
        SnapshotError: No such finished step (the sentence gives the range).
    """
    ends = snapshot.step_ends
    if at_step in ends and 0 < ends[at_step] <= len(snapshot.messages):
        return list(snapshot.messages[: ends[at_step]])
    if not ends:
        raise SnapshotError(f"run {snapshot.run_id} has no finished step to fork at yet (it has "
                            f"{snapshot.step} finished steps recorded); wait until a step has ended")
    first, last = min(ends), max(ends)
    if at_step > last:
        why = f"the run has finished {last} step{'s' if last != 1 else ''}"
    elif at_step < 1:
        why = "steps are numbered from 1"
    else:  # compacted since, or ended before the run recorded step ends
        why = "its messages were rewritten when the conversation was compacted"
    where = f"step {first}" if first == last else f"a step from {first} to {last}"
    raise SnapshotError(f"run {snapshot.run_id} cannot be forked at step {at_step}: {why}; fork at {where}")


def restore_input(snapshot: AgentSnapshot, spec: AgentSpec | None = None, message: str | None = None) -> AgentRunInput:
    """The input of a run restored from ``snapshot`` (its spec, or ``spec``;
    ``message`` a new user message after the conversation).

    Raises:
        SnapshotError: The snapshot has no messages; ``message`` with calls
            still pending (answer them in the restored run first).
    """
    if not snapshot.messages:
        raise SnapshotError(f"the snapshot of run {snapshot.run_id} has no messages to restore")
    pending = snapshot.pending_step if snapshot.status not in ENDED_STATUSES else None
    if message is not None and pending is not None:
        raise SnapshotError(f"run {snapshot.run_id}'s snapshot has calls under way; a new message cannot follow "
                            "them. Restore it without a message, or fork it at an earlier step with one")
    messages = list(snapshot.messages) + ([Message.user(message)] if message is not None else [])
    origin = RunOrigin(
        kind="restored", from_run=snapshot.run_id, tools=list(snapshot.tools), step=snapshot.step,
        step_ends=dict(snapshot.step_ends), usage=snapshot.usage, report=snapshot.report, pending_step=pending,
        decisions=dict(snapshot.decisions) if pending else {}, outputs=dict(snapshot.outputs) if pending else {},
        turn=snapshot.turn, definition=agent_definition(snapshot.spec),
    )
    return AgentRunInput(spec=spec or snapshot.spec, messages=messages, origin=origin)


def fork_input(snapshot: AgentSnapshot, at_step: int, message: str | None = None,
               spec: AgentSpec | None = None) -> AgentRunInput:
    """The input of a run forked from ``snapshot`` at the end of step
    ``at_step``, with ``message`` as a new user message after it.

    Raises:
        SnapshotError: ``at_step`` is not a finished step of the run.
    """
    messages = messages_through_step(snapshot, at_step)
    if message is not None:
        messages.append(Message.user(message))
    origin = RunOrigin(kind="forked", from_run=snapshot.run_id, at_step=at_step, tools=list(snapshot.tools),
                       turn=sum(1 for m in messages if m.role == "user"), definition=agent_definition(snapshot.spec))
    return AgentRunInput(spec=spec or snapshot.spec, messages=messages, origin=origin)


def starts_idle(input: AgentRunInput) -> bool:
    """A thread started from a snapshot waits for its next message (instead
    of answering its input as turn 1): nothing under way, no new message,
    and the conversation ends with the model's answer."""
    origin, last = input.origin, input.messages[-1]
    return (origin is not None and origin.pending_step is None and last.role == "assistant"
            and not last.tool_calls)


def restores_completed(input: AgentRunInput) -> bool:
    """A run (not a thread) restored, with no new message, from a snapshot
    of a run that completed: it ends completed at once, with the
    snapshot's answer, and calls no model (a new message is what asks
    it something).

    "Completed" is read from the snapshot's report, which the input already
    carries (``origin.report.reason == "done"``: only a completed run ends
    with reason ``done``), so the input has no field that a worker of an
    earlier version would refuse; "no new message" is the conversation
    ending with the model's answer."""
    origin, last = input.origin, input.messages[-1]
    return (origin is not None and origin.kind == "restored" and input.thread is None
            and origin.report is not None and origin.report.reason == "done"
            and origin.pending_step is None and last.role == "assistant" and not last.tool_calls)
