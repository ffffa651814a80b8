"""What the run tells the world: events on its stream, the run report, its
status and its search attributes, and the result it ends with.

The loop says what happened; the recorder publishes it. Deterministic: time
is ``workflow.now()`` (held, right after a local activity: see
:meth:`RunRecorder.hold_clock`); upserting search attributes is a workflow
command, so :meth:`RunRecorder.index` runs at the same points on replay.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeUpdate
from temporalio.contrib.workflow_streams import WorkflowStream

with workflow.unsafe.imports_passed_through():
    # Pydantic models and pure helpers (see agent_run.py).
    from agentloop.shared.base import contracts
    from agentloop.shared.base.messages import ToolResultPart
    from agentloop.shared.base.text import cut
    from agentloop.shared.runs.eval_tools import tally_of
    from agentloop.shared.runs.events import (
        EVENTS_TOPIC,
        RunCancelled,
        RunCompleted,
        RunFailed,
        RunStatusChanged,
        StepCreated,
        ToolExecutionCompleted,
    )
    from agentloop.shared.runs.report import (
        LIVE_STATUSES,
        REPORT_TEXT_LIMIT,
        RunReason,
        RunStatus,
        StepReport,
        ToolCallReport,
    )
    from agentloop.shared.runs.result import AgentRunResult
    from agentloop.shared.runs.run import MAX_ERROR_CHARS, RESULT_MESSAGES_LIMIT, RESULT_REPORT_LIMIT
    from agentloop.shared.runs.search_attributes import AGENT_MODEL, AGENT_NAME, AGENT_PENDING_TOOLS, AGENT_STATUS
    from agentloop.shared.runs.state import LoopState
    from agentloop.workflows.decisions.next_step import live_status
    from agentloop.workflows.patches import IDLE_PATCH


def observe(event: Any, agent: str, model: str) -> None:
    """Hand ``event`` to the worker's telemetry (metrics, logs, the run's
    span), if the worker has some, and only when the workflow is not
    replaying: a replay after a restart or an eviction shows nothing twice.
    An extern function is no workflow command: history is the same with or
    without it."""
    hook = workflow.extern_functions().get(contracts.OBSERVE_EXTERN)
    if hook is not None and not workflow.unsafe.is_replaying():
        hook(event, agent, model)


def ms(delta: timedelta) -> float:
    return delta.total_seconds() * 1000


class RunRecorder:
    """Publishes a run's events and keeps its report, status and search
    attributes current.

    Args:
        stream: The run's Workflow Stream (events go on topic ``events``).
        run_id: The run id (workflow id).
        state: The run's state (status, pending calls, report).
    """

    def __init__(self, stream: WorkflowStream, run_id: str, state: LoopState) -> None:
        self._events = stream.topic(EVENTS_TOPIC)
        self.run_id = run_id
        self.state = state
        self._indexed: tuple[str, tuple[str, ...]] | None = None
        self._search_attributes = False
        self._name = self._model = ""
        self._held: Any = None
        self._idle: bool | None = None
        #: An eval's case run: its result carries an ``EvalTally`` (docs/evals.md).
        self.tally_eval = False

    def now(self) -> Any:
        """The run's time: ``workflow.now()``, or the time held by :meth:`hold_clock`."""
        return self._held if self._held is not None else workflow.now()

    def hold_clock(self) -> None:
        """Keep the time as it is now until :meth:`release_clock`. Held
        across a local activity: the workflow's time when its answer
        arrives can differ between the first execution and a replay (a
        query during the workflow task makes Temporal's core finish the task
        first and hand the answer over in the next one, at that task's time,
        where a replay hands it over at the activity's end), and the times of
        events and reports must not change when a worker replays the run."""
        self._held = workflow.now()

    def release_clock(self) -> None:
        """Back to ``workflow.now()``, once the run has waited on an activity
        (its answer arrives at the same time in every execution)."""
        self._held = None

    def configure(
        self, *, search_attributes: bool, name: str, model: str, trust_start_attributes: bool = False
    ) -> None:
        """Keep search attributes (runs started before them do not), for this
        agent. With ``trust_start_attributes``, values the run already has
        (set by the client at start, or carried by continue-as-new) are not
        upserted again."""
        self._search_attributes = search_attributes
        self._name, self._model = name, model
        if trust_start_attributes:
            attrs = workflow.info().typed_search_attributes
            status = attrs.get(AGENT_STATUS)
            if attrs.get(AGENT_NAME) == name and attrs.get(AGENT_MODEL) == model and status:
                self._indexed = (status, tuple(sorted(attrs.get(AGENT_PENDING_TOOLS) or [])))

    def _idle_status(self) -> bool:
        """A thread between turns says ``idle`` (runs started before that
        say ``running``). Asked the first time a thread is idle, so the
        marker is recorded at the same point on replay."""
        if self._idle is None:
            self._idle = workflow.patched(IDLE_PATCH)
        return self._idle

    def emit(self, event_type: Any, **fields: Any) -> None:
        """Publish one event on the run's stream, and show it to the
        worker's telemetry (:func:`observe`)."""
        fields.setdefault("step", self.state.step)
        event = event_type(run_id=self.run_id, time=self.now(), **fields)
        self._events.publish(event)
        observe(event, self._name, self._model)

    def index(self) -> None:
        """Bring the status and the search attributes up to date with what the
        run waits for, and announce a status change on the event stream."""
        state = self.state
        if state.status in LIVE_STATUSES:
            state.status = live_status(approvals=bool(state.approvals), actions=bool(state.actions),
                                       idle=state.thread is not None and not state.thread.busy and self._idle_status(),
                                       quota=state.quota_wait is not None)
        if state.status != state.announced:
            self.emit(RunStatusChanged, status=state.status, previous=state.announced)
            state.announced = state.status
        if not self._search_attributes:
            return
        pending = tuple(sorted({a.tool_name for a in state.approvals.values()}
                               | {a.tool_name for a in state.actions.values()}))
        indexed = (state.status, pending)
        if indexed == self._indexed:
            return
        updates: list[SearchAttributeUpdate[Any]] = [AGENT_STATUS.value_set(state.status),
                                                     AGENT_PENDING_TOOLS.value_set(list(pending))]
        if self._indexed is None:
            updates += [AGENT_NAME.value_set(self._name), AGENT_MODEL.value_set(self._model)]
        workflow.upsert_search_attributes(updates)
        self._indexed = indexed

    # The report ----------------------------------------------------------------------

    def step_started(self) -> StepReport:
        """A new step's report, added to the run's; announces the step."""
        step = self.state.step
        report = StepReport(index=step, type="initial" if step == 0 else "tool_followup")
        self.add_step(report)
        self.emit(StepCreated)
        return report

    def add_step(self, report: StepReport) -> None:
        self.state.report.steps.append(report)
        self.state.report.step_count = self.state.report.earlier_steps + len(self.state.report.steps)

    def tool_finished(
        self, step_report: StepReport, report: ToolCallReport, result: ToolResultPart, *, ran: bool, started: Any
    ) -> None:
        """A call's result is what the model will see: report and announce it."""
        report.latency_ms = ms(self.now() - started)
        report.result_size_bytes = len(result.content.encode())
        report.error = cut(result.content, REPORT_TEXT_LIMIT) if result.is_error else None
        report.skipped = not ran
        step_report.tool_calls.append(report)
        self.emit(ToolExecutionCompleted, result=result, ran=ran, latency_ms=report.latency_ms)

    # The end -----------------------------------------------------------------------------

    def finish(self, status: RunStatus, reason: RunReason, error: str | None, *, omit_long: bool) -> AgentRunResult:
        """End the run's state and report; the run's result.

        Args:
            status: How it ended.
            reason: Why.
            error: What went wrong (cut to ``MAX_ERROR_CHARS``: it travels in
                the result, the report and a failure's message).
            omit_long: Leave messages over ``RESULT_MESSAGES_LIMIT`` out of
                the result (they are in history once already; the client
                fetches them by query). False for runs started before that.
        """
        state, report = self.state, self.state.report
        error = cut(error, MAX_ERROR_CHARS) if error is not None else None
        state.end(status, reason, error)
        self.index()
        now = self.now()
        report.completed_at = now
        report.total_ms = ms(now - report.started_at)
        report.reason = reason
        report.error = error
        added = state.messages[state.input_count:]
        omitted, steps_omitted = 0, False
        if omit_long and sum(len(m.model_dump_json()) for m in added) > RESULT_MESSAGES_LIMIT:
            added, omitted = [], len(added)
        if omit_long and (omitted or len(report.model_dump_json()) > RESULT_REPORT_LIMIT):
            report, steps_omitted = report.model_copy(update={"steps": []}), True
        return AgentRunResult(
            run_id=self.run_id,
            status=status,
            reason=reason,
            final_text=state.report.final_text,
            output=state.report.output,
            error=error,
            messages=added,
            messages_omitted=omitted,
            report_steps_omitted=steps_omitted,
            usage=state.usage,
            report=report,
            eval_tally=tally_of([c for step in state.report.steps for c in step.tool_calls])
            if self.tally_eval else None,
        )

    def completed(self, *, omit_long: bool) -> AgentRunResult:
        result = self.finish("completed", "done", None, omit_long=omit_long)
        self.emit(RunCompleted, final_text=result.final_text, output=result.output, usage=self.state.usage)
        return result

    def stopped(self, note: str, *, omit_long: bool) -> AgentRunResult:
        result = self.finish("stopped", "stopped", note, omit_long=omit_long)
        self.emit(RunCompleted, status="stopped", reason="stopped", final_text=result.final_text,
                  usage=self.state.usage, note=note)
        return result

    def failed(self, reason: RunReason, message: str, *, omit_long: bool) -> AgentRunResult:
        result = self.finish("failed", reason, message, omit_long=omit_long)
        self.emit(RunFailed, reason=reason, error=result.error or message, usage=self.state.usage)
        return result

    def cancelled(self) -> None:
        self.state.approvals.clear()
        self.state.actions.clear()
        self.finish("cancelled", "cancelled", None, omit_long=False)
        self.emit(RunCancelled, usage=self.state.usage)
