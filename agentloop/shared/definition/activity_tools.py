"""Any Temporal activity as a tool (docs/tools.md).

A tool the run calls by scheduling an activity directly, on that activity's
own task queue: it can be served by a worker in Go, Java, TypeScript or
Python that knows nothing of agentloop. Declare one with
:class:`ActivityTool` (name, description, JSON schema, activity type, task
queue, timeouts, retries), or from a Python ``@activity.defn`` with
:func:`activity_as_tool` (the schema from its signature)::

    from agentloop import AgentSpec, activity_as_tool

    spec = AgentSpec(model="openai:gpt-4.1-mini",
                     activity_tools=[activity_as_tool(charge_card, task_queue="payments")])

The activity receives the model's arguments (one JSON object, or by
position for :func:`activity_as_tool`) and the call's idempotency key,
the same on every attempt of the call and different for every other call.

Pure code: the run's workflow uses it (no I/O, clocks or randomness).
"""

from __future__ import annotations

import inspect
import json
from datetime import timedelta
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from agentloop.shared.base.limits import TOOL_NAME_PATTERN
from agentloop.shared.base.text import cut
from agentloop.shared.definition.activity_io import ToolDefinition


class ActivityTool(BaseModel):
    """A tool that is a Temporal activity on some task queue.

    Attributes:
        name: The name the model calls it by.
        description: What it does, for the model.
        parameters: The JSON schema of its arguments (an object).
        activity: The activity type to schedule (its registered name).
        task_queue: The queue the activity's workers poll.
        arguments: How the activity takes the model's arguments: None (the
            default) passes them as one JSON object; a list of names passes
            those properties by position, in that order (Python activities
            with several parameters; :func:`activity_as_tool` sets it).
        idempotency_key: The property (object) or parameter (by position)
            that receives the call's idempotency key; None passes none.
        start_to_close_seconds: Limit of one attempt; the spec's tool
            timeout (``tool_timeouts`` / ``tool_timeout_seconds``) when None.
        schedule_to_close_seconds: Limit of the whole call, waiting for a
            worker and retries included; none when None (a queue that no
            worker polls then waits until the run is stopped or cancelled).
        heartbeat_seconds: Heartbeat timeout, for activities that heartbeat.
        max_attempts: Attempts before the model gets an error result.
        initial_interval_seconds: First retry delay.
        backoff_coefficient: Growth of the retry delay.
        maximum_interval_seconds: Longest retry delay; Temporal's default when None.
        non_retryable_error_types: Error types never retried.
        read_only: The activity changes nothing (permission policies let
            such tools run unasked).
    """

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    activity: str = Field(min_length=1)
    task_queue: str = Field(min_length=1)
    arguments: list[str] | None = None
    idempotency_key: str | None = "idempotency_key"
    start_to_close_seconds: float | None = Field(default=None, gt=0)
    schedule_to_close_seconds: float | None = Field(default=None, gt=0)
    heartbeat_seconds: float | None = Field(default=None, gt=0)
    max_attempts: int = Field(default=3, ge=1)
    initial_interval_seconds: float = Field(default=1.0, gt=0)
    backoff_coefficient: float = Field(default=2.0, ge=1)
    maximum_interval_seconds: float | None = Field(default=None, gt=0)
    non_retryable_error_types: list[str] = Field(default_factory=list)
    read_only: bool = False

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not TOOL_NAME_PATTERN.match(value):
            raise ValueError(f"activity tool name {value!r} is not allowed: use 1-64 letters, digits, '_' or '-'")
        return value

    @field_validator("parameters")
    @classmethod
    def _check_parameters(cls, value: dict[str, Any]) -> dict[str, Any]:
        jsonschema = _jsonschema()
        try:
            jsonschema.Draft202012Validator.check_schema(value)
        except jsonschema.SchemaError as exc:
            where = "/".join(str(p) for p in exc.absolute_path) or "(top)"
            problem = cut(exc.message, MAX_PROBLEM_CHARS)
            raise ValueError(f"parameters is not a valid JSON schema at {where}: {problem}; fix the "
                             "tool's declared schema") from None
        if value.get("type", "object") != "object":
            raise ValueError("parameters must be a JSON schema of type 'object' (the model's arguments are one "
                             "JSON object)")
        return value

    def definition(self) -> ToolDefinition:
        """The tool as the model sees it."""
        return ToolDefinition(name=self.name, description=self.description, parameters=self.parameters,
                              read_only=self.read_only)

    def retry(self) -> dict[str, Any]:
        """Fields of the activity's ``RetryPolicy``."""
        return {
            "initial_interval": timedelta(seconds=self.initial_interval_seconds),
            "backoff_coefficient": self.backoff_coefficient,
            "maximum_interval": timedelta(seconds=self.maximum_interval_seconds)
            if self.maximum_interval_seconds else None,
            "maximum_attempts": self.max_attempts,
            "non_retryable_error_types": list(self.non_retryable_error_types) or None,
        }


