"""The tool registry: named tools with JSON-schema parameters.

A tool is a Python function with a typed signature; the signature gives the
JSON schema the model sees, and the same schema validates the model's
arguments before the function runs::

    from agentloop import tool, ToolContext

    @tool(read_only=True)
    async def lookup_order(order_id: str, ctx: ToolContext) -> str:
        \"\"\"Look up an order.

        Args:
            order_id: The order's id, e.g. "A-1001".
        \"\"\"
        ...

Tools run inside the ``execute_tool`` activity on a worker, so a worker must
import the module that registers them (``agentloop worker --import mymodule``).
Async tools run on the worker's event loop; plain (sync) ones in a child
process forked per call and killed on timeout (:mod:`agentloop.tools.isolation`),
unless registered with ``isolated=False``.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import re
from collections.abc import Awaitable, Callable
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from agentloop.shared.base.errors import UserError
from agentloop.shared.base.limits import TOOL_NAME_PATTERN
from agentloop.shared.definition.activity_io import ToolDefinition
from agentloop.shared.definition.activity_io import parse_docstring as _parse_docstring
from agentloop.tools.isolation import fork_available, run_isolated
from agentloop.tools.tool_context import ToolContext

ToolFunction = Callable[..., Any] | Callable[..., Awaitable[Any]]


class Tool:
    """A registered tool.

    Attributes:
        name: The name the model calls it by.
        description: What it does, for the model.
        read_only: It changes nothing (policies let such tools run unasked).
        isolated: A plain (sync) function runs in a forked child process per
            call, killed with the call's timeout or cancellation, so C code
            holding the GIL cannot stall the worker. False for async tools
            (they run on the worker's event loop) and for sync tools
            registered with ``isolated=False`` (they run in a thread).
        args_model: Pydantic model of the arguments; its JSON schema is what
            the model sees.
        local: A quick tool: a run whose own worker serves the tools (role
            ``all``) calls it as a local activity of that worker, in the
            workflow task that asked for it, instead of an ``execute_tool``
            activity task (docs/tools.md).
    """

    #: Off for tools made by subclasses that do not call ``__init__``.
    local: bool = False

    def __init__(
        self,
        fn: ToolFunction,
        *,
        name: str | None = None,
        description: str | None = None,
        read_only: bool = False,
        isolated: bool | None = None,
        local: bool = False,
    ) -> None:
        self.fn = fn
        self.local = local
        self._schema: dict[str, Any] | None = None
        self.name = name or fn.__name__
        if not TOOL_NAME_PATTERN.match(self.name):
            raise UserError(
                f"tool name {self.name!r} is not allowed: use 1-64 letters, digits, '_' or '-'"
            )
        doc = inspect.getdoc(fn) or ""
        summary, arg_docs = _parse_docstring(doc)
        self.description = description if description is not None else summary
        self.read_only = read_only
        is_async = inspect.iscoroutinefunction(fn)
        if isolated and is_async:
            raise UserError(
                f"tool {self.name!r}: isolated=True applies to plain functions; an async tool "
                "runs on the worker's event loop (make it a plain function to isolate it)"
            )
        self.isolated = (not is_async and isolated is not False) and fork_available()
        self._context_param: str | None = None
        self.args_model = self._build_args_model(fn, arg_docs)
        try:  # at registration, not at a run's first step
            self.parameters  # noqa: B018
        except Exception as exc:
            raise UserError(
                f"tool {self.name!r}: its arguments have no JSON schema to show the model "
                f"({type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}); give each parameter a JSON type "
                "(str, int, float, bool, a list, a dict, a pydantic model)"
            ) from None

    def _build_args_model(self, fn: ToolFunction, arg_docs: dict[str, str]) -> type[BaseModel]:
        from pydantic import Field

        hints = get_type_hints(fn)
        fields: dict[str, Any] = {}
        for pname, param in inspect.signature(fn).parameters.items():
            annotation = hints.get(pname, Any)
            if annotation is ToolContext:
                self._context_param = pname
                continue
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise UserError(f"tool {self.name!r}: *args and **kwargs are not supported")
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[pname] = (annotation, Field(default, description=arg_docs.get(pname)))
        model_name = "".join(part.title() for part in re.split(r"[_-]", self.name)) + "Args"
        return create_model(
            model_name, __config__=ConfigDict(extra="forbid"), **fields
        )

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the arguments (generated once; a copy each time)."""
        if self._schema is None:
            schema = self.args_model.model_json_schema()
            schema.pop("title", None)
            for prop in schema.get("properties", {}).values():
                prop.pop("title", None)
            self._schema = schema
        return copy.deepcopy(self._schema)

    def definition(self) -> ToolDefinition:
        """The tool as the model sees it."""
        return ToolDefinition(
            name=self.name,
            description=self.description,
            parameters=self.parameters,
            read_only=self.read_only,
        )

    def validate(self, arguments: dict[str, Any]) -> BaseModel:
        """Check the model's arguments against the schema.

        Raises:
            InvalidToolArguments: With a message the model can act on.
        """
        try:
            return self.args_model.model_validate(arguments)
        except ValidationError as exc:
            problems = []
            for err in exc.errors():
                loc = ".".join(str(p) for p in err["loc"]) or "(arguments)"
                problems.append(f"{loc}: {err['msg']}")
            raise InvalidToolArguments(
                f"Invalid arguments for tool '{self.name}': " + "; ".join(problems)
                + f". Expected arguments matching this JSON schema: {_compact_schema(self.parameters)}"
            ) from None

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        """Validate the arguments and call the function.

        Async functions run on the event loop; sync ones in a forked child
        process (see :mod:`agentloop.tools.isolation`), or in a thread with
        ``isolated=False``. Cancelling the call (a timeout around it) kills
        the child.
        """
        args = self.validate(arguments)
        kwargs = {name: getattr(args, name) for name in type(args).model_fields}
        if self._context_param:
            kwargs[self._context_param] = ctx
        if inspect.iscoroutinefunction(self.fn):
            return await self.fn(**kwargs)
        if self.isolated:
            return await run_isolated(self.fn, kwargs, tool_name=self.name, ctx=ctx)
        return await asyncio.to_thread(self.fn, **kwargs)


class InvalidToolArguments(ValueError):
    """The model's arguments do not match the tool's schema."""


class ToolRegistry:
    """Named tools. Workers look tools up here by the names in the spec."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._extensions: dict[str, dict[str, Any]] = {}

    def extension(self, kind: str) -> dict[str, Any]:
        """The registry's table of other worker-side functions of ``kind``
        (``"guardrails"``, ``"hooks"``, ``"context_providers"``), by name:
        they travel with the tools to the worker that runs them."""
        return self._extensions.setdefault(kind, {})

    def register(self, tool: Tool, *, replace: bool = False) -> Tool:
        """Add a tool.

        Raises:
            UserError: A different tool already has that name and ``replace`` is False.
        """
        existing = self._tools.get(tool.name)
        if existing is not None and existing.fn is not tool.fn and not replace:
            raise UserError(
                f"a tool named {tool.name!r} is already registered "
                f"({existing.fn.__module__}.{existing.fn.__qualname__}); pick another name "
                "or pass replace=True"
            )
        self._tools[tool.name] = tool
        return tool

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or None."""
        return self._tools.get(name)

    def names(self) -> list[str]:
        """All tool names, sorted."""
        return sorted(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def tool(
        self,
        fn: ToolFunction | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        read_only: bool = False,
        isolated: bool | None = None,
        local: bool = False,
    ) -> Any:
        """Decorator that registers a function as a tool in this registry.

        Takes the arguments of :func:`tool`.
        """

        def wrap(f: ToolFunction) -> ToolFunction:
            self.register(
                Tool(f, name=name, description=description, read_only=read_only, isolated=isolated, local=local)
            )
            return f

        return wrap(fn) if fn is not None else wrap


#: The registry workers use unless given another.
default_registry = ToolRegistry()


def tool(
    fn: ToolFunction | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    isolated: bool | None = None,
    local: bool = False,
) -> Any:
    """Register a function as a tool in the default registry.

    Args:
        fn: The function; its typed parameters become the JSON schema, a
            parameter annotated :class:`ToolContext` receives the call context.
        name: Tool name; the function's name by default.
        description: For the model; the docstring's summary by default.
        read_only: The tool changes nothing.
        isolated: For a plain (sync) function, run each call in a forked
            child process, killed on timeout or cancellation (the default).
            ``False`` runs it in a thread of the worker instead: it shares the
            worker's memory, but C code holding the GIL there stalls the whole
            worker and a timeout cannot stop it. Async tools always run on the
            worker's event loop.
        local: A quick tool (well under a second, safe to run again): where
            the run's own worker serves the tools (role ``all``), each call
            is a local activity of that worker, in the workflow task that
            asked for it: no activity task and no workflow task of its own.
            Elsewhere (a tools worker on the tools queue) it runs as every
            tool does.
    """
    return default_registry.tool(
        fn, name=name, description=description, read_only=read_only, isolated=isolated, local=local
    )


def _compact_schema(schema: dict[str, Any]) -> str:
    import json

    return json.dumps(schema, separators=(",", ":"), sort_keys=True)
