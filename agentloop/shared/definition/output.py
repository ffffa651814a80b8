"""Typed results: what ``AgentSpec.output`` holds, and how an answer is checked.

``AgentSpec.output`` takes a pydantic model class (a spec file names it by
import path, ``myapp.models:Triage``), a JSON schema, or a simple type
(``Literal["refund", "escalate"]``, ``int``, ``list[str]``). It becomes an
:class:`OutputSpec`: the JSON schema, which crosses into the run, and the
Python type, which stays on the side that set it (the client, or the
workflow calling ``run_agent``) to turn the run's JSON value back into it.

The run checks the model's answer against the schema (:func:`check_value`,
pure and deterministic: it runs in workflow code) and feeds what was wrong
back to the model (:func:`feedback`).
"""

from __future__ import annotations

import importlib
import json
import re
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ConfigDict, PrivateAttr, TypeAdapter, model_validator

#: The tool a model without native structured output answers with.
FINAL_RESULT_TOOL = "final_result"

#: The key a non-object answer is wrapped in (providers' structured outputs
#: take object schemas only).
WRAP_KEY = "result"

#: Most characters of a validation error kept in a run's error and feedback.
MAX_FEEDBACK_CHARS = 4_000


class OutputSpec(BaseModel):
    """``AgentSpec.output`` as it travels: the answer's JSON schema.

    Attributes:
        json_schema: What the answer must match (as given, or as pydantic
            derived it from a type).
        name: The schema's name, sent to providers (letters, digits, ``_``, ``-``).
        type_path: ``module:qualname`` of the Python type it came from, when
            it came from an importable one (spec files name it so).
    """

    model_config = ConfigDict(extra="forbid")

    json_schema: dict[str, Any]
    name: str = "output"
    type_path: str | None = None

    _python_type: Any = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _check_schema(self) -> OutputSpec:
        try:
            Draft202012Validator.check_schema(self.json_schema)
        except SchemaError as exc:
            raise ValueError(f"output is not a valid JSON schema: {exc.message}") from None
        return self

    @property
    def python_type(self) -> Any:
        """The Python type the answer is parsed into, when known here."""
        return self._python_type

    @property
    def wrapped(self) -> bool:
        """The schema is not an object's: the model answers ``{"result": ...}``."""
        return self.json_schema.get("type") != "object"

    def model_schema(self, *, strict: bool = True) -> dict[str, Any]:
        """The object schema a model is asked to answer in (non-object
        schemas wrapped in ``{"result": ...}``); with ``strict``, in the form
        OpenAI's strict structured outputs take (every property required,
        no additional properties, no defaults)."""
        schema = dict(self.json_schema)
        if self.wrapped:
            defs: dict[str, Any] = {k: schema.pop(k) for k in ("$defs", "definitions") if k in schema}
            schema = {"type": "object", "properties": {WRAP_KEY: schema}, "required": [WRAP_KEY], **defs}
        return strict_schema(schema) if strict else schema

    def parse(self, value: Any) -> Any:
        """``value`` (the run's JSON answer) as the Python type, when known; else as is."""
        if self._python_type is None or value is None:
            return value
        return TypeAdapter(self._python_type).validate_python(value)


def strict_schema(schema: Any) -> Any:
    """``schema`` with every object closed and all its properties required,
    and no ``default`` keys (OpenAI's strict mode)."""
    if isinstance(schema, list):
        return [strict_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict_schema(v) for k, v in schema.items() if k != "default"}
    if "properties" in schema:
        out["properties"] = {k: strict_schema(v) for k, v in schema["properties"].items()}
        out["required"] = list(schema["properties"])
    if schema.get("type") == "object" or "properties" in schema:
        out["additionalProperties"] = False
    for key in ("$defs", "definitions"):
        if key in schema:
            out[key] = {k: strict_schema(v) for k, v in schema[key].items()}
    return out


def type_path(python_type: Any) -> str | None:
    """``module:qualname`` of a class that can be imported again by it."""
    module, qualname = getattr(python_type, "__module__", None), getattr(python_type, "__qualname__", None)
    if not isinstance(python_type, type) or not module or not qualname or "<locals>" in qualname:
        return None
    if module == "builtins":
        return None
    return f"{module}:{qualname}"


