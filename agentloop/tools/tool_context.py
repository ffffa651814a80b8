"""``ToolContext``: what a tool gets to know about the call it serves.

At the bottom of the tool API: the registry, isolation, hooks, guardrails and
context providers all use it, and it imports none of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentloop.shared.base.limits import TOOL_OUTPUT_LIMIT

__all__ = ["ToolContext"]


@dataclass
class ToolContext:
    """What a tool gets to know about the call it serves.

    Attributes:
        workspace: The workspace root; built-in tools stay inside it.
        run_id: The run (workflow id).
        step: The step that asked for the call.
        call_id: The tool call's id.
        output_limit: Most characters of output the model will see.
        metrics: Put numbers or flags here; they appear in the call's report.
        heartbeat: Call to tell Temporal the tool is alive (done for you every
            few seconds while a tool runs; call it for finer progress).
        idempotency_key: The same string on every attempt of this call, and
            different for every other call: pass it to services that
            deduplicate requests, so a retried call does not act twice.
        agent_name: The name of the agent whose model called the tool.
        model: That agent's model, ``provider:model``.
    """

    workspace: Path
    run_id: str = ""
    step: int = 0
    call_id: str = ""
    output_limit: int = TOOL_OUTPUT_LIMIT
    metrics: dict[str, Any] = field(default_factory=dict)
    heartbeat: Callable[..., None] = lambda *details: None
    idempotency_key: str = ""
    agent_name: str = ""
    model: str = ""
