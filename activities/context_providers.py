"""The ``load_context`` activity's work: context providers, ``AGENTS.md``
and the workspace listing (see :mod:`agentloop.tools.context_providers`)."""

from __future__ import annotations

from pathlib import Path

from temporalio import activity
from temporalio.exceptions import ApplicationError

from agentloop.shared.definition.context_providers import (
    MAX_AGENTS_MD_CHARS,
    LoadContextInput,
    LoadContextResult,
    agents_md_layer,
    cut_agents_md,
)
from agentloop.tools.context_providers import ContextRequest, providers_of, workspace_listing
from agentloop.tools.registry import ToolRegistry

#: ApplicationError type of a context provider that raised (retried).
CONTEXT_PROVIDER_FAILED_ERROR_TYPE = "ContextProviderFailed"


async def load_context(
    registry: ToolRegistry, workspace: Path, allowed: bool, input: LoadContextInput
) -> LoadContextResult:
    """The layers and listing ``input`` asks for. ``allowed``: the workspace
    lies in the worker's allowed roots (else it is not read)."""
    known = providers_of(registry)
    missing = [n for n in input.providers if n not in known]
    if missing:
        return LoadContextResult(missing=missing, available=sorted(known))
    readable = allowed and workspace.is_dir()
    layers = []
    agents_md = read_agents_md(workspace, allowed) if input.agents_md else None
    if agents_md is not None:
        layers.append(agents_md_layer(agents_md))
    request = ContextRequest(run_id=input.run_id, step=input.step, agent_name=input.agent_name, model=input.model,
                             workspace=workspace)
    for name in [n for n in input.providers if known[n].when == input.when]:
        try:
            layers.append(await known[name].layer(request))
        except Exception as exc:
            activity.logger.warning("context provider %s raised %r", name, exc)
            raise ApplicationError(f"context provider {name} raised {type(exc).__name__}: {exc}",
                                   type=CONTEXT_PROVIDER_FAILED_ERROR_TYPE) from None
    listing = None
    if input.listing:
        listing = workspace_listing(workspace) if readable else "(the workspace cannot be read on the worker)"
    return LoadContextResult(layers=layers, listing=listing)


def read_agents_md(workspace: Path, allowed: bool) -> str | None:
    """The workspace root's ``AGENTS.md``, cut to its limit, or None when
    there is none (or the workspace is not one this worker may read)."""
    path = workspace / "AGENTS.md"
    if not allowed or not path.is_file():
        return None
    with path.open(encoding="utf-8", errors="replace") as f:
        text = f.read(MAX_AGENTS_MD_CHARS + 1)
        if len(text) <= MAX_AGENTS_MD_CHARS:
            return text
        # The cut's mark counts the whole file: count the rest, a chunk at a time.
        rest = sum(len(chunk) for chunk in iter(lambda: f.read(1 << 16), ""))
        return cut_agents_md(text, len(text) + rest)
