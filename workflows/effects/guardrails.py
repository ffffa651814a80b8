"""Running a run's guardrails (``AgentSpec.guardrails``): input ones before
each LLM step, output ones after its response.

Workflow code: each guardrail is a ``run_guardrail`` activity on the run's
own task queue (the models worker: LLM judges need its provider keys), those
of one stage in parallel; what their verdicts mean comes from the pure
helpers of :mod:`agentloop.tools.guardrails`. Only runs whose spec names
guardrails reach this code, so older runs replay as they were.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError
from temporalio.workflow import ActivityConfig

with workflow.unsafe.imports_passed_through():
    # Pydantic models and pure helpers (see agent_run.py).
    from agentloop.shared.base import contracts
    from agentloop.shared.base.messages import Message
    from agentloop.shared.definition.guardrails import (
        GuardrailInfo,
        GuardrailResult,
        GuardrailStage,
        ResolveGuardrailsInput,
        ResolveGuardrailsResult,
        RunGuardrailInput,
        Verdict,
        findings,
        first_tripwire,
        missing_guardrails_message,
        tripped_message,
    )
    from agentloop.shared.definition.pricing import run_cost
    from agentloop.shared.definition.spec import AgentSpec
    from agentloop.shared.runs.events import GuardrailTriggered
    from agentloop.shared.runs.report import GuardrailReport, StepReport
    from agentloop.shared.runs.state import LoopState
    from agentloop.workflows.decisions.next_step import FailRun
    from agentloop.workflows.effects import activity_calls as calls
    from agentloop.workflows.effects.recorder import RunRecorder
    from agentloop.workflows.patches import GUARDRAIL_USAGE_PATCH

#: How long finding the spec's guardrails may take.
RESOLVE_GUARDRAILS_TIMEOUT = timedelta(seconds=30)


def guardrail_options(spec: AgentSpec) -> ActivityConfig:
    """One guardrail: an LLM step's limits (a judge is one), retried with
    backoff, ``llm_max_attempts`` attempts."""
    return ActivityConfig(
        start_to_close_timeout=timedelta(seconds=spec.llm_timeout_seconds),
        heartbeat_timeout=timedelta(seconds=spec.heartbeat_timeout_seconds),
        retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=2.0,
                          maximum_interval=timedelta(seconds=60), maximum_attempts=spec.llm_max_attempts),
    )


class GuardrailRunner:
    """Runs a run's guardrails and says what their verdicts mean.

    Args:
        state: The run's state (the report takes tripwire reasons).
        recorder: For ``agent.guardrail.triggered`` events.
        run_id: The run id.
        spec: The run's spec.
    """

    def __init__(self, state: LoopState, recorder: RunRecorder, run_id: str, spec: AgentSpec) -> None:
        self.state = state
        self.recorder = recorder
        self.run_id = run_id
        self.spec = spec
        self.guardrails: list[GuardrailInfo] = []

    async def prepare(self) -> FailRun | None:
        """Find the spec's guardrails on the worker; a name it lacks fails the run."""
        resolved = await workflow.execute_activity(
            contracts.RESOLVE_GUARDRAILS, ResolveGuardrailsInput(names=self.spec.guardrails),
            result_type=ResolveGuardrailsResult,
            summary="resolve guardrails", start_to_close_timeout=RESOLVE_GUARDRAILS_TIMEOUT,
        )
        if resolved.missing:
            return FailRun("error", missing_guardrails_message(resolved.missing, resolved.available))
        self.guardrails = resolved.guardrails
        return None

    async def check(self, stage: GuardrailStage, messages: list[Message], report: StepReport) -> FailRun | None:
        """Run the stage's guardrails on ``messages``: a FailRun when one
        trips (reason ``guardrail``, its reason the run's final text) or
        cannot run (reason ``error``); None to go on."""
        guards = [g for g in self.guardrails if g.stage == stage]
        if not guards:
            return None
        names = [g.name for g in guards]
        outcomes = await asyncio.gather(*(self._run(name, stage, messages) for name in names))
        # One outcome per guardrail, in order (gather): the lengths are equal.
        for guard, outcome in zip(guards, outcomes, strict=True):
            if not isinstance(outcome, FailRun):
                self._count(guard, outcome)
        results: list[GuardrailResult] = []
        for outcome in outcomes:
            if isinstance(outcome, FailRun):
                return outcome
            results.append(outcome)
        verdicts = [Verdict(name, stage, result) for name, result in zip(names, results, strict=True)]
        for verdict in findings(verdicts):
            self._record(verdict, report)
        tripped = first_tripwire(verdicts)
        if tripped is None:
            return None
        self.state.report.final_text = tripped.result.reason
        return FailRun("guardrail", tripped_message(tripped))

    async def _run(self, name: str, stage: GuardrailStage, messages: list[Message]) -> GuardrailResult | FailRun:
        spec = self.spec
        input = RunGuardrailInput(name=name, stage=stage, run_id=self.run_id, step=self.state.step,
                                  agent_name=spec.name, model=spec.model, messages=messages)
        try:
            return await workflow.execute_activity(
                contracts.RUN_GUARDRAIL, input, result_type=GuardrailResult,
                **calls.with_summary(guardrail_options(spec), f"guardrail {name} ({stage})"))
        except ActivityError as err:
            calls.reraise_cancel(err)
            after = calls.attempts_note(err, spec.llm_max_attempts)
            return FailRun("error", f"guardrail {name} ({stage}) could not run{after}: {calls.failure_detail(err)}")

    def _count(self, guard: GuardrailInfo, result: GuardrailResult) -> None:
        """A judge's tokens join the run's usage (report and budget), priced
        at the judge's own model, as a sub-agent's are (runs that started
        before this replay without)."""
        usage = result.usage
        if guard.kind != "judge" or usage is None or not (usage.total_tokens or usage.requests):
            return
        if not workflow.patched(GUARDRAIL_USAGE_PATCH):
            return
        self.state.add_sub_usage(usage, run_cost(usage, guard.model, self.spec.budget))

    def _record(self, verdict: Verdict, report: StepReport) -> None:
        result = verdict.result
        report.guardrails.append(GuardrailReport(name=verdict.name, stage=verdict.stage, tripwire=result.tripwire,
                                                 reason=result.reason, severity=result.severity))
        self.recorder.emit(GuardrailTriggered, name=verdict.name, stage=verdict.stage, tripwire=result.tripwire,
                           reason=result.reason, severity=result.severity)
