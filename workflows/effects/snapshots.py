"""Snapshots in the workflow: the ``export`` query's snapshot, and the state
a run restored or forked from one starts with (``AgentRunInput.origin``).

A restored run goes on where its snapshot was taken: its steps, usage,
report and step boundaries come along, and the step that was under way is
resumed the way continue-as-new resumes one (``LoopState.pending_step``):
its calls without an answer wait for people again, the others run again.
A forked run is a new run on a cut conversation. Tools the snapshot's run
offered that this worker lacks are warnings (``tool_removed``), not a failed
start; tools it did not offer are ``tool_added``.

Deterministic, like all of ``agentloop.workflows``: time comes in as ``now``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    # Pydantic models and pure helpers (see agent_run.py).
    from agentloop.shared.definition.approvals import ToolGate
    from agentloop.shared.runs.events import ApprovalRequested, RequiresAction, ToolAdded, ToolRemoved
    from agentloop.shared.runs.report import AgentRunReport, report_text
    from agentloop.shared.runs.run import AgentRunInput, RunOrigin
    from agentloop.shared.runs.snapshots import ENDED_STATUSES, AgentSnapshot, starts_idle, tool_warnings
    from agentloop.shared.runs.state import LoopState, PendingStep
    from agentloop.shared.runs.threads import ThreadState
    from agentloop.workflows.effects.recorder import RunRecorder


def origin_state(input: AgentRunInput, run_id: str, now: datetime) -> LoopState:
    """The first state of a run restored or forked from a snapshot."""
    origin = input.origin
    assert origin is not None
    messages = list(input.messages)
    user_message = report_text(next((m.text for m in reversed(messages) if m.role == "user"), ""))
    report = AgentRunReport(id=run_id, model=input.spec.model, started_at=now, user_message=user_message,
                            origin=origin.note())
    if origin.kind == "forked":
        return _as_thread(LoopState(input_count=len(messages), report=report, messages=messages), input)
    pending = _asked_again(origin.pending_step, input, now)
    if origin.report is not None:
        # The report goes on; the step under way goes back in when the loop resumes it.
        kept = [s for s in origin.report.steps if pending is None or s.index != pending.report.index]
        report = origin.report.model_copy(update={
            "id": run_id, "model": input.spec.model, "started_at": now, "completed_at": None, "total_ms": 0.0,
            "reason": None, "error": None, "steps": kept, "step_count": origin.report.earlier_steps + len(kept),
            "origin": origin.note(),
            "warnings": [],
        })
    report.total_usage = origin.usage
    return _as_thread(LoopState(
        input_count=len(messages), report=report, messages=messages, step=origin.step, usage=origin.usage,
        step_ends={k: v for k, v in origin.step_ends.items() if v <= len(messages)}, pending_step=pending,
        decisions=origin.decisions, outputs=origin.outputs, answered=[*origin.decisions, *origin.outputs],
    ), input)


def _as_thread(state: LoopState, input: AgentRunInput) -> LoopState:
    """A thread from a snapshot whose conversation ends with the model's
    answer waits for its next message; otherwise its first turn answers
    (the thread runner starts it)."""
    if input.thread is not None and input.origin is not None and starts_idle(input):
        turn = max(1, input.origin.turn)
        state.thread = ThreadState(id=input.thread.id, turn=turn, busy=False, next_turn=turn + 1)
    return state


def _asked_again(pending: PendingStep | None, input: AgentRunInput, now: datetime) -> PendingStep | None:
    """The snapshot's step under way, its waits starting now (an approval
    timeout counts from the restore, not from the original ask)."""
    if pending is None:
        return None
    timeout = input.spec.approval_timeout_seconds
    gates: list[ToolGate] = []
    for gate in pending.gates:
        update: dict[str, Any] = {}
        if gate.approval is not None:
            update["approval"] = gate.approval.model_copy(update={
                "asked_at": now, "expires_at": now + timedelta(seconds=timeout) if timeout else None})
        if gate.action is not None:
            update["action"] = gate.action.model_copy(update={"asked_at": now})
        gates.append(gate.model_copy(update=update))
    return PendingStep(gates=gates, report=pending.report.model_copy(update={"tool_calls": []}))


def announce_pending(state: LoopState, recorder: RunRecorder) -> None:
    """A restored run's stream is new: say again what it waits for."""
    for approval in state.approvals.values():
        recorder.emit(ApprovalRequested, approval=approval)
    if state.actions:
        recorder.emit(RequiresAction, actions=list(state.actions.values()))


def unexpected_missing(missing: list[str], origin: RunOrigin | None, state: LoopState) -> list[str]:
    """The spec's tools the worker lacks that fail the run: all of them,
    except, in a run from a snapshot, those the snapshot's run offered (they
    are ``tool_removed`` warnings, also after continue-as-new)."""
    removed = {w.tool for w in state.report.warnings if w.type == "tool_removed"}
    if origin is not None and origin.tools is not None:
        removed |= set(origin.tools)
    return [name for name in missing if name not in removed]


def note_tool_changes(origin: RunOrigin | None, tools: list[str], state: LoopState, recorder: RunRecorder) -> None:
    """A run from a snapshot: warn of the tools removed and added since
    (the report, the result, and ``agent.run.tool_removed``/``tool_added`` events)."""
    if origin is None or origin.tools is None:
        return
    for warning in tool_warnings(origin.tools, tools, origin.from_run):
        state.report.warnings.append(warning)
        event = ToolRemoved if warning.type == "tool_removed" else ToolAdded
        recorder.emit(event, tool=warning.tool, message=warning.message)
        workflow.logger.warning("run %s: %s", recorder.run_id, warning.message)


def export_snapshot(state: LoopState, input: AgentRunInput, run_id: str, tools: list[str],
                    report: AgentRunReport, now: datetime) -> AgentSnapshot:
    """The ``export`` query's answer: the run as it is now, in one read."""
    messages = list(state.messages)
    ended = state.status in ENDED_STATUSES
    pending = None if ended else state.under_way
    ids = {g.call.id for g in pending.gates} if pending else set()
    thread, turn = input.thread, state.thread.turn if state.thread is not None else 0
    origin = input.origin.note() if input.origin is not None else report.origin
    return AgentSnapshot(
        run_id=run_id, thread_id=thread.id if thread is not None else None, turn=turn, status=state.status,
        exported_at=now,
        spec=input.spec, messages=messages, input_count=state.input_count, step=state.step,
        step_ends={k: v for k, v in state.step_ends.items() if v <= len(messages)}, usage=state.usage,
        report=report, tools=tools,
        pending_approvals=[] if ended else list(state.approvals.values()),
        pending_actions=[] if ended else list(state.actions.values()),
        pending_step=pending,
        decisions={k: v for k, v in state.decisions.items() if k in ids},
        outputs={k: v for k, v in state.outputs.items() if k in ids},
        origin=origin,
        turns=list(state.thread.turns) if state.thread is not None else [],
    )
