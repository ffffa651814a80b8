"""Guardrails as data: what a guardrail answers, the activities' inputs and
results, and the pure helpers the run uses (the worker's registry of
guardrails is :mod:`agentloop.tools.guardrails`)."""


from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal, get_args

from pydantic import BaseModel, Field, model_validator

from agentloop.shared.base.messages import Message, TextPart, ToolCallPart, ToolResultPart
from agentloop.shared.base.text import cut
from agentloop.shared.base.usage import Usage

#: When a guardrail runs: ``input`` before each LLM step, ``output`` after it.
GuardrailStage = Literal["input", "output"]


#: How bad a finding is.
Severity = Literal["info", "low", "medium", "high", "critical"]


#: Most characters of a guardrail's reason kept (events, report, final text).
MAX_GUARDRAIL_REASON_CHARS = 2_000


class GuardrailResult(BaseModel):
    """A guardrail's verdict.

    Attributes:
        passed: The content is fine.
        tripwire: End the run now (implies not passed).
        reason: Why, in a sentence; the run's final text when it trips.
        severity: ``info``, ``low``, ``medium``, ``high`` or ``critical``.
        usage: An LLM judge's tokens (set by the judge's activity; the run
            counts them in its usage and budget).
    """

    passed: bool = True
    tripwire: bool = False
    reason: str = ""
    severity: Severity = "info"
    usage: Usage | None = None

    @model_validator(mode="after")
    def _tripwire_fails(self) -> GuardrailResult:
        if self.tripwire:
            self.passed = False
        self.reason = cut(self.reason, MAX_GUARDRAIL_REASON_CHARS)
        return self

    @classmethod
    def ok(cls, reason: str = "") -> GuardrailResult:
        """Passed."""
        return cls(passed=True, reason=reason)

    @classmethod
    def fail(cls, reason: str, severity: Severity = "medium") -> GuardrailResult:
        """Did not pass; the run goes on (an event and a report entry)."""
        return cls(passed=False, reason=reason, severity=severity)

    @classmethod
    def trip(cls, reason: str, severity: Severity = "high") -> GuardrailResult:
        """Tripwire: the run ends with reason ``guardrail``."""
        return cls(passed=False, tripwire=True, reason=reason, severity=severity)



class GuardrailInfo(BaseModel):
    """A guardrail as the run knows it: name, stage, kind, and a judge's
    model (its tokens are priced at that model's price)."""

    name: str
    stage: GuardrailStage
    kind: Literal["function", "judge"] = "function"
    model: str = ""


class ResolveGuardrailsInput(BaseModel):
    """Input of ``resolve_guardrails``: the spec's guardrail names."""

    names: list[str] = Field(default_factory=list)


class ResolveGuardrailsResult(BaseModel):
    """The guardrails found (in the order asked), the names missing, and
    every name the worker has."""

    guardrails: list[GuardrailInfo] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)
    available: list[str] = Field(default_factory=list)


class RunGuardrailInput(BaseModel):
    """Input of ``run_guardrail``."""

    name: str
    stage: GuardrailStage
    run_id: str
    step: int
    agent_name: str = ""
    model: str = ""
    messages: list[Message] = Field(default_factory=list)


#: ApplicationError type of a judge's reply that is not the JSON asked for (retried).
GUARDRAIL_JUDGE_REPLY_ERROR_TYPE = "GuardrailJudgeReplyInvalid"


#: ApplicationError type of a guardrail the worker does not have (not retried).
GUARDRAIL_UNKNOWN_ERROR_TYPE = "GuardrailUnknown"


#: ApplicationError type of a function guardrail that raised (retried).
GUARDRAIL_FAILED_ERROR_TYPE = "GuardrailFailed"


#: Appended to an LLM judge's prompt: the answer it must give.
JUDGE_INSTRUCTIONS = (
    "You are a guardrail. Judge only the content below against the rule above. Answer with one JSON "
    'object and nothing else: {"pass": true or false, "tripwire": true if the run must stop now, '
    '"reason": "one sentence", "severity": "info" | "low" | "medium" | "high" | "critical"}.'
)


