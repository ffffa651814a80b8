"""Wording shared by the providers' error mapping (OpenAI, Anthropic)."""

from __future__ import annotations

import asyncio

from agentloop.activities.attempts import retry_note

__all__ = ["retry_note", "transport_reason"]


def transport_reason(exc: BaseException) -> str:
    """What went wrong, as ``Type: message``, even when ``exc`` has no text.

    Transport errors often carry their reason only deep in their cause chain:
    a connection reset mid-stream is an httpx ``ReadError`` with an empty
    message, raised from httpcore's (empty), from anyio's
    ``BrokenResourceError`` (empty), from ``ConnectionResetError: [Errno 104]
    Connection reset by peer``. The first message along ``__cause__`` (or
    ``__context__``) is used: ``"ReadError: ConnectionResetError: [Errno 104]
    Connection reset by peer"``; just the type's name when none has one.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = str(current).strip()
        # A cancel scope's own message ("Cancelled via cancel scope ...") says
        # nothing about the failure that triggered it.
        if text and not isinstance(current, asyncio.CancelledError):
            if current is exc:
                return f"{type(exc).__name__}: {text}"
            return f"{type(exc).__name__}: {type(current).__name__}: {text}"
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return type(exc).__name__
