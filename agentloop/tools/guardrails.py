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
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentloop.shared.base.errors import UserError
from agentloop.shared.base.messages import Message

if TYPE_CHECKING:
    from agentloop.tools.registry import ToolRegistry
from agentloop.shared.definition.guardrails import GuardrailResult, GuardrailStage, render_messages

_NAME_RE = re.compile(r"^[a-zA-Z0-9_.-]{1,64}$")


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


#: A function guardrail: a context in, a result out (sync or async).
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
    from agentloop.tools.registry import default_registry

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
        raise UserError(f"a guardrail named {guard.name!r} is already registered; "
                        "pick another name or pass replace=True")
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
    from agentloop.shared.definition.spec import parse_model

    try:
        parse_model(model)
    except ValueError as exc:
        raise UserError(f"LLM judge {name!r}: {exc}") from None
    return register_guardrail(JudgeGuardrail(name, stage, model, prompt), registry=registry)  # type: ignore[return-value]
