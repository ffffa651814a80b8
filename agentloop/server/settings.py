"""What ``agentloop serve`` is configured with: tokens, CORS origins, and the
agents AG-UI clients may start by name. Read from the environment and the
command line; never from a request."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from agentloop.shared.base.contracts import LIVE_TOKEN_ENV
from agentloop.shared.base.errors import UserError
from agentloop.shared.base.priority import tenant_problem
from agentloop.shared.definition.spec import AgentSpec
from agentloop.shared.live.secret import live_secret
from agentloop.shared.live.sinks import live_off

#: ``read``: follow runs, list them, read reports. ``act``: also start,
#: approve, submit outputs, stop, cancel and send messages. ``admin``: also
#: set tenants' quotas.
Scope = Literal["read", "act", "admin"]
SCOPES: tuple[Scope, ...] = ("read", "act", "admin")

TOKENS_ENV = "AGENTLOOP_API_TOKENS"
CORS_ENV = "AGENTLOOP_CORS_ORIGINS"
HOSTS_ENV = "AGENTLOOP_ALLOWED_HOSTS"
#: "1" (or "true"): a run's one reader waits in the workflow instead of polling.
WAIT_ENV = "AGENTLOOP_WAIT_FOR_EVENTS"


@dataclass(frozen=True)
class ApiToken:
    """One bearer token: its name (recorded as a decision's ``by``), its
    scope, the secret a caller sends, the registered agents it may
    start (None: any), and the tenant every run it starts belongs to (None:
    the caller may name one, or none; docs/many-tenants.md)."""

    name: str
    scope: Scope
    secret: str = field(repr=False)
    agents: tuple[str, ...] | None = None
    tenant: str | None = None

    def allows(self, needed: Scope) -> bool:
        return self.scope == "admin" or (self.scope == "act" and needed != "admin") or needed == "read"


#: How a token's entry names the agents it may start: ``name:act:secret:agents=a|b``.
AGENTS_SUFFIX = ":agents="
#: How a token's entry names its tenant: ``name:act:secret:tenant=acme``.
TENANT_SUFFIX = ":tenant="


def _split_options(entry: str) -> tuple[str, dict[str, str]]:
    """``name:scope:secret`` and the ``:agents=`` and ``:tenant=`` options
    after it, in either order."""
    options: dict[str, str] = {}
    for _ in range(2):
        found = [(entry.rfind(suffix), suffix) for suffix in (AGENTS_SUFFIX, TENANT_SUFFIX)
                 if suffix not in options and suffix in entry]
        if not found:
            break
        at, suffix = max(found)
        entry, options[suffix] = entry[:at], entry[at + len(suffix):]
    return entry, options


def parse_tokens(text: str | None) -> list[ApiToken]:
    """``name:scope:secret`` entries, comma-separated (``AGENTLOOP_API_TOKENS``);
    ``name:scope:secret:agents=a|b`` limits a token to starting agents ``a`` and ``b``;
    ``name:scope:secret:tenant=acme`` makes every run it starts tenant
    ``acme``'s (both may be given).

    Raises:
        UserError: An entry is not ``name:scope:secret``, a scope is unknown,
            or a name or secret repeats.
    """
    tokens: list[ApiToken] = []
    for number, entry in enumerate(filter(None, (e.strip() for e in (text or "").split(","))), 1):
        agents: tuple[str, ...] | None = None
        entry, options = _split_options(entry)
        tenant = options.get(TENANT_SUFFIX)
        if tenant is not None and (problem := tenant_problem(tenant.strip())):
            raise UserError(f"{TOKENS_ENV}: entry {number} has tenant={tenant[:80]!r}: {problem}")
        if (listed := options.get(AGENTS_SUFFIX)) is not None:
            agents = tuple(a.strip() for a in listed.split("|") if a.strip())
            if not agents:
                raise UserError(f"{TOKENS_ENV}: entry {number} has an empty agents= list; name the agents the "
                                "token may start, e.g. ops:act:s3cret...:agents=triage|digest")
        parts = entry.split(":", 2)
        if len(parts) != 3 or not all(parts):
            raise UserError(f"{TOKENS_ENV}: entry {number} is not name:scope:secret (e.g. "
                            "ops:act:s3cret,dashboard:read:an0ther)")
        name, scope, secret = parts
        if scope not in SCOPES:
            raise UserError(f"{TOKENS_ENV}: token {name!r} has scope {scope!r}; a scope is read, act or admin")
        if len(secret) < 16:
            raise UserError(f"{TOKENS_ENV}: token {name!r} is {len(secret)} characters; use at least 16 "
                            "(e.g. python -c 'import secrets; print(secrets.token_urlsafe(24))')")
        tokens.append(ApiToken(name, scope, secret, agents, tenant.strip() if tenant is not None else None))
    for what, values in (("name", [t.name for t in tokens]), ("secret", [t.secret for t in tokens])):
        if len(set(values)) != len(values):
            raise UserError(f"{TOKENS_ENV}: two tokens have the same {what}; each token needs its own")
    return tokens


@dataclass
class ServerSettings:
    """Everything ``create_app`` needs besides the Temporal client.

    Attributes:
        tokens: Bearer tokens; none means no authentication (then the server
            must listen on 127.0.0.1 only).
        cors_origins: Origins allowed by CORS (``*`` for any).
        agents: Specs AG-UI clients and ``POST /v1/runs`` may name, by name.
        registered_only: ``POST /v1/runs`` starts only the agents above (a
            body's inline spec is refused). None: refused when tokens are
            configured, accepted on the token-less local server
            (:attr:`inline_specs`).
        allowed_hosts: ``Host`` names accepted besides loopback (``--allowed-host``).
        port: The port the server listens on (the Host check's port); None: any.
        max_body_bytes: The largest request body accepted (413 above it).
        max_payload_bytes: Temporal's payload size limit: an approval or tool
            output whose encoded size is over 90% of it is refused with 413.
        max_streams: SSE streams open at once, in all.
        max_streams_per_caller: SSE streams open at once per token (or for the
            token-less local caller).
        heartbeat_seconds: Idle time after which an SSE stream sends a comment.
        poll_interval: How often a run's one reader asks its workflow for new events.
        wait_for_events: Whether a run's one reader, caught up, waits in the
            workflow (the long-poll update) instead of polling: events sooner,
            but each wait is two history events and a workflow task.
        temporal_ui: The Temporal UI's base URL, for links from the console.
        default_workspace: The workspace of runs whose spec names none, when
            the server knows the worker that runs them (its own embedded
            worker's, or the running ``agentloop dev``'s); None otherwise.
    """

    tokens: list[ApiToken] = field(default_factory=list)
    cors_origins: list[str] = field(default_factory=list)
    agents: dict[str, AgentSpec] = field(default_factory=dict)
    registered_only: bool | None = None
    allowed_hosts: list[str] = field(default_factory=list)
    port: int | None = None
    max_body_bytes: int = 2 * 1024 * 1024
    max_payload_bytes: int = 2 * 1024 * 1024
    max_streams: int = 1000
    max_streams_per_caller: int = 500
    heartbeat_seconds: float = 15.0
    poll_interval: float = 0.05
    wait_for_events: bool = False
    temporal_ui: str | None = None
    default_workspace: str | None = None
    #: The secret workers post live deltas with (``AGENTLOOP_LIVE_TOKEN``;
    #: docs/events.md); None: live deltas are off.
    live_token: str | None = field(default=None, repr=False)
    #: Whether a worker of this process hands its live deltas to this
    #: server in memory (embedded ``agentloop serve``; docs/live-deltas.md).
    live_in_process: bool = False

    def __post_init__(self) -> None:
        if self.live_token is not None and any(t.secret == self.live_token for t in self.tokens):
            raise UserError(f"{LIVE_TOKEN_ENV} must not be one of {TOKENS_ENV}: the live token may only post "
                            "deltas, and an API token must not post them; generate a secret of its own")

    @property
    def inline_specs(self) -> bool:
        """Whether ``POST /v1/runs`` may carry a whole spec: by default only
        on the token-less local server."""
        return not self.tokens if self.registered_only is None else not self.registered_only

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **fields: object) -> ServerSettings:
        """Tokens from ``AGENTLOOP_API_TOKENS``, CORS origins from
        ``AGENTLOOP_CORS_ORIGINS`` and host names from
        ``AGENTLOOP_ALLOWED_HOSTS`` (comma-separated), waiting for events
        from ``AGENTLOOP_WAIT_FOR_EVENTS`` ("1"); ``fields`` set the rest."""
        env = os.environ if environ is None else environ
        fields.setdefault("wait_for_events", env.get(WAIT_ENV, "").strip().lower() in ("1", "true", "yes"))
        fields.setdefault("live_token", None if live_off(env) else live_secret(env))
        return cls(
            tokens=parse_tokens(env.get(TOKENS_ENV)),
            cors_origins=[o.strip() for o in env.get(CORS_ENV, "").split(",") if o.strip()],
            allowed_hosts=[h.strip() for h in env.get(HOSTS_ENV, "").split(",") if h.strip()],
            **fields,  # type: ignore[arg-type]
        )
