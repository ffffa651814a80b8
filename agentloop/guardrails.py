"""Guardrails: checks of what goes into each LLM step and what comes out.

An *input* guardrail runs before each LLM step, on the messages that are new
since the model last spoke (the run's input, then tool results); an *output*
guardrail runs after each step's response, on that response. Each runs as an
activity on the run's own task queue (the models worker) and answers a
:class:`GuardrailResult`: ``passed``, ``tripwire``, ``reason``, ``severity``.

* A tripwire ends the run ``failed`` with reason ``guardrail``, the reason as
  its final text, and the event ``agent.guardrail.triggered``.
* A result that did not pass, without a tripwire, is the same event and an
  entry in the step's report (``StepReport.guardrails``); the run goes on.

Two kinds, both registered on the worker by name and named by the spec
(``AgentSpec.guardrails``)::

    from agentloop import GuardrailContext, GuardrailResult, guardrail, llm_judge

    @guardrail(stage="input")
    def no_card_numbers(ctx: GuardrailContext) -> GuardrailResult:
        if "4111 1111" in ctx.text:
            return GuardrailResult.trip("the input holds a card number")
        return GuardrailResult.ok()

    llm_judge("polite", stage="output", model="openai:gpt-4.1-mini",
              prompt="Fail answers that are rude to the user.")

A guardrail that cannot answer (it raises, the judge's provider fails, the
judge's reply is not the JSON asked for) is retried like an LLM step
(``AgentSpec.llm_max_attempts``); when the attempts run out the run fails
with reason ``error`` and a sentence naming the guardrail.

The pure helpers here (:func:`messages_to_check`, :func:`parse_judge_reply`,
:func:`first_tripwire`) are what the workflow and the activity decide with.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, model_validator

from agentloop.errors import UserError
from agentloop.report import Usage
from agentloop.messages import Message, TextPart, ToolCallPart, ToolResultPart

if TYPE_CHECKING:
    from agentloop.tools import ToolRegistry

#: When a guardrail runs: ``input`` before each LLM step, ``output`` after it.
GuardrailStage = Literal["input", "output"]

#: How bad a finding is.
Severity = Literal["info", "low", "medium", "high", "critical"]

_NAME_RE = re.compile(r"^[a-zA-Z0-9_.-]{1,64}$")

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
        if len(self.reason) > MAX_GUARDRAIL_REASON_CHARS:
            self.reason = self.reason[:MAX_GUARDRAIL_REASON_CHARS] + "..."
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


@dataclass
class GuardrailContext:
    """What a function guardrail is asked about.

    Attributes:
        stage: ``input`` or ``output``.
        messages: The messages to check: those new since the model last
            spoke (input), or the step's response (output).
        run_id: The run.
        step: The LLM step, zero-based.
        agent_name: The spec's name.
        model: The spec's model, ``provider:model``.
    """

    stage: GuardrailStage
    messages: list[Message] = field(default_factory=list)
    run_id: str = ""
    step: int = 0
    agent_name: str = ""
    model: str = ""

    @property
    def text(self) -> str:
        """The messages as one text (what an LLM judge reads)."""
        return render_messages(self.messages)


GuardrailFunction = Callable[[GuardrailContext], "GuardrailResult | Awaitable[GuardrailResult]"]


@dataclass(frozen=True)
class FunctionGuardrail:
    """A guardrail that is a Python function on the worker."""

    name: str
    stage: GuardrailStage
    fn: GuardrailFunction

    async def check(self, ctx: GuardrailContext) -> GuardrailResult:
        value = self.fn(ctx)
        if inspect.isawaitable(value):
            value = await value
        if not isinstance(value, GuardrailResult):
            raise TypeError(
                f"guardrail {self.name!r} returned {type(value).__name__}; return a GuardrailResult "
                "(GuardrailResult.ok(), .fail(reason) or .trip(reason))"
            )
        return value


@dataclass(frozen=True)
class JudgeGuardrail:
    """A guardrail that asks a model (an LLM judge)."""

    name: str
    stage: GuardrailStage
    model: str
    prompt: str


Guardrail = FunctionGuardrail | JudgeGuardrail



def guardrails_of(registry: ToolRegistry) -> dict[str, Guardrail]:
    """The guardrails registered with ``registry``, by name."""
    return registry.extension("guardrails")


def _registry(registry: ToolRegistry | None) -> ToolRegistry:
    if registry is not None:
        return registry
    from agentloop.tools import default_registry

    return default_registry


def _check(name: str, stage: str) -> None:
    if not _NAME_RE.match(name):
        raise UserError(f"guardrail name {name!r} is not allowed: use 1-64 letters, digits, '_', '-' or '.'")
    if stage not in ("input", "output"):
        raise UserError(f"guardrail {name!r}: stage must be 'input' or 'output', not {stage!r}")


def register_guardrail(guard: Guardrail, *, registry: ToolRegistry | None = None, replace: bool = False) -> Guardrail:
    """Add a guardrail to ``registry`` (the default registry when None).

    Raises:
        UserError: A bad name or stage, or another guardrail has the name.
    """
    _check(guard.name, guard.stage)
    found = guardrails_of(_registry(registry))
    if guard.name in found and found[guard.name] != guard and not replace:
        raise UserError(f"a guardrail named {guard.name!r} is already registered; pick another name or pass replace=True")
    found[guard.name] = guard
    return guard


def guardrail(
    fn: GuardrailFunction | None = None,
    *,
    stage: GuardrailStage,
    name: str | None = None,
    registry: ToolRegistry | None = None,
) -> Any:
    """Register a function (sync or async) of a :class:`GuardrailContext`
    returning a :class:`GuardrailResult` as a guardrail, named after the
    function unless ``name`` is given."""

    def wrap(f: GuardrailFunction) -> GuardrailFunction:
        register_guardrail(FunctionGuardrail(name or f.__name__, stage, f), registry=registry)
        return f

    return wrap(fn) if fn is not None else wrap


def llm_judge(
    name: str, *, stage: GuardrailStage, model: str, prompt: str, registry: ToolRegistry | None = None
) -> JudgeGuardrail:
    """Register an LLM judge: ``model`` (``provider:model``) is asked, with
    ``prompt`` as its instructions, whether the content passes, and answers
    the JSON of a :class:`GuardrailResult` (see :data:`JUDGE_INSTRUCTIONS`)."""
    from agentloop.spec import parse_model

    try:
        parse_model(model)
    except ValueError as exc:
        raise UserError(f"LLM judge {name!r}: {exc}") from None
    return register_guardrail(JudgeGuardrail(name, stage, model, prompt), registry=registry)  # type: ignore[return-value]


# Activity input and results -------------------------------------------------------


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


# Pure helpers ------------------------------------------------------------------------

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
    severity = data.get("severity") or "info"
    if severity not in ("info", "low", "medium", "high", "critical"):
        severity = "medium"
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
