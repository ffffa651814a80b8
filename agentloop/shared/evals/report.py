"""An eval's input and its report: per case pass or fail with reasons, and
the totals (pass rate; cost, tokens and steps at p50 and p95 against the
recorded runs). Pure."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentloop.shared.definition.spec import AgentSpec
from agentloop.shared.evals.cases import EvalCase
from agentloop.shared.evals.checks import Candidate, Check, CheckResult
from agentloop.shared.runs.eval_tools import FallbackPolicy, ToolPolicy, tally_of
from agentloop.shared.runs.result import AgentRunResult

#: Most cases one eval holds (its input and its children's results are in
#: one workflow history); split a larger suite into several evals.
MAX_CASES = 500

#: Most bytes of an eval's input (its cases, as JSON): Temporal refuses a
#: payload over 2 MB. A suite whose recorded tool results weigh more is split.
MAX_EVAL_INPUT_BYTES = 1_500_000

#: The eval's workflow type.
EVAL_WORKFLOW_NAME = "AgentEvalWorkflow"
#: The activity that runs ``judge`` and ``function`` checks.
EVAL_SCORE_ACTIVITY = "eval_score"


class EvalCaseRun(BaseModel):
    """A case (without its recorded spec) and the candidate's spec, by its
    index in ``EvalInput.specs`` (cases of one agent share one)."""

    model_config = ConfigDict(extra="forbid")

    case: EvalCase
    spec: int = Field(ge=0)


class EvalInput(BaseModel):
    """The input of the eval workflow.

    Attributes:
        eval_id: The eval's id (its workflow id; the ``AgentEval`` search
            attribute of its case runs).
        cases: The cases, each with its candidate's spec.
        specs: The candidates' specs (each once).
        checks: The checks of cases that name none of their own.
        concurrency: Most case runs at once.
        task_queue: The case runs' queue (None: the eval's own).
        policy: The tool policy; ``tools`` per tool; ``fallback`` for
            ``recorded`` calls without a matching recording.
        candidate: What the candidate is, in words (for the report).
    """

    model_config = ConfigDict(extra="forbid")

    eval_id: str
    cases: list[EvalCaseRun] = Field(max_length=MAX_CASES)
    specs: list[AgentSpec] = Field(default_factory=list)
    checks: list[Check] = Field(default_factory=list)
    concurrency: int = Field(default=10, ge=1, le=200)
    task_queue: str | None = None
    policy: ToolPolicy = "recorded"
    fallback: FallbackPolicy = "refuse"
    tools: dict[str, ToolPolicy] = Field(default_factory=dict)
    candidate: str = ""


class EvalScoreInput(BaseModel):
    """The ``eval_score`` activity's input: the worker-side checks of one case."""

    case: EvalCase
    candidate: Candidate
    checks: list[Check]


class CaseOutcome(BaseModel):
    """One case's verdict."""

    case_id: str
    run_id: str
    recorded_run_id: str | None = None
    turn: int | None = None
    passed: bool
    reasons: list[str] = Field(default_factory=list)
    checks: list[CheckResult] = Field(default_factory=list)
    candidate: Candidate
    recorded_cost_usd: float | None = None
    recorded_tokens: int = 0
    recorded_steps: int = 0
    judge_cost_usd: float = 0.0


class Percentiles(BaseModel):
    """p50 and p95 of one measure, for the candidate and the recorded runs."""

    p50: float | None = None
    p95: float | None = None
    recorded_p50: float | None = None
    recorded_p95: float | None = None


class EvalTotals(BaseModel):
    cases: int = 0
    passed: int = 0
    failed: int = 0
    pass_rate: float = 0.0
    cost_usd: Percentiles = Field(default_factory=Percentiles)
    tokens: Percentiles = Field(default_factory=Percentiles)
    steps: Percentiles = Field(default_factory=Percentiles)
    judge_cost_usd: float = 0.0
    recorded: int = 0
    live: int = 0
    refused: int = 0


