"""Scripted models for tests: each registered under a fresh name."""

from __future__ import annotations

import uuid
from typing import Any

from agentloop import register_scripted_model


def script(*steps: Any) -> str:
    """Register one entry per step (responses, functions of the request, or
    exceptions) and return the model string, ``scripted:<fresh name>``."""
    name = f"t{uuid.uuid4().hex[:10]}"
    register_scripted_model(name, list(steps))
    return f"scripted:{name}"


def script_every_step(answer: Any) -> str:
    """Register a function that answers every step; return the model string."""
    name = f"t{uuid.uuid4().hex[:10]}"
    register_scripted_model(name, answer)
    return f"scripted:{name}"
