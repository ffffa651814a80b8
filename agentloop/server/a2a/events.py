"""A run's events as an A2A task's stream: status updates and the answer
as an artifact, for one turn of the run. Pure: events in, protos out."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from a2a.types import a2a_pb2 as pb
from google.protobuf import json_format, struct_pb2

from agentloop.server.a2a.mapping import TaskRef, TaskState, action_data, approval_data
from agentloop.shared.runs import events as ev

STATES: dict[str, int] = {
    "submitted": pb.TASK_STATE_SUBMITTED, "working": pb.TASK_STATE_WORKING,
    "input-required": pb.TASK_STATE_INPUT_REQUIRED, "completed": pb.TASK_STATE_COMPLETED,
    "failed": pb.TASK_STATE_FAILED, "canceled": pb.TASK_STATE_CANCELED,
}
_TERMINAL_TURN: dict[str, TaskState] = {
    "completed": "completed", "stopped": "completed", "failed": "failed", "cancelled": "canceled",
    "interrupted": "canceled", "rolled_back": "canceled",
}


def data_part(value: Any) -> pb.Part:
    part = pb.Part()
    part.data.CopyFrom(json_format.ParseDict(value, struct_pb2.Value()))
    return part


def agent_message(ref: TaskRef, text: str = "", data: Any = None) -> pb.Message:
    """A message of the agent's in the task (a status's message)."""
    parts = ([pb.Part(text=text)] if text else []) + ([data_part(data)] if data is not None else [])
    return pb.Message(message_id=uuid.uuid4().hex, context_id=ref.run_id, task_id=ref.task_id,
                      role=pb.ROLE_AGENT, parts=parts)


def status(ref: TaskRef, state: TaskState, when: datetime | None = None, *, text: str = "",
           data: Any = None) -> pb.TaskStatus:
    made = pb.TaskStatus(state=STATES[state])  # type: ignore[arg-type]
    if text or data is not None:
        made.message.CopyFrom(agent_message(ref, text, data))
    if when is not None:
        made.timestamp.FromDatetime(when)
    return made


def answer_artifact(ref: TaskRef, text: str, output: Any = None) -> pb.Artifact:
    parts = [pb.Part(text=text)] + ([data_part(output)] if output is not None else [])
    return pb.Artifact(artifact_id=f"{ref.task_id}:answer", name="answer", parts=parts)


@dataclass
class TaskStream:
    """Turns the run's events into the task's stream updates.

    Attributes:
        ref: The task.
        started: Whether the turn's events have begun (a later turn's
            begin at its ``agent.turn.started``).
        done: The task reached a final state; stop reading.
        state: The last state sent.
    """

    ref: TaskRef
    started: bool = True
    done: bool = False
    state: TaskState = "submitted"
    chunks: int = field(default=0)
    #: Replaying a task's past (a resubscribe): the calls that wait now;
    #: an earlier approval request is sent only when its call still waits.
    pending: set[str] | None = None
    #: Approval requests of a replay whose call did not wait when it began
    #: (asked since, or decided since): the handler checks them.
    unsure: list[Any] = field(default_factory=list)
    #: Continuing after a reply: events are skipped until these calls are resolved.
    skip_until: set[str] = field(default_factory=set)
    #: Continuing after tool outputs: the step that waited (events skipped until a later one begins).
    skip_steps: int | None = None

    def feed(self, event: Any) -> list[Any]:
        """The updates ``event`` gives (none for most events)."""
        if isinstance(event, ev.TurnStarted):
            if event.turn == self.ref.turn:
                self.started = True
                return self._status("working", event.time)
            if event.turn > self.ref.turn and self.started:
                return self._final("completed", event.time, "")
            return []
        if not self.started or self.done:
            return []
        if self.skip_until:
            if isinstance(event, ev.ApprovalResolved):
                self.skip_until.discard(event.call_id)
            elif isinstance(event, ev.StepCreated) and self.skip_steps is not None and event.step > self.skip_steps:
                self.skip_until.clear()  # the step after the one that waited: nothing waits any more
            if self.skip_until or not isinstance(event, ev.StepCreated):
                return []
        if isinstance(event, ev.ApprovalRequested) and self.pending is not None \
                and event.approval.call_id not in self.pending:
            self.unsure.append(event)
            return []
        return self._mapped(event)

    def takes_live(self, event: Any) -> bool:
        """Whether a live delta (or reset) would be mapped now: not before the
        turn's events begin, nor while skipping to where an answer resumes it
        (such text is left to the history, which brings it in its place)."""
        return self.started and not self.done and not self.skip_until

    def confirmed(self, event: Any) -> list[Any]:
        """The updates of an approval request of :attr:`unsure` whose call waits."""
        return self._mapped(event)

    def _mapped(self, event: Any) -> list[Any]:  # noqa: PLR0911
        if isinstance(event, (ev.RunCreated, ev.StepCreated, ev.ApprovalResolved, ev.ToolExecutionStarted)):
            return [] if self.state == "working" else self._status("working", event.time)
        if isinstance(event, ev.MessageDelta):
            if event.delta.kind != "text" or not event.delta.text:
                return []
            return [self._chunk(event.delta.text, append=self.chunks > 0)]
        if isinstance(event, ev.MessageReset):
            return [self._chunk("", append=False)]
        if isinstance(event, ev.ApprovalRequested):
            text = f"call {event.approval.tool_name} ({event.approval.call_id}) waits for approval"
            return self._status("input-required", event.time, text=text, data=approval_data(event.approval))
        if isinstance(event, ev.RequiresAction):
            return self._status("input-required", event.time, text="calls wait for the client's outputs",
                                data=action_data(event.actions))
        if isinstance(event, ev.TurnEnded) and event.turn == self.ref.turn:
            return self._final(_TERMINAL_TURN.get(event.status, "completed"), event.time, event.final_text,
                               event.output, event.error)
        if isinstance(event, ev.RunCompleted):
            return self._final("completed", event.time, event.final_text, event.output)
        if isinstance(event, ev.RunFailed):
            return self._final("failed", event.time, "", error=event.error)
        if isinstance(event, ev.RunCancelled):
            return self._final("canceled", event.time, "")
        return []

    def _chunk(self, text: str, *, append: bool) -> pb.TaskArtifactUpdateEvent:
        self.chunks += 1
        return pb.TaskArtifactUpdateEvent(task_id=self.ref.task_id, context_id=self.ref.run_id, append=append,
                                          artifact=answer_artifact(self.ref, text))

    def _status(self, state: TaskState, when: datetime, *, text: str = "", data: Any = None) -> list[Any]:
        self.state = state
        return [pb.TaskStatusUpdateEvent(task_id=self.ref.task_id, context_id=self.ref.run_id,
                                         status=status(self.ref, state, when, text=text, data=data))]

    def _final(self, state: TaskState, when: datetime, text: str, output: Any = None,
               error: str | None = None) -> list[Any]:
        self.done = True
        updates: list[Any] = []
        if text or output is not None:
            updates.append(pb.TaskArtifactUpdateEvent(
                task_id=self.ref.task_id, context_id=self.ref.run_id, append=False, last_chunk=True,
                artifact=answer_artifact(self.ref, text, output)))
        return updates + self._status(state, when, text=error or "")