#: Most characters of content a judge is shown.
MAX_JUDGE_CONTENT_CHARS = 50_000


def render_messages(messages: list[Message]) -> str:
    """Messages as plain text, one ``role: text`` block each (tool calls and
    results included)."""
    blocks = []
    for message in messages:
        lines = []
        for part in message.content:
            if isinstance(part, TextPart):
                lines.append(part.text)
            elif isinstance(part, ToolCallPart):
                lines.append(f"[tool call {part.name} {json.dumps(part.arguments, ensure_ascii=False)}]")
            elif isinstance(part, ToolResultPart):
                lines.append(f"[tool result {part.name}] {part.content}")
        if lines:
            blocks.append(f"{message.role}: " + "\n".join(lines))
    return "\n\n".join(blocks)


def messages_to_check(messages: list[Message]) -> list[Message]:
    """What an input guardrail checks before a step: the messages after the
    model's last one (the run's input at first, then tool results and any
    new user turn)."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "assistant":
            return messages[index + 1 :]
    return list(messages)


def judge_request_text(stage: GuardrailStage, messages: list[Message]) -> str:
    """The user turn an LLM judge is given."""
    what = "the input to the agent's next step" if stage == "input" else "the agent's response"
    content = render_messages(messages)
    if len(content) > MAX_JUDGE_CONTENT_CHARS:
        content = content[:MAX_JUDGE_CONTENT_CHARS] + "\n[cut]"
    return f"Content to judge ({what}):\n\n{content}"


def parse_judge_reply(text: str) -> GuardrailResult:
    """A judge's reply as a verdict: the first JSON object in it, ``pass``
    (or ``passed``), ``tripwire``, ``reason``, ``severity``.

    Raises:
        ValueError: No such object in the reply.
    """
    start = text.find("{")
    end = text.rfind("}")
    if start < 0 or end <= start:
        raise ValueError(f"the judge's reply holds no JSON object: {text[:200]!r}")
    try:
        data = json.loads(text[start : end + 1])
    except json.JSONDecodeError as exc:
        raise ValueError(f"the judge's reply is not valid JSON ({exc.msg}): {text[:200]!r}") from None
    if not isinstance(data, dict) or not ({"pass", "passed"} & set(data)):
        raise ValueError(f"the judge's reply has no 'pass' field: {text[:200]!r}")
    passed = data.get("pass", data.get("passed"))
    given = data.get("severity") or "info"
    severity: Severity = next((known for known in get_args(Severity) if known == given), "medium")
    return GuardrailResult(passed=bool(passed), tripwire=bool(data.get("tripwire", False)),
                           reason=str(data.get("reason") or ""), severity=severity)


@dataclass(frozen=True)
class Verdict:
    """A guardrail's name and stage with its result."""

    name: str
    stage: GuardrailStage
    result: GuardrailResult


def first_tripwire(verdicts: list[Verdict]) -> Verdict | None:
    """The first verdict (in the spec's order) that trips, or None."""
    return next((v for v in verdicts if v.result.tripwire), None)


def findings(verdicts: list[Verdict]) -> list[Verdict]:
    """The verdicts that did not pass (tripwires included)."""
    return [v for v in verdicts if not v.result.passed]


def tripped_message(verdict: Verdict) -> str:
    """The run's error when ``verdict`` trips."""
    return f"guardrail {verdict.name} ({verdict.stage}) tripped: {verdict.result.reason or 'no reason given'}"


def missing_guardrails_message(missing: list[str], available: list[str]) -> str:
    """Why a run naming guardrails the worker lacks cannot start."""
    names = ", ".join(repr(n) for n in missing)
    have = ", ".join(available) or "none"
    return (
        f"the spec names guardrail{'s' if len(missing) > 1 else ''} {names} that the worker does not have "
        f"(it has: {have}); register {'them' if len(missing) > 1 else 'it'} on the worker that serves the run's "
        "task queue (agentloop.guardrail or agentloop.llm_judge), or remove it from AgentSpec.guardrails"
    )
