"""The guardrail activities' work: finding a run's guardrails on this
worker, and running one (a Python function, or an LLM judge).

Called by ``AgentActivities.resolve_guardrails`` and
``AgentActivities.run_guardrail``; see :mod:`agentloop.tools.guardrails`.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from agentloop.activities.providers.models import ModelResolver
from agentloop.shared.base.messages import Message
from agentloop.shared.definition.activity_io import ModelRequest
from agentloop.shared.definition.guardrails import (
    GUARDRAIL_FAILED_ERROR_TYPE,
    GUARDRAIL_JUDGE_REPLY_ERROR_TYPE,
    GUARDRAIL_UNKNOWN_ERROR_TYPE,
    JUDGE_INSTRUCTIONS,
    GuardrailInfo,
    GuardrailResult,
    ResolveGuardrailsInput,
    ResolveGuardrailsResult,
    RunGuardrailInput,
    judge_request_text,
    parse_judge_reply,
)
from agentloop.tools.guardrails import FunctionGuardrail, GuardrailContext, JudgeGuardrail, guardrails_of
from agentloop.tools.registry import ToolRegistry


def resolve_guardrails(registry: ToolRegistry, input: ResolveGuardrailsInput) -> ResolveGuardrailsResult:
    """The spec's guardrails as this worker has them, and the names it lacks."""
    known = guardrails_of(registry)
    found, missing = [], []
    for name in input.names:
        guard = known.get(name)
        if guard is None:
            missing.append(name)
        else:
            if isinstance(guard, JudgeGuardrail):
                found.append(GuardrailInfo(name=name, stage=guard.stage, kind="judge", model=guard.model))
            else:
                found.append(GuardrailInfo(name=name, stage=guard.stage, kind="function"))
    return ResolveGuardrailsResult(guardrails=found, missing=missing, available=sorted(known))


async def run_guardrail(registry: ToolRegistry, models: ModelResolver, input: RunGuardrailInput) -> GuardrailResult:
    """One guardrail's verdict.

    Raises:
        ApplicationError: ``GuardrailUnknown`` (not retried) for a name this
            worker lacks; ``GuardrailFailed`` when a function raised or
            returned something else, ``GuardrailJudgeReplyInvalid`` when a
            judge did not answer the JSON asked for (both retried); a judge's
            provider errors as the provider maps them.
    """
    guard = guardrails_of(registry).get(input.name)
    if guard is None:
        raise ApplicationError(
            f"this worker has no guardrail {input.name!r}; register it on every worker of the run's task queue",
            type=GUARDRAIL_UNKNOWN_ERROR_TYPE, non_retryable=True,
        )
    if isinstance(guard, FunctionGuardrail):
        ctx = GuardrailContext(stage=input.stage, messages=list(input.messages), run_id=input.run_id,
                               step=input.step, agent_name=input.agent_name, model=input.model)
        try:
            return await guard.check(ctx)
        except Exception as exc:
            activity.logger.warning("guardrail %s raised %r", input.name, exc)
            raise ApplicationError(f"guardrail {input.name} raised {type(exc).__name__}: {exc}",
                                   type=GUARDRAIL_FAILED_ERROR_TYPE) from None
    return await _judge(guard, models, input)


async def _judge(guard: JudgeGuardrail, models: ModelResolver, input: RunGuardrailInput) -> GuardrailResult:
    model = models.resolve(guard.model)
    _, _, model_name = guard.model.partition(":")
    request = ModelRequest(
        model=model_name,
        system_prompt=f"{guard.prompt}\n\n{JUDGE_INSTRUCTIONS}",
        messages=[Message.user(judge_request_text(input.stage, input.messages))],
    )
    response = await model.complete(request)
    usage = response.usage.model_copy(update={"requests": max(response.usage.requests, 1)})
    try:
        return parse_judge_reply(response.message.text).model_copy(update={"usage": usage})
    except ValueError as exc:
        raise ApplicationError(f"LLM judge {guard.name} ({guard.model}): {exc}",
                               type=GUARDRAIL_JUDGE_REPLY_ERROR_TYPE) from None
