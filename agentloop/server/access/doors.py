"""Who may knock: the checks every request to ``agentloop serve`` and
``agentloop codec-server`` passes before any handler runs.

A browser page on another site can reach a server on 127.0.0.1: by DNS
rebinding (its own host name resolving to 127.0.0.1, so the request's
``Host`` is that name), or by sending a request a browser sends without a
CORS preflight (a form, or ``text/plain``). So, before any handler runs:

* **Host.** Without tokens, the ``Host`` header must be the address the
  server listens on (``127.0.0.1``, ``localhost`` or ``[::1]`` with its
  port) or a name given with ``--allowed-host``. With tokens, the same check
  applies once ``--allowed-host`` is given.
* **Origin.** A state-changing request (any method but GET, HEAD and
  OPTIONS) whose ``Origin`` is present must come from the server's own
  origin or a configured CORS origin.
* **Content type.** Every POST is ``Content-Type: application/json``, empty
  bodies included: a browser preflights that, so no cross-site request
  reaches a handler unasked.
* **Size.** A body over the cap is refused with 413 as soon as its length
  is known (``Content-Length``) or its bytes pass the cap, never read whole.

The decisions are pure functions (:func:`refusal`); :class:`DoorGuard` is the
ASGI middleware that applies them.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any

from starlette.exceptions import HTTPException

from agentloop.server.problems import PROBLEM_JSON

Scope_ = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope_, Receive, Send], Awaitable[None]]

#: The names a server on loopback answers to without ``--allowed-host``.
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
#: Methods that change nothing: no Origin or content-type check.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: The default cap on a request body (``--max-body-bytes``).
DEFAULT_MAX_BODY_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True)
class Doors:
    """What the checks allow.

    Attributes:
        hosts: ``Host`` header names accepted (lower case, IPv6 in brackets),
            or None for any (a server with tokens and no ``--allowed-host``).
        port: The port the server listens on; None accepts any port.
        origins: Origins allowed besides the server's own (``*``: any).
        max_body_bytes: The largest request body accepted.
        json_posts: Whether every POST must be ``application/json``.
        how_to_allow: What a refused caller's operator should set, named in the 403.
    """

    hosts: frozenset[str] | None
    port: int | None = None
    origins: frozenset[str] = frozenset()
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    json_posts: bool = True
    how_to_allow: str = "--allowed-host NAME (or AGENTLOOP_ALLOWED_HOSTS)"

    def accepted_hosts(self) -> list[str]:
        """The ``Host`` values accepted, as the start line prints them."""
        if self.hosts is None:
            return ["any"]
        return [f"{h}:{self.port}" if self.port else h for h in sorted(self.hosts)]


def doors_for(*, tokens: bool, allowed_hosts: Iterable[str], cors_origins: Iterable[str], port: int | None,
              max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> Doors:
    """The checks for a server: loopback names plus ``allowed_hosts``
    without tokens; only ``allowed_hosts`` (or any, when none) with tokens."""
    named = {_bracketed(h.strip().lower()) for h in allowed_hosts if h.strip()}
    if tokens:
        hosts = frozenset(named | set(LOOPBACK_NAMES)) if named else None
    else:
        hosts = frozenset(named | set(LOOPBACK_NAMES))
    return Doors(hosts=hosts, port=port, origins=frozenset(o.rstrip("/") for o in cors_origins),
                 max_body_bytes=max_body_bytes)


@dataclass(frozen=True)
class Refusal:
    """A request the doors refuse: its status, title and sentence."""

    status: int
    title: str
    detail: str


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def split_host(value: str) -> tuple[str, int | None]:
    """``name[:port]`` of a ``Host`` header, the name lower case (IPv6 kept in brackets)."""
    value = value.strip().lower()
    if value.startswith("["):
        name, _, rest = value.partition("]")
        name += "]"
        port_text = rest[1:] if rest.startswith(":") else ""
    else:
        name, _, port_text = value.partition(":")
    try:
        port = int(port_text) if port_text else None
    except ValueError:
        port = -1
    return name, port


def host_refusal(doors: Doors, host: str | None) -> Refusal | None:
    """Why ``Host`` is refused, or None."""
    if doors.hosts is None:
        return None
    name, port = split_host(host or "")
    if name in doors.hosts and (doors.port is None or port in (doors.port, None if doors.port == 80 else -2)):
        return None
    shown = (host or "(none)")[:100]
    return Refusal(403, "Host not allowed", f"this server answers to {', '.join(doors.accepted_hosts())}, not "
                   f"Host {shown!r}; to serve another name (behind a proxy, say), start it with {doors.how_to_allow}")


def origin_refusal(doors: Doors, method: str, origin: str | None, host: str | None) -> Refusal | None:
    """Why a state-changing request's ``Origin`` is refused, or None."""
    if method in SAFE_METHODS or origin is None:
        return None
    origin = origin.rstrip("/").lower()
    own = {f"http://{(host or '').lower()}", f"https://{(host or '').lower()}"}
    if origin in own or origin in {o.lower() for o in doors.origins} or "*" in doors.origins:
        return None
    return Refusal(403, "Origin not allowed", f"a {method} from origin {origin[:100]!r} is refused: only this "
                   "server's own pages and its CORS origins (--cors-origin, AGENTLOOP_CORS_ORIGINS) may change "
                   "anything")


