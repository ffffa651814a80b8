"""Test doubles: scripted models that answer from a script, not an LLM.

A script is a list of steps (a reply, tool calls, a function of the
request, or an exception to raise), or one function that answers every
step. The step is read from the conversation, so a retried LLM step or a
new worker after a crash answers exactly as before::

    from agentloop import AgentSpec
    from agentloop.testing import call, calls, reply, script

    model = script(calls(call("lookup_order", {"order_id": "A-1001"})), reply("refund"))
    spec = AgentSpec(model=model, tools=["lookup_order"])

:func:`script` registers under a fresh name in this process and returns the
model string (``scripted:<name>``); the worker that runs the LLM steps must
be in the same process, or have registered the same script under the same
name (``register_scripted_model``, e.g. in a module given to
``agentloop worker --import``). ``scripted:demo`` is always registered.
"""

from __future__ import annotations

import uuid
from typing import Any

from agentloop.activities.providers.scripted_model import (
    ScriptedChatModel,
    ScriptFunction,
    ScriptStep,
    call,
    calls,
    get_scripted_model,
    last_tool_results,
    register_scripted_model,
    reply,
    step_of,
)

__all__ = [
    "ScriptFunction",
    "ScriptStep",
    "ScriptedChatModel",
    "call",
    "calls",
    "get_scripted_model",
    "last_tool_results",
    "register_scripted_model",
    "reply",
    "script",
    "script_every_step",
    "step_of",
]


def _fresh_name() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


def script(*steps: Any, delta_seconds: float = 0.0) -> str:
    """Register one entry per step (replies from :func:`reply` or
    :func:`calls`, functions of the request, or exceptions to raise) under a
    fresh name; return the model string, ``scripted:<name>``.
    ``delta_seconds`` paces the streamed chunks (see :class:`ScriptedChatModel`)."""
    name = _fresh_name()
    register_scripted_model(name, list(steps), delta_seconds=delta_seconds)
    return f"scripted:{name}"


def script_every_step(answer: ScriptFunction) -> str:
    """Register a function that answers every step (it may read the step
    with :func:`step_of`) under a fresh name; return the model string."""
    name = _fresh_name()
    register_scripted_model(name, answer)
    return f"scripted:{name}"
