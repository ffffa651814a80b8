"""The checks of an agent's spec (:class:`~agentloop.shared.definition.spec.AgentSpec`)
that are not pydantic's own: its model string, its workspace, the names of
its tools and sub-agents, its thinking settings, and "did you mean" for an
unknown field. Pure functions: each returns the sentence that says what is
wrong (or raises ``ValueError`` with it), so that the spec's validators stay
one line each.
"""

from __future__ import annotations

import difflib
import posixpath
from collections.abc import Collection, Sequence

from pydantic import BaseModel, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from agentloop.shared.base.limits import TOOL_NAME_PATTERN

#: Providers a model string may name, as ``provider:model``.
KNOWN_PROVIDERS = ("openai", "anthropic", "scripted")

#: Kernel filesystems no workspace may be in: their files are the host's
#: processes, devices and settings, not a project's.
SYSTEM_FILESYSTEMS = ("/proc", "/sys", "/dev")


def with_field_suggestions(exc: ValidationError, model: type[BaseModel]) -> ValidationError:
    """``exc`` with "did you mean FIELD?" after each unknown top-level key of
    ``model`` that is close to one of its fields (``max_step``); ``exc``
    itself when none is."""
    found = exc.errors()
    details: list[InitErrorDetails] = []
    changed = False
    for error in found:
        message = error["msg"]
        loc = error["loc"]
        if error["type"] == "extra_forbidden" and len(loc) == 1 and isinstance(loc[0], str):
            close = difflib.get_close_matches(loc[0], list(model.model_fields), n=1)
            if close:
                message, changed = f"{message}; did you mean {close[0]}?", True
        details.append({"type": PydanticCustomError(error["type"], "{message}", {"message": message}),
                        "loc": loc, "input": error["input"]})
    return ValidationError.from_exception_data(exc.title, details) if changed else exc


def parse_model(model: str) -> tuple[str, str]:
    """Split ``provider:model`` into its two halves, with a clear error.

    Raises:
        ValueError: The string has no provider prefix or names an unknown one.
    """
    provider, sep, name = model.partition(":")
    if not sep or not provider or not name:
        raise ValueError(
            f"model {model!r} must be 'provider:model', e.g. 'openai:gpt-4.1-mini' or "
            f"'anthropic:claude-sonnet-4-5'; providers: {', '.join(KNOWN_PROVIDERS)}"
        )
    if provider not in KNOWN_PROVIDERS:
        raise ValueError(
            f"unknown model provider {provider!r} in {model!r}; use one of "
            f"{', '.join(KNOWN_PROVIDERS)} (any OpenAI-compatible server works as "
            "'openai:<model>' with OPENAI_BASE_URL set on the worker)"
        )
    return provider, name


def system_workspace_problem(path: str) -> str | None:
    """Why ``path`` cannot be a workspace (it is in ``/proc``, ``/sys`` or
    ``/dev``), or None. Lexical: the worker checks the resolved path again."""
    if not path.startswith("/"):
        return None  # relative to the worker's directory: checked there, resolved
    normalized = posixpath.normpath(path)
    for root in SYSTEM_FILESYSTEMS:
        if normalized == root or normalized.startswith(root + "/"):
            return (f"workspace {path} is in {root}, a kernel filesystem, not a project directory; use a "
                    "directory of your project")
    return None


def spec_workspace_problem(path: str | None) -> str | None:
    """Why ``path`` cannot be ``AgentSpec.workspace``, or None (unset is fine)."""
    return system_workspace_problem(path) if path else None


def _repeated(names: Sequence[str]) -> str:
    """The names ``names`` holds more than once, sorted and joined; empty when none."""
    return ", ".join(sorted({n for n in names if names.count(n) > 1}))


def tool_names_problem(tools: Collection[str], client_tools: Sequence[str], activity_tools: Sequence[str],
                       sub_agents: Collection[str]) -> str | None:
    """Why the names of a spec's tools, client tools, activity tools and
    sub-agents do not go together (one declared twice, a name in two lists,
    a sub-agent name the model cannot call), or None."""
    if repeated := _repeated(client_tools):
        return f"client_tools declares {repeated} more than once"
    if clash := sorted(set(client_tools) & set(tools)):
        return (f"{', '.join(clash)} is both a worker tool (tools) and a client tool (client_tools); "
                "keep it in one list")
    if repeated := _repeated(activity_tools):
        return f"activity_tools declares {repeated} more than once"
    if clash := sorted(set(activity_tools) & (set(tools) | set(client_tools) | set(sub_agents))):
        return (f"{', '.join(clash)} is both an activity tool (activity_tools) and a tool or sub-agent "
                "(tools, client_tools or sub_agents); keep it in one list")
    for name in sub_agents:
        if not TOOL_NAME_PATTERN.match(name):
            return (f"sub-agent name {name!r} is not allowed: the model calls it as a tool, so use "
                    "1-64 letters, digits, '_' or '-'")
    if clash := sorted(set(sub_agents) & (set(tools) | set(client_tools))):
        return (f"{', '.join(clash)} is both a sub-agent (sub_agents) and a tool (tools or client_tools); "
                "the model calls sub-agents as tools, so give them different names")
    return None


def thinking_problem(*, temperature: float | None, provider: str, tool_choice: str) -> str | None:
    """Why extended thinking cannot go with these settings, or None."""
    if temperature is not None:
        return ("thinking and temperature cannot be set together (reasoning models take the default "
                "temperature); unset one of them")
    if provider == "anthropic" and tool_choice not in ("auto", "none"):
        return (f"Anthropic's extended thinking takes tool_choice 'auto' or 'none' only, not "
                f"{tool_choice!r}; unset thinking or tool_choice")
    return None


def worker_names_problem(field: str | None, names: Sequence[str]) -> str | None:
    """Why ``names`` (``guardrails``, ``tool_hooks`` or ``context_providers``:
    names registered on the worker) is not a list of names, or None."""
    if repeated := _repeated(names):
        return f"{field} names {repeated} more than once"
    if any(not n.strip() for n in names):
        return f"{field} holds an empty name; name ones registered on the worker"
    return None