class EvalProgress(BaseModel):
    """Query ``progress`` of an eval: the cases done so far."""

    eval_id: str
    status: Literal["running", "completed"] = "running"
    total: int = 0
    started: int = 0
    done: list[CaseOutcome] = Field(default_factory=list)


class EvalReport(BaseModel):
    """What an eval ends with."""

    eval_id: str
    candidate: str = ""
    cases: list[CaseOutcome] = Field(default_factory=list)
    totals: EvalTotals = Field(default_factory=EvalTotals)


def percentile(values: list[float], q: float) -> float | None:
    """The ``q`` percentile (0..100) by nearest rank; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def _pair(have: list[Any], want: list[Any]) -> Percentiles:
    h = [float(v) for v in have if v is not None]
    w = [float(v) for v in want if v is not None]
    return Percentiles(p50=percentile(h, 50), p95=percentile(h, 95), recorded_p50=percentile(w, 50),
                       recorded_p95=percentile(w, 95))


def totals_of(outcomes: list[CaseOutcome]) -> EvalTotals:
    passed = sum(1 for o in outcomes if o.passed)
    return EvalTotals(
        cases=len(outcomes), passed=passed, failed=len(outcomes) - passed,
        pass_rate=passed / len(outcomes) if outcomes else 0.0,
        cost_usd=_pair([o.candidate.cost_usd for o in outcomes], [o.recorded_cost_usd for o in outcomes]),
        tokens=_pair([o.candidate.tokens for o in outcomes], [o.recorded_tokens for o in outcomes]),
        steps=_pair([o.candidate.steps for o in outcomes], [o.recorded_steps for o in outcomes]),
        judge_cost_usd=sum(o.judge_cost_usd for o in outcomes),
        recorded=sum(o.candidate.recorded for o in outcomes), live=sum(o.candidate.live for o in outcomes),
        refused=sum(o.candidate.refused for o in outcomes),
    )


def outcome_of(case: EvalCase, candidate: Candidate, results: list[CheckResult]) -> CaseOutcome:
    """A case's verdict: it passes when its run completed and every check passed."""
    reasons = [f"{r.check}: {r.reason}" if r.reason else f"{r.check} failed" for r in results if not r.passed]
    if candidate.status != "completed":
        reasons.insert(0, f"the run {candidate.status}" + (f": {candidate.error}" if candidate.error else ""))
    recorded = case.recorded
    return CaseOutcome(
        case_id=case.id, run_id=candidate.run_id, recorded_run_id=case.recorded_run_id, turn=case.turn,
        passed=not reasons,
        reasons=reasons, checks=results, candidate=candidate,
        recorded_cost_usd=recorded.cost_usd if recorded else None,
        recorded_tokens=recorded.tokens if recorded else 0, recorded_steps=recorded.steps if recorded else 0,
        judge_cost_usd=sum(r.cost_usd or 0.0 for r in results),
    )


def candidate_of(run_id: str, result: AgentRunResult | None, error: str | None = None) -> Candidate:
    """What the checks see of a case run: its answer, the tools it called
    in order, its cost, tokens and steps, and how its calls were answered."""
    if result is None:
        return Candidate(run_id=run_id, status="failed", error=error)
    report = result.report
    tally = result.eval_tally
    if tally is None:  # a case run of an earlier version: from its report's steps
        tally = tally_of([c for step in report.steps for c in step.tool_calls])
        if not tally.tools and result.messages:
            tally.tools = [c.name for m in result.messages for c in m.tool_calls]
    return Candidate(
        run_id=run_id, status=result.status, error=result.error, final_text=result.final_text, output=result.output,
        tools=tally.tools, cost_usd=report.total_cost_usd, tokens=report.total_usage.total_tokens,
        steps=report.step_count, recorded=tally.recorded, live=tally.live, refused=tally.refused,
    )
