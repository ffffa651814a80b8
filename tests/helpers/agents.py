"""Specs and scripted-model steps that many tests share."""

from __future__ import annotations

from typing import Any

from agentloop import AgentSpec
from agentloop.shared.definition.activity_io import ModelRequest, ModelResponse
from agentloop.testing import call, last_tool_results, reply, script_every_step

#: The tools approval tests let the model call (writes ask first).
ASKING_TOOLS = ["write_file", "read_file", "shell_command"]


def spec(model: str = "scripted:unused", **fields: Any) -> AgentSpec:
    """An AgentSpec for a test: a lost worker is noticed within 5 s (heartbeat)
    and every call is allowed, unless ``fields`` say otherwise (approval tests
    pass ``default_permission="auto"``)."""
    fields.setdefault("heartbeat_timeout_seconds", 5)
    fields.setdefault("default_permission", "allow")
    return AgentSpec(model=model, **fields)


def echo_results(request: ModelRequest) -> ModelResponse:
    """A final scripted step that repeats what the tools answered:
    ``name:content``, ``name:ERR content`` for an error, joined by `` | ``."""
    return reply(" | ".join(f"{r.name}:{'ERR ' if r.is_error else ''}{r.content}" for r in last_tool_results(request)))


def write(path: str, content: str = "x", id: str | None = None) -> Any:
    """A ``write_file`` call for a scripted step."""
    return call("write_file", {"file_path": path, "content": content}, id=id)


def awaiting(n: int = 1) -> Any:
    """A RunState predicate: the run waits for ``n`` approvals."""
    return lambda s: s.status == "awaiting_approval" and len(s.pending_approvals) == n


def recording(answer: Any) -> tuple[str, list[ModelRequest]]:
    """A scripted model (one function for every step) that keeps every request
    it gets, and answers ``answer`` (a response, or a function of the request)."""
    seen: list[ModelRequest] = []

    def step(request: ModelRequest) -> ModelResponse:
        seen.append(request)
        return answer(request) if callable(answer) else answer

    return script_every_step(step), seen


def user_texts(request: ModelRequest) -> list[str]:
    """The texts of a request's user messages."""
    return [m.text for m in request.messages if m.role == "user"]
