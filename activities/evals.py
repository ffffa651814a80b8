"""The eval's worker-side checks (docs/evals.md): an LLM judge, with the
provider code every run uses, and a user's ``module:function``.

Called by ``AgentActivities.eval_score`` for
:class:`~agentloop.workflows.eval_run.AgentEvalWorkflow`.
"""

from __future__ import annotations

import importlib
import inspect
import json
from typing import Any

from pydantic import BaseModel, ValidationError

from agentloop.activities.providers.models import ModelResolver
from agentloop.shared.base.messages import Message
from agentloop.shared.definition.activity_io import ModelRequest
from agentloop.shared.definition.pricing import run_cost
from agentloop.shared.evals.checks import Candidate, CheckResult, Function, Judge
from agentloop.shared.evals.report import EvalScoreInput

#: What a judge is asked to answer.
JUDGE_INSTRUCTIONS = (
    "You grade an AI agent's answer against the rubric above. Reply with one JSON object and nothing else: "
    '{"passed": true or false, "reason": "one sentence"}.'
)


class JudgeVerdict(BaseModel):
    """A judge's typed verdict."""

    passed: bool
    reason: str = ""


#: Most earlier messages of a thread a judge reads before a later turn's input.
JUDGE_EARLIER_MESSAGES = 20


def judge_text(input: EvalScoreInput) -> str:
    """What the judge reads: the conversation before a thread's turn (its
    last messages with text), the case's input, the recorded answer, the candidate's."""
    case, got = input.case, input.candidate
    earlier = [f"{m.role}: {m.text}" for m in case.messages if m.text][-JUDGE_EARLIER_MESSAGES:]
    parts = ["Conversation before the input:\n" + "\n".join(earlier)] if earlier else []
    parts.append("Input:\n" + "\n".join(m.text for m in case.input))
    if case.expected_text:
        parts.append("Recorded answer:\n" + case.expected_text)
    parts.append("Answer to grade:\n" + (got.final_text or json.dumps(got.output, default=str)))
    return "\n\n".join(parts)


def parse_verdict(text: str) -> JudgeVerdict:
    """The judge's verdict from its reply (the first JSON object in it).

    Raises:
        ValueError: No such object.
    """
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise ValueError(f"the judge did not answer with a JSON object: {text[:200]!r}")
    try:
        return JudgeVerdict.model_validate_json(text[start:end + 1])
    except ValidationError as exc:
        raise ValueError(f"the judge's answer is not a verdict: {exc.errors()[0]['msg']}") from None


async def judge(check: Judge, models: ModelResolver, input: EvalScoreInput) -> CheckResult:
    """An LLM judge's verdict; its cost is the check's own."""
    model = models.resolve(check.model)
    _, _, model_name = check.model.partition(":")
    request = ModelRequest(model=model_name, system_prompt=f"Rubric: {check.rubric}\n\n{JUDGE_INSTRUCTIONS}",
                           messages=[Message.user(judge_text(input))])
    response = await model.complete(request)
    cost = run_cost(response.usage, check.model)
    try:
        verdict = parse_verdict(response.message.text)
    except ValueError as exc:
        return CheckResult(check="judge", passed=False, reason=str(exc), cost_usd=cost)
    return CheckResult(check="judge", passed=verdict.passed, reason=verdict.reason, cost_usd=cost)


async def function(check: Function, input: EvalScoreInput) -> CheckResult:
    """A user's check: ``fn(case, candidate)`` returning a bool, or (bool, reason)."""
    module_name, _, attr = check.path.partition(":")
    name = f"function({check.path})"
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        return CheckResult(check=name, passed=False, reason=f"cannot import it on the worker: {exc}")
    try:
        answer = target(input.case, input.candidate)
        if inspect.isawaitable(answer):
            answer = await answer
    except Exception as exc:
        return CheckResult(check=name, passed=False, reason=f"raised {type(exc).__name__}: {exc}")
    passed, reason = (answer[0], str(answer[1])) if isinstance(answer, tuple) else (answer, "")
    return CheckResult(check=name, passed=bool(passed), reason=reason)


async def score(models: ModelResolver, input: EvalScoreInput) -> list[CheckResult]:
    """The verdicts of the worker-side checks of one case."""
    results = []
    for check in input.checks:
        if isinstance(check, Judge):
            results.append(await judge(check, models, input))
        elif isinstance(check, Function):
            results.append(await function(check, input))
    return results


__all__ = ["Candidate", "JudgeVerdict", "judge", "function", "score"]
