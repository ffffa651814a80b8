"""Context a run loads from its worker: dynamic system-prompt layers,
``AGENTS.md`` and the workspace's first listing.

* A *context provider* is a worker-side function that produces a system
  layer: at the run's start (``when="run"``), or before each LLM step
  (``when="step"``), e.g. today's date or the user's profile. A spec names
  its providers in ``AgentSpec.context_providers``.
* The workspace root's ``AGENTS.md``, when present, becomes a stable system
  layer (``workspace.agents_md``). By default (``AgentSpec.agents_md=None``)
  runs with tools read it in the tool lookup they do anyway
  (no extra activity); ``agents_md=True`` reads it in every run (here, in
  ``load_context``), ``agents_md=False`` never.
* With ``AgentSpec.workspace_listing``, the run's first user turn also
  carries a listing of the workspace.

All of it is loaded by the ``load_context`` activity on the tools queue
(where the workspace and the registry are), so its result is in the run's
history and replay never calls a provider again::

    from agentloop import ContextRequest, context_provider

    @context_provider(when="run")
    def today(request: ContextRequest) -> str:
        return f"Today is {datetime.date.today():%A %d %B %Y}."
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentloop.shared.base.errors import UserError
from agentloop.shared.definition.context_providers import ContextLayer

if TYPE_CHECKING:
    from agentloop.tools.registry import ToolRegistry
from agentloop.shared.definition.context_providers import MAX_LAYER_CHARS, MAX_LISTING_ENTRIES, ProviderWhen

_NAME_RE = re.compile(r"^[a-zA-Z0-9_.-]{1,64}$")


@dataclass(frozen=True)
class ContextRequest:
    """What a context provider is asked about.

    Attributes:
        run_id: The run.
        step: The LLM step about to run (0 at the run's start).
        agent_name: The spec's name.
        model: The spec's model.
        workspace: The run's workspace on this worker.
    """

    run_id: str
    step: int
    agent_name: str
    model: str
    workspace: Path


@dataclass(frozen=True)
class ContextProvider:
    """A registered context provider."""

    name: str
    when: ProviderWhen
    fn: Callable[[ContextRequest], Any]

    async def layer(self, request: ContextRequest) -> ContextLayer:
        value = self.fn(request)
        if inspect.isawaitable(value):
            value = await value
        if isinstance(value, str):
            value = ContextLayer(name=self.name, content=value, stable=self.when == "run")
        if not isinstance(value, ContextLayer):
            raise TypeError(f"context provider {self.name!r} returned {type(value).__name__}; return a str or a "
                            "ContextLayer")
        if len(value.content) > MAX_LAYER_CHARS:
            value = value.model_copy(update={"content": value.content[:MAX_LAYER_CHARS] + "\n[cut]"})
        return value


def providers_of(registry: ToolRegistry) -> dict[str, ContextProvider]:
    """The context providers registered with ``registry``, by name."""
    return registry.extension("context_providers")


def context_provider(fn: Callable[[ContextRequest], Any] | None = None, *, when: ProviderWhen = "run",
                     name: str | None = None, registry: ToolRegistry | None = None) -> Any:
    """Register ``fn(request: ContextRequest) -> str | ContextLayer`` (sync
    or async) as a context provider, run at the start of each run
    (``when="run"``) or before each LLM step (``when="step"``)."""

    def wrap(f: Callable[[ContextRequest], Any]) -> Callable[[ContextRequest], Any]:
        provider_name = name or f.__name__
        if not _NAME_RE.match(provider_name):
            raise UserError(f"context provider name {provider_name!r} is not allowed: use 1-64 letters, digits, "
                            "'_', '-' or '.'")
        if when not in ("run", "step"):
            raise UserError(f"context provider {provider_name!r}: when must be 'run' or 'step', not {when!r}")
        target = registry
        if target is None:
            from agentloop.tools.registry import default_registry

            target = default_registry
        found = providers_of(target)
        if provider_name in found and found[provider_name].fn is not f:
            raise UserError(f"a context provider named {provider_name!r} is already registered; pick another name")
        found[provider_name] = ContextProvider(provider_name, when, f)
        return f

    return wrap(fn) if fn is not None else wrap


def workspace_listing(root: Path, limit: int = MAX_LISTING_ENTRIES) -> str:
    """The workspace's files and directories, two levels deep, sorted, hidden
    ones left out, at most ``limit`` entries (the rest counted)."""
    entries: list[str] = []
    more = 0
    for path in sorted(root.iterdir()):
        if path.name.startswith("."):
            continue
        children = []
        if path.is_dir():
            children = sorted(p for p in path.iterdir() if not p.name.startswith("."))
        for shown in [path, *children]:
            if len(entries) >= limit:
                more += 1
                continue
            rel = shown.relative_to(root).as_posix()
            entries.append(rel + "/" if shown.is_dir() else rel)
    text = "\n".join(entries) or "(empty)"
    if more:
        text += f"\n... and {more} more"
    return text
