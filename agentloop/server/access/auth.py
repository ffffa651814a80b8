"""Bearer tokens and scopes. A request names its token in the
``Authorization: Bearer`` header, or, on a GET only (an ``EventSource``
cannot set headers), in the ``access_token`` query parameter: a URL is
written to access logs and proxies' logs, so a token that can act is never
taken from one on a request that acts."""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from fastapi import Request

from agentloop.server.problems import Problem
from agentloop.server.settings import ApiToken, Scope, ServerSettings

#: The caller's name when no token is configured (the server then listens on 127.0.0.1 only).
LOCAL_CALLER = "local"


@dataclass(frozen=True)
class Caller:
    """Who made a request: the token's name, or ``local``, the
    registered agents it may start (None: any), and the tenant of the runs
    it starts (None: whichever it names)."""

    name: str
    scope: Scope
    agents: tuple[str, ...] | None = None
    tenant: str | None = None


def _presented(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    if header:
        kind, _, value = header.partition(" ")
        if kind.lower() != "bearer" or not value.strip():
            raise Problem(401, "Bad Authorization header",
                          "the Authorization header must be `Bearer <token>`")
        return value.strip()
    if "access_token" in request.query_params and not is_event_stream(request):
        raise Problem(401, "Token in the URL refused", "?access_token= is accepted on GET .../events streams only "
                      "(an EventSource cannot send headers; URLs are logged): send `Authorization: Bearer <token>`")
    return request.query_params.get("access_token")


def is_event_stream(request: Request) -> bool:
    """A GET of a run's Server-Sent Events, the one request an ``EventSource`` makes."""
    return request.method == "GET" and request.url.path.endswith("/events")


def _match(tokens: list[ApiToken], presented: str) -> ApiToken | None:
    found = None
    for token in tokens:  # compare with every token, in constant time each
        if hmac.compare_digest(token.secret.encode(), presented.encode()):
            found = token
    return found


def authorize(settings: ServerSettings, request: Request, needed: Scope) -> Caller:
    """The caller of ``request``, if its token allows ``needed``.

    Raises:
        Problem: 401 without a valid token, 403 with a token of too small a scope.
    """
    if not settings.tokens:
        return Caller(LOCAL_CALLER, "act")
    presented = _presented(request)
    if not presented:
        raise Problem(401, "Token required", "send `Authorization: Bearer <token>` with a token of "
                      "AGENTLOOP_API_TOKENS (or ?access_token= for an EventSource)")
    token = _match(settings.tokens, presented)
    if token is None:
        raise Problem(401, "Unknown token", "the bearer token is not one of AGENTLOOP_API_TOKENS")
    if not token.allows(needed):
        raise Problem(403, "Scope too small", f"token {token.name!r} has scope {token.scope!r}; this "
                      f"request needs {needed!r}")
    return Caller(token.name, token.scope, token.agents, token.tenant)
