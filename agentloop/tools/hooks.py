"""Tool hooks: worker-side Python around every tool call of a run.

* ``before_tool_call`` hooks run before the tool. Each may let the call run
  (return None), skip it (:class:`Skip`: the model sees the reason), or give
  its result without running it (:class:`Override`).
* ``on_tool_error`` hooks run when a call ends in an error result. Each may
  leave the error as it is (None), give a result instead (:class:`Fallback`),
  or end the run (:class:`EndRun`: reason ``tool_error``).

Hooks are registered on the worker like tools, and a spec names the ones its
runs use (``AgentSpec.tool_hooks``), in order: the first hook that decides
wins. They run inside the ``execute_tool`` activity (for an activity-tool,
in a ``run_tool_hooks`` activity on the tools queue before the call, and
after it when it failed), so their decisions are recorded in the run's
history and never made twice::

    from agentloop import ToolCallInfo, ToolContext, Override, Skip, before_tool_call

    @before_tool_call
    def no_deletes_on_fridays(call: ToolCallInfo, ctx: ToolContext) -> Skip | None:
        if call.tool_name == "delete_file" and is_friday():
            return Skip("deletes wait until Monday")
        return None
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from agentloop.shared.base.errors import UserError

if TYPE_CHECKING:
    from agentloop.tools.registry import ToolRegistry
    from agentloop.tools.tool_context import ToolContext


HookKind = Literal["before_tool_call", "on_tool_error"]


_NAME_RE = re.compile(r"^[a-zA-Z0-9_.-]{1,64}$")


@dataclass(frozen=True)
class ToolCallInfo:
    """The call a hook is asked about.

    Attributes:
        tool_name: The tool the model called.
        arguments: The model's arguments (not yet validated before the call).
        call_id: The call's id.
        run_id: The run.
        step: The step that asked for it.
        agent_name: The spec's name.
        model: The spec's model.
    """

    tool_name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    call_id: str = ""
    run_id: str = ""
    step: int = 0
    agent_name: str = ""
    model: str = ""


@dataclass(frozen=True)
class Skip:
    """Do not run the call; the model sees ``reason`` as its (non-error) result."""

    reason: str = "the call was skipped"


@dataclass(frozen=True)
class Override:
    """Do not run the call; ``result`` is its result (formatted like a tool's return value)."""

    result: Any


@dataclass(frozen=True)
class Fallback:
    """The failed call's result is ``result`` instead of the error."""

    result: Any


@dataclass(frozen=True)
class EndRun:
    """End the run ``failed`` with reason ``tool_error``, saying ``reason``."""

    reason: str


@dataclass(frozen=True)
class Hook:
    """A registered hook."""

    name: str
    kind: HookKind
    fn: Callable[..., Any]

    async def call(self, *args: Any) -> Any:
        value = self.fn(*args)
        if inspect.isawaitable(value):
            value = await value
        allowed = (Skip, Override) if self.kind == "before_tool_call" else (Fallback, EndRun)
        if value is not None and not isinstance(value, allowed):
            names = " or ".join(a.__name__ for a in allowed)
            raise TypeError(f"{self.kind} hook {self.name!r} returned {type(value).__name__}; return None, {names}")
        return value


def hooks_of(registry: ToolRegistry) -> dict[str, Hook]:
    """The hooks registered with ``registry``, by name."""
    return registry.extension("hooks")


def register_hook(hook: Hook, *, registry: ToolRegistry | None = None, replace: bool = False) -> Hook:
    """Add a hook to ``registry`` (the default registry when None).

    Raises:
        UserError: A bad name, or another hook has it.
    """
    if registry is None:
        from agentloop.tools.registry import default_registry

        registry = default_registry
    if not _NAME_RE.match(hook.name):
        raise UserError(f"hook name {hook.name!r} is not allowed: use 1-64 letters, digits, '_', '-' or '.'")
    found = hooks_of(registry)
    if hook.name in found and found[hook.name].fn is not hook.fn and not replace:
        raise UserError(f"a tool hook named {hook.name!r} is already registered; "
                        "pick another name or pass replace=True")
    found[hook.name] = hook
    return hook


def _decorator(kind: HookKind, fn: Callable[..., Any] | None, name: str | None, registry: ToolRegistry | None) -> Any:
    def wrap(f: Callable[..., Any]) -> Callable[..., Any]:
        register_hook(Hook(name or f.__name__, kind, f), registry=registry)
        return f

    return wrap(fn) if fn is not None else wrap


def before_tool_call(fn: Callable[..., Any] | None = None, *, name: str | None = None,
                     registry: ToolRegistry | None = None) -> Any:
    """Register ``fn(call: ToolCallInfo, ctx: ToolContext)`` (sync or async)
    as a ``before_tool_call`` hook: it returns None (run the call),
    :class:`Skip` or :class:`Override`."""
    return _decorator("before_tool_call", fn, name, registry)


def on_tool_error(fn: Callable[..., Any] | None = None, *, name: str | None = None,
                  registry: ToolRegistry | None = None) -> Any:
    """Register ``fn(call: ToolCallInfo, error: str, ctx: ToolContext)``
    (sync or async) as an ``on_tool_error`` hook: it returns None (keep the
    error), :class:`Fallback` or :class:`EndRun`."""
    return _decorator("on_tool_error", fn, name, registry)


async def run_hooks(
    hooks: list[Hook], info: ToolCallInfo, ctx: ToolContext, execute: Callable[[], Any],
    error_of: Callable[[Any], str | None],
) -> tuple[Any, Any]:
    """Run a call through its hooks: the before hooks, then ``execute()``
    unless one decided, then, if ``error_of(result)`` says it failed, the
    error hooks. Returns (the decision that replaced the call or its error,
    or None; the executed result, or None when it did not run)."""
    decision = await before_hooks(hooks, info, ctx)
    if decision is not None:
        return decision, None
    result = await execute()
    error = error_of(result)
    if error is None:
        return None, result
    return await error_hooks(hooks, info, error, ctx), result


async def before_hooks(hooks: list[Hook], info: ToolCallInfo, ctx: ToolContext | None) -> Skip | Override | None:
    """The first decision of the ``before_tool_call`` hooks, or None (run the call)."""
    for hook in hooks:
        if hook.kind == "before_tool_call":
            decision = await hook.call(info, ctx)
            if decision is not None:
                return decision
    return None


async def error_hooks(hooks: list[Hook], info: ToolCallInfo, error: str,
                      ctx: ToolContext | None) -> Fallback | EndRun | None:
    """The first decision of the ``on_tool_error`` hooks, or None (keep the error)."""
    for hook in hooks:
        if hook.kind == "on_tool_error":
            decision = await hook.call(info, error, ctx)
            if decision is not None:
                return decision
    return None