def activity_as_tool(
    fn: Any,
    *,
    task_queue: str,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    idempotency_key: str | None = "idempotency_key",
    **options: Any,
) -> ActivityTool:
    """A Python ``@activity.defn`` as a tool: the schema from its typed
    parameters (Google-style ``Args:`` docs become descriptions), its
    arguments by position.

    Args:
        fn: The activity function (decorated with ``@activity.defn``).
        task_queue: The queue its workers poll.
        name: The tool's name; the activity's name by default.
        description: For the model; the docstring's summary by default.
        read_only: The activity changes nothing.
        idempotency_key: The parameter that receives the call's
            idempotency key (left out of the schema); ignored when the
            function has no parameter of that name.
        options: More :class:`ActivityTool` fields (timeouts, retries).

    Raises:
        ValueError: ``fn`` is not an activity, or takes ``*args``/``**kwargs``.
    """
    from temporalio import activity as temporal_activity

    from agentloop.shared.definition.activity_io import parse_docstring as _parse_docstring

    defn = temporal_activity._Definition.from_callable(fn)
    if defn is None or not defn.name:
        raise ValueError(f"{getattr(fn, '__qualname__', fn)!r} is not a named @activity.defn function")
    summary, arg_docs = _parse_docstring(inspect.getdoc(fn) or "")
    hints = get_type_hints(fn)
    fields: dict[str, Any] = {}
    order: list[str] = []
    for pname, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ValueError(f"activity {defn.name!r}: *args and **kwargs cannot become a tool's schema")
        order.append(pname)
        if pname == idempotency_key:
            continue
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (hints.get(pname, Any), Field(default, description=arg_docs.get(pname)))
    schema = create_model("Args", __config__=ConfigDict(extra="forbid"), **fields).model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return ActivityTool(
        name=name or defn.name, description=summary if description is None else description, parameters=schema,
        activity=defn.name, task_queue=task_queue, arguments=order, read_only=read_only,
        idempotency_key=idempotency_key if idempotency_key in order else None, **options,
    )


def call_idempotency_key(run_id: str, temporal_run_id: str, step: int, call_id: str) -> str:
    """The idempotency key of an activity-tool call: fixed when the call is
    scheduled (it is in the activity's input), so every attempt, on any
    worker, gets the same one."""
    return f"{run_id}/{temporal_run_id}/{step}/{call_id}"


def activity_arguments(tool: ActivityTool, arguments: dict[str, Any], key: str) -> list[Any] | str:
    """The activity's arguments for the model's ``arguments``, or a sentence
    saying what is missing (the model's error result)."""
    if tool.arguments is None:
        payload = dict(arguments)
        if tool.idempotency_key:
            payload[tool.idempotency_key] = key
        return [payload]
    unknown = sorted(set(arguments) - set(tool.arguments))
    if unknown:
        return (f"Invalid arguments for tool '{tool.name}': unexpected {', '.join(unknown)}. Expected arguments "
                f"matching this JSON schema: {json.dumps(tool.parameters, separators=(',', ':'))}")
    properties = tool.parameters.get("properties", {})
    values: list[Any] = []
    for name in tool.arguments:
        if name == tool.idempotency_key:
            values.append(key)
        elif name in arguments:
            values.append(arguments[name])
        elif "default" in properties.get(name, {}):
            values.append(properties[name]["default"])
        else:
            return (f"Invalid arguments for tool '{tool.name}': {name} is required. Expected arguments matching "
                    f"this JSON schema: {json.dumps(tool.parameters, separators=(',', ':'))}")
    return values


#: Most schema problems an error result lists, and most characters of each.
MAX_ARGUMENT_PROBLEMS = 5
MAX_PROBLEM_CHARS = 200


def _jsonschema() -> Any:
    """The ``jsonschema`` module, imported outside the workflow sandbox (it is
    pure, but the sandbox would import it again for every run)."""
    from temporalio import workflow

    with workflow.unsafe.imports_passed_through():
        import jsonschema
    return jsonschema


def argument_problems(tool: ActivityTool, arguments: Any) -> str | None:
    """None when ``arguments`` match the tool's JSON schema; else the error
    result the model sees: what is wrong (at most
    :data:`MAX_ARGUMENT_PROBLEMS`, each cut short, so a large argument is not
    echoed back) and the schema, as for a Python tool. Deterministic: the
    workflow checks the arguments before it schedules the activity."""
    validator = _jsonschema().Draft202012Validator(tool.parameters)
    errors = sorted(validator.iter_errors(arguments), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    if not errors:
        return None
    problems = [f"{'.'.join(str(p) for p in e.absolute_path) or '(arguments)'}: {cut(e.message, MAX_PROBLEM_CHARS)}"
                for e in errors[:MAX_ARGUMENT_PROBLEMS]]
    if len(errors) > MAX_ARGUMENT_PROBLEMS:
        problems.append(f"and {len(errors) - MAX_ARGUMENT_PROBLEMS} more")
    return (f"Invalid arguments for tool '{tool.name}': " + "; ".join(problems)
            + f". Expected arguments matching this JSON schema: {json.dumps(tool.parameters, separators=(',', ':'))}")


def result_text(value: Any) -> str:
    """The text the model sees for an activity's return value."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, default=str, ensure_ascii=False)
