"""Continue-as-new: a run hands itself to a new Temporal run, with a fresh,
short history, when Temporal suggests it or every
``AgentSpec.continue_as_new_every_steps`` steps. The run id stays; the next
run gets the conversation, the :class:`LoopState` (a step waiting for people
included) and the event stream's recent events, with offsets that go on.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream, WorkflowStreamState

with workflow.unsafe.imports_passed_through():
    # Pydantic models and pure helpers (see agent_run.py).
    from agentloop.shared.base.versioning import MoveOn
    from agentloop.shared.definition.spec import upgrade_policy
    from agentloop.shared.runs.events import RunContinued
    from agentloop.shared.runs.report import AgentRunReport
    from agentloop.shared.runs.run import AgentRunInput
    from agentloop.shared.runs.state import LoopState, PendingStep
    from agentloop.workflows.decisions.budgets import (
        ContinueAsNew,
        TooLargeToCarry,
        continue_as_new_due,
        newest_within,
    )
    from agentloop.workflows.effects.recorder import RunRecorder
    from agentloop.workflows.effects.upgrade import deployment_version, upgrade_due

#: Events a run keeps in its stream when it continues as new.
CARRIED_EVENTS = 1000

#: The most those events may take in the next run's input (as carried:
#: base64 of each event's payload). An event can hold a whole tool output
#: or message, so 1,000 of them could pass Temporal's payload limit alone.
CARRIED_EVENT_BYTES = 400_000

#: Largest conversation and report a run hands to its next Temporal run
#: (Temporal's payload limit is 2 MB; the events travel too, within
#: CARRIED_EVENT_BYTES, and the spec).
CARRY_LIMIT_BYTES = 1_000_000

#: The most the report's step reports may take in the next run's input (as
#: JSON): a hand-over carries the newest within it and counts the others in
#: ``AgentRunReport.earlier_steps``, so a report of thousands of steps does
#: not keep the run from handing over.
REPORT_STEPS_CARRY_BYTES = 200_000

#: Runs that hand over with this marker carry the report's newest steps
#: within REPORT_STEPS_CARRY_BYTES; hand-overs recorded before it carried
#: every step.
REPORT_STEPS_PATCH = "agentloop-report-steps-1"

#: Runs that hand over with this marker count the report in the carry's
#: limit and carry events within CARRIED_EVENT_BYTES; hand-overs recorded
#: before it replay as they ran.
CARRY_BYTES_PATCH = "agentloop-carry-bytes-1"


def carried_report(report: AgentRunReport) -> AgentRunReport:
    """The report as a hand-over carries it: its newest step reports within
    REPORT_STEPS_CARRY_BYTES, the others counted in ``earlier_steps``."""
    steps = report.steps
    keep = newest_within([len(s.model_dump_json()) for s in steps], most=len(steps), budget=REPORT_STEPS_CARRY_BYTES)
    if keep == len(steps):
        return report
    dropped = len(steps) - keep
    return report.model_copy(update={"steps": steps[dropped:], "earlier_steps": report.earlier_steps + dropped})


class Handover:
    """Continues one run as new when it is due.

    Args:
        stream: The run's event stream (carried along).
        state: The run's state (carried along).
        recorder: For the ``agent.run.continued`` event.
        input: The run's input (its spec goes to the next run).
        enabled: Runs started before continue-as-new existed never hand over.
    """

    def __init__(
        self, stream: WorkflowStream, state: LoopState, recorder: RunRecorder, input: AgentRunInput, *, enabled: bool
    ) -> None:
        self.stream = stream
        self.state = state
        self.recorder = recorder
        self.input = input
        self.enabled = enabled
        self._warned = False
        self.policy = upgrade_policy(input.spec, thread=input.thread is not None)

    async def upgrade(self) -> None:
        """At a turn boundary: when the spec's policy lets the run move and
        another version of its Worker Deployment is current, continue as new
        onto it (``agentloop.workflows.effects.upgrade``); else nothing."""
        if not self.enabled or self.policy != "at_turn_boundary":
            return
        decision = await upgrade_due(self.policy)
        if isinstance(decision, MoveOn):
            workflow.logger.info("run %s: moving to version %s of its deployment at a turn boundary",
                                 self.recorder.run_id, decision.to_build_id or "(the target)")
            await self._hand_over(None)

    async def when_due(self, pending: PendingStep | None) -> None:
        """Hand over to a new Temporal run when it is due (counting the step
        under way when it waits for people)."""
        if not self.enabled:
            return
        state = self.state
        verdict = continue_as_new_due(
            steps_this_run=state.steps_this_run + (1 if pending else 0),
            suggested=workflow.info().is_continue_as_new_suggested(),
            every=self.input.spec.continue_as_new_every_steps,
            carry_bytes=self._carry_bytes,
            limit_bytes=CARRY_LIMIT_BYTES,
        )
        match verdict:
            case ContinueAsNew():
                await self._hand_over(pending)
            case TooLargeToCarry(size, limit) if not self._warned:
                # The next run's input would pass Temporal's payload limit: go on
                # in this run (AgentSpec.context keeps the conversation small).
                workflow.logger.warning(
                    "run %s: not continuing as new: its conversation and report are %d bytes, over %d; set "
                    "AgentSpec.context.context_window_tokens so the conversation is compacted",
                    self.recorder.run_id, size, limit)
                self._warned = True

    def _carry_bytes(self) -> int:
        """What the next run's input must carry, as JSON: the conversation,
        and (in runs with the patch) the report as carried."""
        size = sum(len(m.model_dump_json()) for m in self.state.messages)
        if workflow.patched(CARRY_BYTES_PATCH):
            report = self.state.report
            if workflow.patched(REPORT_STEPS_PATCH):
                report = carried_report(report)
            size += len(report.model_dump_json())
        return size

    def _recent_events(self, state: WorkflowStreamState) -> WorkflowStreamState:
        """The event stream as the next run gets it: its newest events, at
        most CARRIED_EVENTS within CARRIED_EVENT_BYTES, with offsets that go
        on. This run keeps them all, so a subscriber that was behind at the
        hand-over reads the ones not carried from it (see
        ``AgentRunHandle.events``)."""
        keep = newest_within([len(item.topic) + len(item.data) for item in state.log],
                             most=CARRIED_EVENTS, budget=CARRIED_EVENT_BYTES)
        dropped = len(state.log) - keep
        return dataclasses.replace(state, log=state.log[dropped:], base_offset=state.base_offset + dropped)

    async def _hand_over(self, pending: PendingStep | None) -> None:
        """Hand the run to a new Temporal run with a fresh, short history."""
        state = self.state
        state.runs += 1
        self.recorder.emit(RunContinued, runs=state.runs)
        if pending is not None:
            # Its report goes back in with the step when the next run resumes it.
            state.report.steps = [s for s in state.report.steps if s is not pending.report]
        if workflow.patched(REPORT_STEPS_PATCH):
            state.report = carried_report(state.report)
        spec = self.input.spec
        bounded = workflow.patched(CARRY_BYTES_PATCH)
        if not bounded:
            # Hand-overs recorded before the patch: the stream itself cut to
            # its last CARRIED_EVENTS events.
            self.stream.truncate(max(0, self.stream._on_offset() - CARRIED_EVENTS))
        build_args = lambda stream: [AgentRunInput(  # noqa: E731
            spec=spec, messages=state.messages, thread=self.input.thread, tenant=self.input.tenant,
            carry=state.carried(pending, self._recent_events(stream) if bounded else stream))]
        if deployment_version() is None or self.policy != "at_turn_boundary":
            await self.stream.continue_as_new(build_args)
        # A versioned run that may move: the next run starts on the deployment's target version.
        self.stream.detach_pollers()
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(args=build_args(self.stream.get_state(publisher_ttl=timedelta(seconds=900))),
                                 initial_versioning_behavior=workflow.ContinueAsNewVersioningBehavior.AUTO_UPGRADE)
