"""Checks (scorers) of an eval: each a pure function of the case and the
candidate's result (:class:`Candidate`), giving a :class:`CheckResult`.

Two kinds are not pure and run in the ``eval_score`` activity on a worker:
``judge`` (a model with a rubric) and ``function`` (a user's
``module:function``); :func:`score` answers None for them.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentloop.shared.base.text import clip

if TYPE_CHECKING:
    from agentloop.shared.evals.cases import EvalCase


class _Check(BaseModel):
    model_config = ConfigDict(extra="forbid")


class OutputEquals(_Check):
    """The typed output (or final text) equals the recorded one, or one field of it."""

    kind: Literal["output_equals"] = "output_equals"
    field: str | None = None


class Contains(_Check):
    """The final text contains ``text``."""

    kind: Literal["contains"] = "contains"
    text: str


class Regex(_Check):
    """The final text matches ``pattern`` (``re.search``)."""

    kind: Literal["regex"] = "regex"
    pattern: str


class JsonSchema(_Check):
    """The typed output (or the final text as JSON) is valid against ``schema``."""

    kind: Literal["json_schema"] = "json_schema"
    json_schema: dict[str, Any] = Field(alias="schema")

    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)


class SameTools(_Check):
    """The candidate called the same tools as the recording: as a set, or in order."""

    kind: Literal["same_tools"] = "same_tools"
    order: bool = False


class CostWithin(_Check):
    """Cost (USD, else tokens) at most ``factor`` times the recorded run's."""

    kind: Literal["cost_within"] = "cost_within"
    factor: float = Field(default=1.5, gt=0)


class StepsWithin(_Check):
    """Steps at most ``factor`` times the recorded run's."""

    kind: Literal["steps_within"] = "steps_within"
    factor: float = Field(default=1.5, gt=0)


class Judge(_Check):
    """An LLM judge: ``model`` reads the case, the answer and ``rubric`` and
    gives a verdict with a reason (its cost counted apart)."""

    kind: Literal["judge"] = "judge"
    model: str
    rubric: str


class Function(_Check):
    """A user's ``module:function(case, candidate) -> bool | (bool, reason)``, run on a worker."""

    kind: Literal["function"] = "function"
    path: str = Field(pattern=r"^[\w.]+:[\w.]+$")


Check = Annotated[
    OutputEquals | Contains | Regex | JsonSchema | SameTools | CostWithin | StepsWithin | Judge | Function,
    Field(discriminator="kind"),
]

#: The checks of an eval that names none: same answer, same tools.
DEFAULT_CHECKS: list[Any] = [OutputEquals(), SameTools()]


class Candidate(BaseModel):
    """What the checks see of a candidate's run."""

    run_id: str
    status: str
    error: str | None = None
    final_text: str = ""
    output: Any = None
    tools: list[str] = Field(default_factory=list)
    cost_usd: float | None = None
    tokens: int = 0
    steps: int = 0
    recorded: int = 0
    live: int = 0
    refused: int = 0


class CheckResult(BaseModel):
    """One check's verdict on one case."""

    check: str
    passed: bool
    reason: str = ""
    cost_usd: float | None = None


