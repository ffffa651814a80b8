"""Tool hooks as data: the input and decision of the run_tool_hooks activity, and the message
for hooks a worker lacks (the hooks themselves are registered on the worker: agentloop/tools/hooks.py)."""


from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from agentloop.shared.base.limits import TOOL_OUTPUT_LIMIT

if TYPE_CHECKING:
    pass


def missing_hooks_message(missing: list[str], available: list[str]) -> str:
    """Why a run naming hooks the worker lacks cannot start."""
    names = ", ".join(repr(n) for n in missing)
    return (
        f"the spec names tool hook{'s' if len(missing) > 1 else ''} {names} that the tools worker does not have "
        f"(it has: {', '.join(available) or 'none'}); register them with agentloop.before_tool_call or "
        "agentloop.on_tool_error in a module the tools worker imports, or remove them from AgentSpec.tool_hooks"
    )


class RunToolHooksInput(BaseModel):
    """Input of ``run_tool_hooks``: an activity-tool's call, before it runs
    (``stage="before"``) or after it failed (``stage="error"``, with the
    error the model would see).

    Attributes:
        stage: Which hooks: ``before_tool_call`` or ``on_tool_error``.
        hooks: The spec's hooks, in order.
        error: The call's error result (``stage="error"``).
        idempotency_key: The call's key (``ToolContext.idempotency_key``).
        workspace: The spec's workspace (the worker's when None).
    """

    stage: Literal["before", "error"]
    hooks: list[str] = Field(default_factory=list)
    run_id: str
    step: int = 0
    call_id: str = ""
    tool_name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    error: str = ""
    idempotency_key: str = ""
    workspace: str | None = None
    output_limit: int = TOOL_OUTPUT_LIMIT
    agent_name: str = ""
    model: str = ""


class ToolHookDecision(BaseModel):
    """What an activity-tool's hooks decided.

    Attributes:
        action: ``none`` (no hook decided: run the call, or keep its error),
            ``skip``, ``override``, ``fallback``, ``end_run``, or ``failed``
            (a hook raised, or is not registered: ``content`` says so).
        content: The result the model sees (the reason for ``end_run``).
    """

    action: Literal["none", "skip", "override", "fallback", "end_run", "failed"] = "none"
    content: str = ""
