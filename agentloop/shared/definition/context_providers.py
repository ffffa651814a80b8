"""Context providers and system-prompt layers: the layers a run's system
prompt is composed of, and the input and result of ``load_context``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agentloop.shared.base.text import cut


class ContextLayer(BaseModel):
    """One named section of the system prompt.

    Attributes:
        name: Identifies the layer (e.g. ``agent.instructions``,
            ``workspace.files``); ties in priority are ordered by name.
        content: The layer's text; empty layers are left out.
        priority: Lower comes first among layers of the same stability.
        stable: The content does not change during a run. Stable layers come
            before all others so the prompt's beginning stays byte-identical
            from step to step and the provider's prompt cache keeps hitting.
    """

    model_config = ConfigDict(extra="forbid")

    name: str
    content: str
    priority: int = 100
    stable: bool = True


def compose_system_prompt(layers: Iterable[ContextLayer]) -> str:
    """The system prompt of ``layers``: stable ones first, then by priority,
    then by name; empty layers skipped; each layer's surrounding whitespace
    trimmed; joined with blank lines."""
    ordered = sorted(layers, key=lambda layer: (not layer.stable, layer.priority, layer.name))
    return "\n\n".join(text for layer in ordered if (text := layer.content.strip()))


ProviderWhen = Literal["run", "step"]

#: Most characters of ``AGENTS.md`` that reach the system prompt.
MAX_AGENTS_MD_CHARS = 32_000

#: Most characters a context provider's layer may hold.
MAX_LAYER_CHARS = 32_000

#: Most entries of the workspace listing.
MAX_LISTING_ENTRIES = 200

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

def cut_agents_md(text: str, length: int | None = None) -> str:
    """``AGENTS.md`` cut to :data:`MAX_AGENTS_MD_CHARS` (the cut marked; a
    text already cut is left as it is). ``length``: the file's whole length
    when ``text`` is only its start."""
    return cut(text, MAX_AGENTS_MD_CHARS, length=length)

def agents_md_layer(text: str) -> ContextLayer:
    """``AGENTS.md`` as a system layer (stable: read once per run)."""
    text = cut_agents_md(text)
    return ContextLayer(name="workspace.agents_md", priority=10, stable=True,
                        content=f"Instructions from the workspace's AGENTS.md:\n\n{text}")

def with_listing(text: str, listing: str) -> str:
    """The first user turn's text with the workspace listing after it."""
    return f"{text}\n\nThe workspace (files and directories, two levels):\n{listing}"

def missing_providers_message(missing: list[str], available: list[str]) -> str:
    """Why a run naming providers the worker lacks cannot go on."""
    names = ", ".join(repr(n) for n in missing)
    return (f"the spec names context provider{'s' if len(missing) > 1 else ''} {names} that the tools worker does "
            f"not have (it has: {', '.join(available) or 'none'}); register them with agentloop.context_provider "
            "in a module the tools worker imports, or remove them from AgentSpec.context_providers")