def _field(value: Any, path: str | None) -> Any:
    for part in (path.split(".") if path else []):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _short(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return clip(text, limit)


def _output_equals(check: OutputEquals, case: EvalCase, got: Candidate) -> CheckResult:
    name = f"output_equals{'(' + check.field + ')' if check.field else ''}"
    if case.expected_output is not None or check.field:
        want, have = _field(case.expected_output, check.field), _field(got.output, check.field)
    else:
        want, have = (case.expected_text or "").strip(), got.final_text.strip()
    if want == have:
        return CheckResult(check=name, passed=True)
    return CheckResult(check=name, passed=False, reason=f"expected {_short(want)}, got {_short(have)}")


def _same_tools(check: SameTools, case: EvalCase, got: Candidate) -> CheckResult:
    want = case.tools or []
    name = "same_tools(order)" if check.order else "same_tools"
    same = want == got.tools if check.order else set(want) == set(got.tools)
    if same:
        return CheckResult(check=name, passed=True)
    if check.order:
        return CheckResult(check=name, passed=False, reason=f"expected calls {want}, got {got.tools}")
    missing, extra = sorted(set(want) - set(got.tools)), sorted(set(got.tools) - set(want))
    parts = ([f"did not call {', '.join(missing)}"] if missing else []) + (
        [f"called {', '.join(extra)}"] if extra else [])
    return CheckResult(check=name, passed=False, reason="; ".join(parts))


def _within(name: str, factor: float, have: float | None, want: float | None, unit: str) -> CheckResult:
    if have is None or want is None:
        return CheckResult(check=name, passed=False, reason=f"no recorded {unit} to compare with")
    if have <= want * factor:
        return CheckResult(check=name, passed=True)
    return CheckResult(check=name, passed=False, reason=f"{unit} {have:g} is over {factor:g} x recorded {want:g}")


def _text_json(got: Candidate) -> Any:
    if got.output is not None:
        return got.output
    try:
        return json.loads(got.final_text)
    except ValueError:
        return got.final_text


def score(check: Any, case: EvalCase, got: Candidate) -> CheckResult | None:
    """A pure check's verdict; None for ``judge`` and ``function`` (run on a worker)."""
    recorded = case.recorded
    match check:
        case OutputEquals():
            return _output_equals(check, case, got)
        case Contains(text=text):
            ok = text in got.final_text
            return CheckResult(check="contains", passed=ok, reason="" if ok else f"the answer lacks {_short(text)}")
        case Regex(pattern=pattern):
            try:
                ok = re.search(pattern, got.final_text) is not None
            except re.error as exc:
                return CheckResult(check="regex", passed=False, reason=f"bad pattern {pattern!r}: {exc}")
            return CheckResult(check="regex", passed=ok, reason="" if ok else f"the answer does not match {pattern!r}")
        case JsonSchema(json_schema=schema):
            return _json_schema(schema, _text_json(got))
        case SameTools():
            return _same_tools(check, case, got)
        case CostWithin(factor=factor):
            if recorded is not None and recorded.cost_usd is not None and got.cost_usd is not None:
                return _within("cost_within", factor, got.cost_usd, recorded.cost_usd, "cost USD")
            return _within("cost_within", factor, got.tokens, recorded.tokens if recorded else None, "tokens")
        case StepsWithin(factor=factor):
            return _within("steps_within", factor, got.steps, recorded.steps if recorded else None, "steps")
    return None


def _json_schema(schema: dict[str, Any], value: Any) -> CheckResult:
    import jsonschema

    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as exc:
        return CheckResult(check="json_schema", passed=False, reason=f"not valid: {_short(exc.message)}")
    except jsonschema.SchemaError as exc:
        return CheckResult(check="json_schema", passed=False, reason=f"bad schema: {_short(exc.message)}")
    return CheckResult(check="json_schema", passed=True)


def check_name(check: Any) -> str:
    return str(check.kind)


def _judge(rest: str) -> Judge:
    provider, model, rubric = (rest.split(":", 2) + ["", ""])[:3]
    if not (provider and model and rubric):
        raise ValueError("a judge check is judge:PROVIDER:MODEL:RUBRIC")
    return Judge(model=f"{provider}:{model}", rubric=rubric)


def parse_check(text: str) -> Any:
    """A check from the command line: ``same_tools``, ``same_tools:order``,
    ``contains:TEXT``, ``regex:PATTERN``, ``output_equals[:FIELD]``,
    ``cost_within:FACTOR``, ``steps_within:FACTOR``, ``function:MODULE:FUNC``,
    ``judge:PROVIDER:MODEL:RUBRIC``, or a JSON object.

    Raises:
        ValueError: Not one of those.
    """
    from pydantic import TypeAdapter

    if text.lstrip().startswith("{"):
        return TypeAdapter(Check).validate_python(json.loads(text))
    kind, _, rest = text.partition(":")
    builders: dict[str, Any] = {
        "output_equals": lambda: OutputEquals(field=rest or None),
        "same_tools": lambda: SameTools(order=rest == "order"),
        "contains": lambda: Contains(text=rest),
        "regex": lambda: Regex(pattern=rest),
        "cost_within": lambda: CostWithin(factor=float(rest or 1.5)),
        "steps_within": lambda: StepsWithin(factor=float(rest or 1.5)),
        "function": lambda: Function(path=rest),
        "judge": lambda: _judge(rest),
    }
    if kind not in builders:
        raise ValueError(f"unknown check {kind!r}: use one of {', '.join(builders)} (or a JSON object)")
    return builders[kind]()
