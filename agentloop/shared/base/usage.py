"""Token usage of an LLM call, a step or a run."""

from __future__ import annotations

from pydantic import BaseModel


class Usage(BaseModel):
    """Token usage of one LLM call, a step or a whole run.

    Attributes:
        input_tokens: Prompt tokens, cached ones included.
        output_tokens: Completion tokens.
        cached_input_tokens: Prompt tokens served from the provider's cache.
        requests: LLM requests counted in this total.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    requests: int = 0

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            requests=self.requests + other.requests,
        )

    def __sub__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens - other.input_tokens,
            output_tokens=self.output_tokens - other.output_tokens,
            cached_input_tokens=self.cached_input_tokens - other.cached_input_tokens,
            requests=self.requests - other.requests,
        )
