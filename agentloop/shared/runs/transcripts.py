"""The conversation by reference: how the LLM activity gets the transcript
without carrying it in its input.

Each message enters Temporal history once (the run's input, an LLM step's
result, a tool call's result). The LLM activity's input names the
transcript by length and a chained hash; the worker keeps the transcripts of
recent runs in memory, fetches only what it lacks with the run's
``transcript`` query, and checks the hash, so any worker, a restarted one
included, serves any step. Pure code: the workflow computes the same hashes.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, Field

from agentloop.shared.base.messages import Message
from agentloop.shared.definition.activity_io import ToolDefinition, TranscriptRef

__all__ = [
    "EMPTY_HASH",
    "ModelContext",
    "TranscriptPage",
    "TranscriptRange",
    "TranscriptRef",
    "as_range",
    "chain_hash",
    "chain_hash_and_size",
    "context_hash",
    "page",
    "transcript_hashes",
]

#: The hash of an empty transcript.
EMPTY_HASH = hashlib.sha256(b"agentloop-transcript").hexdigest()[:32]


def chain_hash(previous: str, message: Message) -> str:
    """The transcript hash after appending ``message`` to a transcript whose
    hash is ``previous``."""
    return chain_hash_and_size(previous, message)[0]


def chain_hash_and_size(previous: str, message: Message) -> tuple[str, int]:
    """:func:`chain_hash`, and the message's size as JSON (bytes), from one
    serialisation."""
    data = message.model_dump_json().encode()
    return hashlib.sha256(previous.encode() + data).hexdigest()[:32], len(data)


def transcript_hashes(messages: list[Message], start: str = EMPTY_HASH) -> list[str]:
    """The hash after each message, in order."""
    hashes, current = [], start
    for message in messages:
        current = chain_hash(current, message)
        hashes.append(current)
    return hashes


def context_hash(system_prompt: str, tools: list[ToolDefinition]) -> str:
    """The hash of what every step of a run shares: system prompt and tools."""
    body = json.dumps([system_prompt, [t.model_dump(mode="json") for t in tools]], sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()[:32]


class TranscriptRange(BaseModel):
    """Query ``transcript``'s argument: messages from ``start``, at most
    ``max_bytes`` of them (at least one)."""

    start: int = 0
    max_bytes: int = 1_000_000


class TranscriptPage(BaseModel):
    """Query ``transcript``'s answer.

    Attributes:
        messages: Messages from ``start`` on.
        total: Messages in the whole transcript.
        transcript_hash: The hash after the whole transcript.
    """

    messages: list[Message] = Field(default_factory=list)
    total: int = 0
    transcript_hash: str = EMPTY_HASH


class ModelContext(BaseModel):
    """Query ``model_context``'s answer: what every step shares."""

    system_prompt: str = ""
    tools: list[ToolDefinition] = Field(default_factory=list)
    context_hash: str = ""


def page(messages: list[Message], hashes: list[str], request: TranscriptRange) -> TranscriptPage:
    """Answer a ``transcript`` query from a run's state."""
    chosen: list[Message] = []
    size = 0
    for message in messages[request.start :]:
        encoded = len(message.model_dump_json())
        if chosen and size + encoded > request.max_bytes:
            break
        chosen.append(message)
        size += encoded
    return TranscriptPage(
        messages=chosen, total=len(messages), transcript_hash=hashes[-1] if hashes else EMPTY_HASH
    )


def as_range(value: Any) -> TranscriptRange:
    """The query's argument, from a model or the JSON an operator typed."""
    if isinstance(value, TranscriptRange):
        return value
    return TranscriptRange.model_validate(value or {})
