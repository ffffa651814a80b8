"""HTTP details shared by the provider error mappers.

Both providers answer throttling with ``retry-after-ms`` or ``retry-after``,
and both SDKs put the API key in request headers that travel with every error
object; this module reads the first and helps keep the second out of messages.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

from agentloop.shared.base.text import cut

#: Request headers that carry a credential, by provider convention
#: (OpenAI and compatibles: Authorization; Anthropic: x-api-key; Azure: api-key).
CREDENTIAL_HEADERS = ("authorization", "x-api-key", "api-key")

# Key-shaped tokens (sk-..., sk-proj-..., sk-ant-...), including the masked form
# ("sk-proj-****abcd") that OpenAI echoes in its 401 message.
_KEY_LIKE = re.compile(r"\b(sk-(?:ant-|proj-|svcacct-|admin-)?)[A-Za-z0-9_\-*]{8,}")

# Shorter values are too likely to occur in ordinary text to be replaced safely.
_MIN_SECRET_LENGTH = 6


def retry_after_delay(
    headers: Mapping[str, str] | None, *, now: datetime | None = None
) -> timedelta | None:
    """The delay a server asked for before the next attempt, if it asked.

    Reads ``retry-after-ms`` (milliseconds, which OpenAI and Anthropic send),
    then the standard ``retry-after`` as seconds or as an HTTP date.

    Args:
        headers: Response headers (any mapping; names are matched case-insensitively).
        now: The current time, for HTTP-date values; the system clock when None.

    Returns:
        The positive delay, or None when no header gives one (absent, malformed,
        or a date already past), so the retry policy's own backoff applies.
    """
    if not headers:
        return None
    lowered = {name.lower(): value for name, value in headers.items()}

    milliseconds = _positive_float(lowered.get("retry-after-ms"))
    if milliseconds is not None:
        return timedelta(milliseconds=milliseconds)

    value = lowered.get("retry-after")
    if value is None:
        return None
    seconds = _positive_float(value)
    if seconds is not None:
        return timedelta(seconds=seconds)
    try:
        when = parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        # RFC 9110 dates are GMT; a zone-less parse means the zone was omitted.
        when = when.replace(tzinfo=UTC)
    delay = when - (now or datetime.now(UTC))
    return delay if delay > timedelta(0) else None


def _positive_float(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    if not math.isfinite(number) or number <= 0:
        return None
    return number


def credential_values(headers: Mapping[str, str] | None) -> list[str]:
    """The secret values carried by a request's credential headers.

    Args:
        headers: Request headers (names matched case-insensitively).

    Returns:
        The values of ``Authorization`` (without its scheme), ``x-api-key`` and
        ``api-key``, for :func:`redact`.
    """
    if not headers:
        return []
    secrets: list[str] = []
    for name, value in headers.items():
        if name.lower() not in CREDENTIAL_HEADERS or not value:
            continue
        scheme, _, token = value.partition(" ")
        secrets.append(token.strip() if token else scheme.strip())
    return [s for s in secrets if len(s) >= _MIN_SECRET_LENGTH]


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with the given secrets and any key-shaped tokens masked.

    Args:
        text: A message that may echo a credential (providers do, in 401 errors).
        secrets: Exact values to mask, e.g. from :func:`credential_values`.

    Returns:
        The text with each secret replaced by ``[redacted]`` and each
        ``sk-...`` token shortened to its prefix.
    """
    for secret in secrets:
        if len(secret) >= _MIN_SECRET_LENGTH:
            text = text.replace(secret, "[redacted]")
    return _KEY_LIKE.sub(lambda m: f"{m.group(1)}[redacted]", text)


def error_body_message(body: object, *, limit: int = 1000) -> str | None:
    """The human-readable message of an error response body, if it has one.

    Understands OpenAI's ``{"error": {"message": ...}}`` (or just the inner
    object, which the OpenAI SDK keeps), Anthropic's ``{"type": "error",
    "error": {...}}``, ``{"detail": ...}`` from FastAPI-based servers, and
    plain text from proxies.

    Args:
        body: The decoded body an SDK error carries.
        limit: Longest message returned; longer ones (HTML error pages) are cut.

    Returns:
        The message, or None when the body has none.
    """
    message = _find_message(body, depth=0)
    if message is None:
        return None
    message = message.strip()
    if not message:
        return None
    return cut(message, limit)


def _find_message(body: object, *, depth: int) -> str | None:
    if isinstance(body, str):
        return body
    if not isinstance(body, Mapping) or depth > 3:
        return None
    for key in ("message", "detail", "error"):
        found = _find_message(body.get(key), depth=depth + 1)
        if found:
            return found
    return None


def display_url(url: object) -> str:
    """A URL safe to show in an error: no user-info, no query string (either
    may carry credentials behind some proxies)."""
    parts = urlsplit(str(url))
    host = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{host}{parts.path}"
