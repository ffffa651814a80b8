"""What maps to what between A2A and agentloop, as pure functions.

A task is one turn of a thread: an A2A context is an agentloop thread (its
id the context id), and the task of the thread's turn ``n`` has the id
``<thread id>`` for turn 1 and ``<thread id>~<n>`` after (turn 1's task id
is the run id). A task's state is the run's status for that turn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from agentloop.shared.definition.approvals import ApprovalDecision, PendingAction, PendingApproval
from agentloop.shared.runs.run import RunState
from agentloop.shared.runs.threads import TurnResult

#: The A2A task states (the protocol's names, v0.3 spelling).
TaskState = Literal["submitted", "working", "input-required", "completed", "failed", "canceled"]
TERMINAL: frozenset[str] = frozenset({"completed", "failed", "canceled"})
#: The mark between a thread id and a later turn's number in a task id.
TURN_MARK = "~"
#: The metadata key an A2A caller puts its idempotency key under (message metadata).
IDEMPOTENCY_KEY = "idempotency_key"

_RUN_STATES: dict[str, TaskState] = {
    "running": "working", "awaiting_approval": "input-required", "requires_action": "input-required",
    "completed": "completed", "stopped": "completed", "failed": "failed", "cancelled": "canceled",
}
_TURN_STATES: dict[str, TaskState] = {
    "running": "working", "completed": "completed", "stopped": "completed", "failed": "failed",
    "cancelled": "canceled", "interrupted": "canceled", "rolled_back": "canceled",
}


@dataclass(frozen=True)
class TaskRef:
    """A task: the thread's run and the turn."""

    run_id: str
    turn: int = 1

    @property
    def task_id(self) -> str:
        return self.run_id if self.turn <= 1 else f"{self.run_id}{TURN_MARK}{self.turn}"


def parse_task_id(task_id: str) -> TaskRef:
    """The run and turn a task id names (``run`` or ``run~n``)."""
    run_id, mark, turn = task_id.rpartition(TURN_MARK)
    if mark and run_id and turn.isdigit() and int(turn) >= 1:
        return TaskRef(run_id, int(turn))
    return TaskRef(task_id, 1)


def task_state(state: RunState, turn: int, turn_result: TurnResult | None = None) -> TaskState:
    """The A2A state of turn ``turn`` of a run whose state is ``state``
    (``turn_result``: that turn's, when the run has gone past it)."""
    if turn_result is not None and turn_result.status != "running":
        return _TURN_STATES.get(turn_result.status, "completed")
    if state.status in ("completed", "failed", "cancelled", "stopped"):
        return _RUN_STATES[state.status]
    if state.turn and (state.turn > turn or (state.turn == turn and not state.busy)):
        return "completed"  # the turn ended; the thread waits for its next message
    if state.status == "idle":
        return "submitted"
    return _RUN_STATES.get(state.status, "working")


def approval_data(approval: PendingApproval) -> dict[str, Any]:
    """The data part of an ``input-required`` status for a call waiting for approval."""
    return {
        "kind": "approval", "call_id": approval.call_id, "tool": approval.tool_name,
        "arguments": approval.arguments, "reason": approval.reason,
        "answer": {"how": "send the next message in this task (same taskId and contextId) with a data part",
                   "schema": DECISION_SCHEMA, "text": "or the text approve / deny / skip"},
    }


def action_data(actions: list[PendingAction]) -> dict[str, Any]:
    """The data part of an ``input-required`` status for calls the client runs."""
    return {
        "kind": "tool_outputs",
        "calls": [{"call_id": a.call_id, "tool": a.tool_name, "arguments": a.arguments} for a in actions],
        "answer": {"how": "send the next message in this task with a data part "
                          '{"tool_outputs": [{"call_id": ..., "output": ...}]}, one per call'},
    }


DECISION_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["decision"],
    "properties": {
        "decision": {"enum": ["approve", "deny", "skip"]},
        "call_id": {"type": "string", "description": "the call; the only waiting call when absent"},
        "reason": {"type": "string"}, "result": {"type": "string"},
    },
}


@dataclass(frozen=True)
class Decide:
    """Answer waiting calls with these decisions."""

    decisions: list[ApprovalDecision]


@dataclass(frozen=True)
class SubmitOutputs:
    """Answer the calls the client runs with these outputs (as sent)."""

    tool_outputs: list[dict[str, Any]]


@dataclass(frozen=True)
class Refuse:
    """The reply cannot answer what the task waits for: why."""

    reason: str


Answer = Decide | SubmitOutputs | Refuse

_WORDS = {"approve": "approve", "approved": "approve", "yes": "approve", "ok": "approve",
          "deny": "deny", "denied": "deny", "no": "deny", "reject": "deny", "skip": "skip"}


def answer_of(texts: list[str], data: list[Any], approvals: list[PendingApproval],
              actions: list[PendingAction], by: str) -> Answer:
    """What a message in an ``input-required`` task answers: decisions on
    the waiting calls (a data part per :data:`DECISION_SCHEMA`, or the text
    ``approve``/``deny``/``skip`` when one call waits), or tool outputs."""
    for item in data:
        if isinstance(item, dict) and "tool_outputs" in item:
            outputs = item["tool_outputs"]
            if actions and isinstance(outputs, list):
                return SubmitOutputs([o for o in outputs if isinstance(o, dict)])
            return Refuse("the task waits for no tool outputs" if not actions else "tool_outputs must be a list")
    if not approvals:
        return Refuse("the task waits for no approval" + (": it waits for tool outputs" if actions else ""))
    waiting = {a.call_id for a in approvals}
    only = approvals[0].call_id if len(approvals) == 1 else None
    decisions: list[ApprovalDecision] = []
    for item in data:
        if isinstance(item, dict) and "decision" in item:
            made = _decision(item, only, waiting, by)
            if isinstance(made, Refuse):
                return made
            decisions.append(made)
    if not decisions:
        word = " ".join(texts).strip().lower().rstrip(".!").split(" ")[0] if texts else ""
        if word not in _WORDS:
            return Refuse("answer the waiting call with a data part {\"decision\": \"approve\"|\"deny\"|\"skip\", "
                          "\"call_id\": ...} or the text approve / deny / skip")
        if only is None:
            return Refuse(f"{len(approvals)} calls wait ({', '.join(sorted(waiting))}): name each in a data part "
                          "with its call_id")
        decisions.append(ApprovalDecision(call_id=only, decision=_WORDS[word], by=by))  # type: ignore[arg-type]
    return Decide(decisions)


def _decision(item: dict[str, Any], only: str | None, waiting: set[str], by: str) -> ApprovalDecision | Refuse:
    call_id = item.get("call_id") or only
    if call_id is None:
        return Refuse(f"{len(waiting)} calls wait ({', '.join(sorted(waiting))}): name the call_id")
    if call_id not in waiting:
        return Refuse(f"call {str(call_id)[:80]!r} does not wait for a decision; waiting: "
                      f"{', '.join(sorted(waiting))}")
    decision = item.get("decision")
    if decision not in ("approve", "deny", "skip"):
        return Refuse(f"decision {str(decision)[:40]!r} is not approve, deny or skip")
    reason, result = item.get("reason"), item.get("result")
    try:
        return ApprovalDecision(call_id=call_id, decision=decision, by=by,
                                reason=reason if isinstance(reason, str) else None,
                                result=result if isinstance(result, str) else None)
    except ValueError as err:
        return Refuse(f"the decision is not valid: {str(err)[:300]}")
