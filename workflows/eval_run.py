"""AgentEvalWorkflow: an eval, durable (docs/evals.md).

Runs each case as a child ``AgentRunWorkflow`` of the candidate (its id
``<eval id>--<case id>``, so a worker that dies mid-eval never runs a case
twice: the replay finds the child in history), at most ``concurrency`` at
once, on the eval's task queue. Each child's input carries an
:class:`~agentloop.shared.runs.eval_tools.EvalPlan`, so its tool calls are
answered from the recording or by the eval's policies. The pure checks run
here; ``judge`` and ``function`` checks in the ``eval_score`` activity.
The eval ends with an :class:`~agentloop.shared.evals.report.EvalReport`.
Its size is bounded (``MAX_CASES``), so it never continues as new.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ActivityError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from agentloop.shared.base.contracts import WORKFLOW_NAME
    from agentloop.shared.evals.checks import DEFAULT_CHECKS, CheckResult, score
    from agentloop.shared.evals.report import (
        EVAL_SCORE_ACTIVITY,
        EVAL_WORKFLOW_NAME,
        CaseOutcome,
        EvalCaseRun,
        EvalInput,
        EvalProgress,
        EvalReport,
        EvalScoreInput,
        candidate_of,
        outcome_of,
        totals_of,
    )
    from agentloop.shared.runs.eval_tools import EvalPlan
    from agentloop.shared.runs.result import AgentRunResult
    from agentloop.shared.runs.run import AgentRunInput, run_failed_from
    from agentloop.shared.runs.search_attributes import AGENT_EVAL, start_search_attributes
    from agentloop.workflows.workflow_sandbox import workflow_sandbox_from_env

#: The worker-side checks (a model call, a user's code).
WORKER_CHECKS = ("judge", "function")


def case_run_id(eval_id: str, case_id: str) -> str:
    """A case run's id: the same on every replay, so no case runs twice."""
    return f"{eval_id}--{case_id}"


@workflow.defn(name=EVAL_WORKFLOW_NAME, sandboxed=workflow_sandbox_from_env())
class AgentEvalWorkflow:
    """An eval: the cases as child runs, checked, then the report."""

    def __init__(self) -> None:
        self._progress: EvalProgress | None = None
        self._running = 0

    @workflow.run
    async def run(self, input: EvalInput) -> EvalReport:
        progress = self._progress = EvalProgress(eval_id=input.eval_id, total=len(input.cases))
        outcomes: dict[int, CaseOutcome] = {}

        async def one(index: int, item: EvalCaseRun) -> None:
            try:
                outcomes[index] = outcome = await self._case(input, item)
                progress.done.append(outcome)
            finally:
                self._running -= 1

        tasks = []
        for index, item in enumerate(input.cases):
            await workflow.wait_condition(lambda: self._running < input.concurrency)
            self._running += 1
            progress.started += 1
            tasks.append(asyncio.create_task(one(index, item)))
        await asyncio.gather(*tasks)
        ordered = [outcomes[i] for i in range(len(input.cases))]
        progress.status = "completed"
        return EvalReport(eval_id=input.eval_id, candidate=input.candidate, cases=ordered, totals=totals_of(ordered))

    @workflow.query(name="progress")
    def progress(self) -> EvalProgress | None:
        """The cases done so far (answers without touching history)."""
        return self._progress

    async def _case(self, input: EvalInput, item: EvalCaseRun) -> CaseOutcome:
        case, spec = item.case, input.specs[item.spec]
        run_id = case_run_id(input.eval_id, case.id)
        plan = EvalPlan(eval_id=input.eval_id, case_id=case.id, policy=input.policy, fallback=input.fallback,
                        tools=input.tools, recorded=case.recorded_calls, decisions=case.decisions)
        attributes = TypedSearchAttributes([*start_search_attributes(spec).search_attributes,
                                            SearchAttributePair(AGENT_EVAL, [input.eval_id])])
        result: AgentRunResult | None = None
        error = None
        try:
            result = await workflow.execute_child_workflow(
                # A case at a later turn of a thread starts with the thread's messages before it.
                WORKFLOW_NAME, AgentRunInput(spec=spec, messages=[*case.messages, *case.input], eval=plan), id=run_id,
                task_queue=input.task_queue or workflow.info().task_queue, result_type=AgentRunResult,
                search_attributes=attributes, static_summary=f"eval {input.eval_id}: case {case.id}")
        except ChildWorkflowError as err:
            failed = run_failed_from(run_id, err.cause if err.cause is not None else err)
            result, error = failed.result, str(failed)
        candidate = candidate_of(run_id, result, error)
        checks = case.checks or input.checks or DEFAULT_CHECKS
        results = [r for c in checks if (r := score(c, case, candidate)) is not None]
        on_worker = [c for c in checks if c.kind in WORKER_CHECKS]
        if on_worker:
            results += await self._score_on_worker(EvalScoreInput(case=case, candidate=candidate, checks=on_worker))
        return outcome_of(case, candidate, results)

    async def _score_on_worker(self, score_input: EvalScoreInput) -> list[CheckResult]:
        try:
            return await workflow.execute_activity(
                EVAL_SCORE_ACTIVITY, score_input, result_type=list[CheckResult],
                start_to_close_timeout=timedelta(minutes=5), retry_policy=RetryPolicy(maximum_attempts=3),
                summary=f"checks of case {score_input.case.id}")
        except ActivityError as err:
            cause = err.cause if err.cause is not None else err
            return [CheckResult(check=c.kind, passed=False, reason=f"could not run: {cause}")
                    for c in score_input.checks]
