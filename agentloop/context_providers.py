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
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from agentloop.context import ContextLayer
from agentloop.errors import UserError

if TYPE_CHECKING:
    from agentloop.tools import ToolRegistry

ProviderWhen = Literal["run", "step"]

_NAME_RE = re.compile(r"^[a-zA-Z0-9_.-]{1,64}$")

#: Most characters of ``AGENTS.md`` that reach the system prompt.
MAX_AGENTS_MD_CHARS = 32_000
#: Most characters a context provider's layer may hold.
MAX_LAYER_CHARS = 32_000
#: Most entries of the workspace listing.
MAX_LISTING_ENTRIES = 200


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
            from agentloop.tools import default_registry

            target = default_registry
        found = providers_of(target)
        if provider_name in found and found[provider_name].fn is not f:
            raise UserError(f"a context provider named {provider_name!r} is already registered; pick another name")
        found[provider_name] = ContextProvider(provider_name, when, f)
        return f

    return wrap(fn) if fn is not None else wrap


# Activity input and result ------------------------------------------------------------


class LoadContextInput(BaseModel):
    """Input of ``load_context``.

    Attributes:
        run_id: The run.
        step: The step about to run.
        agent_name: The spec's name.
        model: The spec's model.
        workspace: The spec's workspace (the worker's when None).
        providers: Context providers to run.
        when: Which of them: those of the run's start, or of each step.
        agents_md: Read the workspace root's ``AGENTS.md``.
        listing: List the workspace.
    """

    run_id: str
    step: int = 0
    agent_name: str = ""
    model: str = ""
    workspace: str | None = None
    providers: list[str] = Field(default_factory=list)
    when: ProviderWhen = "run"
    agents_md: bool = False
    listing: bool = False


class LoadContextResult(BaseModel):
    """Result of ``load_context``: the layers, in the order asked (AGENTS.md
    first), the listing, and the providers the worker lacks."""

    layers: list[ContextLayer] = Field(default_factory=list)
    listing: str | None = None
    missing: list[str] = Field(default_factory=list)
    available: list[str] = Field(default_factory=list)


# Pure helpers ---------------------------------------------------------------------------


def cut_agents_md(text: str) -> str:
    """``AGENTS.md`` cut to :data:`MAX_AGENTS_MD_CHARS` (the cut marked)."""
    if len(text) > MAX_AGENTS_MD_CHARS:
        return text[:MAX_AGENTS_MD_CHARS] + "\n[AGENTS.md cut here]"
    return text


def agents_md_layer(text: str) -> ContextLayer:
    """``AGENTS.md`` as a system layer (stable: read once per run)."""
    if len(text) > MAX_AGENTS_MD_CHARS and not text.endswith("\n[AGENTS.md cut here]"):
        text = cut_agents_md(text)
    return ContextLayer(name="workspace.agents_md", priority=10, stable=True,
                        content=f"Instructions from the workspace's AGENTS.md:\n\n{text}")


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


def with_listing(text: str, listing: str) -> str:
    """The first user turn's text with the workspace listing after it."""
    return f"{text}\n\nThe workspace (files and directories, two levels):\n{listing}"


def missing_providers_message(missing: list[str], available: list[str]) -> str:
    """Why a run naming providers the worker lacks cannot go on."""
    names = ", ".join(repr(n) for n in missing)
    return (f"the spec names context provider{'s' if len(missing) > 1 else ''} {names} that the tools worker does "
            f"not have (it has: {', '.join(available) or 'none'}); register them with agentloop.context_provider "
            "in a module the tools worker imports, or remove them from AgentSpec.context_providers")
