"""Model settings a spec may set beyond sampling: ``tool_choice`` and
``thinking``, and how each provider's wire format says them.

Pure: the providers (``activities/providers/openai_model.py``,
``activities/providers/anthropic_model.py``) map a request with these helpers, and the
run checks a spec's ``tool_choice`` against its tools with
:func:`tool_choice_problem`.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: ``tool_choice`` values that are not a tool's name.
TOOL_CHOICE_MODES = ("auto", "required", "none")

_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")

#: Anthropic thinking budget for an effort, when the spec gives an effort only.
ANTHROPIC_EFFORT_BUDGETS = {"low": 2048, "medium": 8192, "high": 24576}


class ThinkingConfig(BaseModel):
    """Extended thinking (Anthropic) or reasoning effort (OpenAI).

    Give either; the other provider's setting is derived from it.

    Attributes:
        effort: ``low``, ``medium`` or ``high``: OpenAI's ``reasoning_effort``;
            for Anthropic a budget of 2048, 8192 or 24576 tokens.
        budget_tokens: Anthropic's thinking budget (at least 1024); for
            OpenAI an effort of ``low`` up to 4096 tokens, ``medium`` up to
            16384, ``high`` above.
    """

    model_config = ConfigDict(extra="forbid")

    effort: Literal["low", "medium", "high"] | None = None
    budget_tokens: int | None = Field(default=None, ge=1024)

    @model_validator(mode="after")
    def _one_given(self) -> ThinkingConfig:
        if self.effort is None and self.budget_tokens is None:
            raise ValueError("thinking needs an effort ('low', 'medium', 'high') or budget_tokens (1024 or more)")
        return self

    @property
    def anthropic_budget(self) -> int:
        """The thinking budget Anthropic is sent."""
        if self.budget_tokens is not None:
            return self.budget_tokens
        return ANTHROPIC_EFFORT_BUDGETS[self.effort or "medium"]

    @property
    def openai_effort(self) -> str:
        """The ``reasoning_effort`` OpenAI is sent."""
        if self.effort is not None:
            return self.effort
        budget = self.budget_tokens or 0
        return "low" if budget <= 4096 else "medium" if budget <= 16384 else "high"


def check_tool_choice(value: str) -> str:
    """``value`` if it is a mode or could be a tool's name.

    Raises:
        ValueError: Neither.
    """
    if value in TOOL_CHOICE_MODES or _TOOL_NAME.match(value):
        return value
    raise ValueError(
        f"tool_choice {value[:60]!r} is neither 'auto', 'required', 'none' nor a tool's name "
        "(letters, digits, '_' or '-')"
    )


def tool_choice_problem(choice: str, tool_names: list[str]) -> str | None:
    """Why a run whose model sees ``tool_names`` cannot use ``choice``, or None."""
    if choice in ("auto", "none"):
        return None
    if not tool_names:
        return (f"tool_choice is {choice!r} but the run has no tools for the model to call; add tools or set "
                "tool_choice to 'auto'")
    if choice == "required" or choice in tool_names:
        return None
    return (f"tool_choice names {choice!r}, which is not one of the run's tools ({', '.join(sorted(tool_names))}); "
            "name one of them, or use 'auto', 'required' or 'none'")


def request_tool_choice(choice: str) -> str | None:
    """What a ``ModelRequest`` carries for a spec's ``tool_choice``: None for
    ``auto`` (nothing is sent: the provider's default)."""
    return None if choice == "auto" else choice


def openai_tool_choice(choice: str) -> Any:
    """Chat Completions' ``tool_choice``."""
    if choice in TOOL_CHOICE_MODES:
        return choice
    return {"type": "function", "function": {"name": choice}}


def anthropic_tool_choice(choice: str | None, *, parallel: bool) -> dict[str, Any] | None:
    """The Messages API's ``tool_choice``, or None to send none."""
    if choice is None or choice == "auto":
        body: dict[str, Any] = {"type": "auto"}
    elif choice == "required":
        body = {"type": "any"}
    elif choice == "none":
        return {"type": "none"}
    else:
        body = {"type": "tool", "name": choice}
    if not parallel:
        body["disable_parallel_tool_use"] = True
    elif body == {"type": "auto"}:
        return None
    return body