def content_type_refusal(doors: Doors, method: str, content_type: str | None) -> Refusal | None:
    """Why a POST's content type is refused, or None."""
    if method != "POST" or not doors.json_posts:
        return None
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media == "application/json":
        return None
    return Refusal(415, "JSON required", f"every POST must be sent as Content-Type: application/json (this one was "
                   f"{media[:60] or 'sent without one'!r}), an empty body included: send {{}} or nothing with "
                   "that header")


def size_refusal(doors: Doors, length: int | None) -> Refusal | None:
    """Why a body of ``length`` bytes is refused, or None."""
    if length is None or length <= doors.max_body_bytes:
        return None
    return Refusal(413, "Body too large", f"the request body is {length} bytes; this server accepts at most "
                   f"{doors.max_body_bytes} (--max-body-bytes)")


def refusal(doors: Doors, method: str, headers: dict[str, str]) -> Refusal | None:
    """The first check a request fails, in order: host, origin, content type, size."""
    length_text = headers.get("content-length")
    try:
        length = int(length_text) if length_text is not None else None
    except ValueError:
        return Refusal(400, "Bad Content-Length", "the Content-Length header is not a number")
    return (host_refusal(doors, headers.get("host"))
            or origin_refusal(doors, method, headers.get("origin"), headers.get("host"))
            or content_type_refusal(doors, method, headers.get("content-type"))
            or size_refusal(doors, length))


class BodyTooLarge(HTTPException):
    """A body without a ``Content-Length`` that passed the cap while being
    read (an HTTPException, so the app answers it as a 413 problem)."""

    def __init__(self, cap: int) -> None:
        super().__init__(413, f"the request body is over {cap} bytes, the most this server accepts "
                         "(--max-body-bytes)")


class DoorGuard:
    """ASGI middleware applying :func:`refusal` to every HTTP request, and
    the size cap to bodies sent without a ``Content-Length``."""

    def __init__(self, app: App, doors: Callable[[], Doors]) -> None:
        self.app, self.doors = app, doors

    async def __call__(self, scope: Scope_, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        doors = self.doors()
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        refused = refusal(doors, scope.get("method", "GET"), headers)
        if refused is not None:
            await _answer(refused, scope, send)
            return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > doors.max_body_bytes:
                    raise BodyTooLarge(doors.max_body_bytes)
            return message

        await self.app(scope, counted, send)


async def _answer(refused: Refusal, scope: Scope_, send: Send) -> None:
    body = json.dumps({"type": "about:blank", "title": refused.title, "status": refused.status,
                       "detail": refused.detail, "instance": scope.get("path")}).encode()
    await send({"type": "http.response.start", "status": refused.status,
                "headers": [(b"content-type", PROBLEM_JSON.encode()), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})