def import_type(path: str) -> Any:
    """The type at ``module:qualname`` (or ``module.Name``).

    Raises:
        ValueError: It cannot be imported, with what to check.
    """
    module_name, sep, qualname = path.partition(":")
    if not sep:
        module_name, _, qualname = path.rpartition(".")
    if not module_name or not qualname:
        raise ValueError(f"output {path!r} is not an import path; name a type as 'module:Name' "
                         "(e.g. 'myapp.models:Triage'), or give a JSON schema")
    try:
        found: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"output {path!r} cannot be imported ({exc}); check the module is on the "
                         "Python path (PYTHONPATH) and the name is right") from None
    return found


def output_spec(value: Any) -> OutputSpec:
    """An :class:`OutputSpec` from what ``AgentSpec.output`` was given.

    Raises:
        ValueError: Not a type pydantic can describe, an import path that
            does not import, or an invalid JSON schema.
    """
    if isinstance(value, OutputSpec):
        return value
    if isinstance(value, dict):
        if "json_schema" in value:
            return OutputSpec.model_validate(value)
        return OutputSpec(json_schema=value, name=_schema_name(value.get("title")))
    python_type = import_type(value) if isinstance(value, str) else value
    try:
        schema = TypeAdapter(python_type).json_schema()
    except Exception as exc:  # pydantic raises several kinds for types it cannot describe
        raise ValueError(f"output {python_type!r} is not a type pydantic can describe as JSON schema "
                         f"({type(exc).__name__}); use a pydantic model, a simple type or a JSON schema") from None
    name = getattr(python_type, "__name__", None) if isinstance(python_type, type) else None
    spec = OutputSpec(json_schema=schema, name=_schema_name(name or schema.get("title")),
                      type_path=value if isinstance(value, str) else type_path(python_type))
    spec._python_type = python_type
    return spec


def _schema_name(title: Any) -> str:
    name = re.sub(r"[^a-zA-Z0-9_-]", "_", title) if isinstance(title, str) and title else "output"
    return name[:64]


# Checking an answer (pure: runs in workflow code) ---------------------------------------


def decode_text(text: str) -> tuple[Any, str | None]:
    """The JSON value of an answer given as text (a code fence around it
    allowed), or the reason it is not JSON."""
    stripped = text.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", stripped, flags=re.DOTALL)
    if fenced:
        stripped = fenced.group(1)
    try:
        return json.loads(stripped), None
    except json.JSONDecodeError as exc:
        return None, f"the answer is not JSON ({exc.msg} at character {exc.pos})"
    except ValueError as exc:  # e.g. an integer past Python's digit limit
        return None, f"the answer is not JSON ({exc})"


def check_value(output: OutputSpec, value: Any) -> tuple[Any, list[str]]:
    """The answer ``value`` (as the model sent it, wrapped or not) checked
    against the schema: the value unwrapped, and what is wrong with it
    (empty when valid), one line per problem naming its field."""
    if output.wrapped:
        if isinstance(value, dict) and set(value) == {WRAP_KEY}:
            value = value[WRAP_KEY]
    validator = Draft202012Validator(output.json_schema)
    problems = sorted(validator.iter_errors(value), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    return value, [_problem(e) for e in problems[:20]]


def _problem(error: Any) -> str:
    """One validation error, naming its field."""
    path = list(error.absolute_path)
    if error.validator == "required" and isinstance(error.instance, dict):
        missing = [k for k in error.validator_value if k not in error.instance]
        return "; ".join(f"{_where([*path, k])}: missing (a required field)" for k in missing)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        return f"{_where(path)}: {error.message}"
    return f"{_where(path)}: {error.message}"


def _where(path: Any) -> str:
    parts = list(path)
    if not parts:
        return "the answer"
    return "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p)) for i, p in enumerate(parts))


def feedback(problems: list[str], output: OutputSpec, *, tries_left: int) -> str:
    """What the model is told when its answer does not match the schema."""
    listed = "\n".join(f"- {p}" for p in problems)
    shape = (f'an object {{"{WRAP_KEY}": ...}} whose "{WRAP_KEY}" matches the schema' if output.wrapped
             else "one JSON object matching the schema")
    text = (f"Your final answer does not match the required output schema:\n{listed}\n"
            f"Answer again with {shape} ({tries_left} more {'try' if tries_left == 1 else 'tries'}).")
    return text[:MAX_FEEDBACK_CHARS]


def invalid_message(problems: list[str], tries: int) -> str:
    """Why a run whose answers never matched the schema failed (reason ``output_invalid``)."""
    text = (f"the model's answer did not match AgentSpec.output after {tries} "
            f"{'try' if tries == 1 else 'tries'}; last validation error: {'; '.join(problems)}")
    return text[:MAX_FEEDBACK_CHARS]


def dump_value(value: Any) -> str:
    """The answer as compact JSON text (a typed run's ``final_text``)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
