"""``agentloop serve``: the HTTP API, AG-UI streams and the web console
(docs/http-api.md), connected like every command: ``TEMPORAL_ADDRESS`` with
Temporal's environment configuration, else a running ``agentloop dev``, else
the embedded server with a worker in this process."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import logging
import os
import secrets
import socket
from pathlib import Path
from typing import Any

from agentloop.cli.common import say
from agentloop.cli.embedded import command_config, default_workspace, session
from agentloop.cli.options import allowed_hosts, imports, listen_host, port_number, workspace
from agentloop.shared.base.errors import UserError
from agentloop.shared.live.pairing import LIVE_FILE, remove_pairing, write_pairing
from agentloop.shared.live.sinks import live_off

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def load_agent(reference: str) -> Any:
    """An agent spec from a spec file (``.yaml``, ``.yml``, ``.json``) or an
    import path (``package.module:NAME``: an ``AgentSpec``, or a function
    that returns one).

    Raises:
        UserError: The file or attribute does not exist, or is not a spec.
    """
    from agentloop.cli.spec_file import spec_from_file
    from agentloop.shared.definition.spec import AgentSpec

    if ":" in reference and not Path(reference).exists():
        module_name, _, attribute = reference.partition(":")
        try:
            found = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as err:
            raise UserError(f"--agent {reference}: cannot import it ({err}); give a spec file or "
                            "package.module:NAME") from None
        spec = found() if callable(found) and not isinstance(found, AgentSpec) else found
        if not isinstance(spec, AgentSpec):
            raise UserError(f"--agent {reference} is a {type(spec).__name__}, not an AgentSpec")
        return spec
    no_flags = argparse.Namespace(model=None, tool=None, system=None, max_steps=None, max_tokens=None,
                                  rules=None, yes=False)
    return spec_from_file(reference, no_flags, default_model=None, workspace=None)


def registered_agents(references: list[str]) -> dict[str, Any]:
    """``--agent [NAME=]FILE|module:attr`` entries, by name (the spec's own
    name when none is given)."""
    agents: dict[str, Any] = {}
    for reference in references:
        name, sep, source = reference.partition("=")
        if not sep:
            name, source = "", reference
        spec = load_agent(source)
        name = name or spec.name
        if name in agents:
            raise UserError(f"--agent: two agents are named {name!r}; name one with NAME=FILE")
        agents[name] = spec
    return agents


def checked_host(settings: Any, host: str | None, what: str) -> str:
    """The address to listen on (127.0.0.1 by default).

    Raises:
        UserError: Another host without an API token.
    """
    host = host or "127.0.0.1"
    if not settings.tokens and host not in LOOPBACK:
        raise UserError(f"no API token is configured, so {what} listens on 127.0.0.1 only (asked: {host}); "
                        "set AGENTLOOP_API_TOKENS=name:scope:secret,... to serve other hosts")
    return host


def say_doors(doors: Any) -> None:
    """The start line's hosts and origins: exactly what the checks accept."""
    origins = sorted(doors.origins)
    say(f"accepts Host: {', '.join(doors.accepted_hosts())}; changes from Origin: this server's own"
        + (f", {', '.join(origins)}" if origins else " only") + " (docs/security.md)")


async def serve_until_cancelled(server: Any, sockets: list[socket.socket] | None = None) -> None:
    """Run a uvicorn server; a cancelled command (Ctrl-C, SIGTERM) lets it
    finish its requests (its graceful shutdown) first."""
    # The command's own handlers (``run_command``) cancel it on a signal.
    # uvicorn's would take the signal instead and raise it again once it has
    # stopped: that late cancel would land in the cleanup and cut the
    # worker's stop short, leaving its pollers retrying a stopped server.
    server.capture_signals = contextlib.nullcontext
    serving = asyncio.create_task(server.serve(sockets=sockets))
    cancelled = False
    # Shielded: a cancel must not reach uvicorn's task, or it stops without
    # its shutdown (and logs the cancel's traceback). uvicorn takes the signal
    # itself too and raises it again once it has stopped: the loop waits that out.
    while not serving.done():
        try:
            await asyncio.shield(serving)
        except asyncio.CancelledError:
            cancelled = True
            server.should_exit = True
    serving.result()
    if cancelled:
        raise asyncio.CancelledError


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (0: a free port, the one printed).

    Raises:
        UserError: The address is taken or cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        raise UserError(f"cannot listen on {host}:{port} ({err.strerror}); choose another --port "
                        "(0: a free one) or --host") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


async def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from agentloop.client.agent_client import AgentClient
    from agentloop.server import ServerSettings, create_app
    from agentloop.server.app import server_doors

    settings = ServerSettings.from_env(
        agents=registered_agents(args.agent), registered_only=args.registered_only,
        max_body_bytes=args.max_body_bytes, max_payload_bytes=args.max_payload_bytes, max_streams=args.max_streams,
        max_streams_per_caller=args.max_streams_per_token)
    settings.cors_origins += args.cors_origin
    settings.allowed_hosts += args.allowed_host
    host = checked_host(settings, args.host, "the server")
    config, dev = command_config(args.imports)
    embedded = config.address is None
    async with session(config, with_worker=embedded, workspace=args.workspace, command="serve", ui=embedded,
                       ui_port=0) as s:
        client = AgentClient(s.client, task_queue=s.config.task_queue)
        client.eager_start = embedded  # its worker is in this process: the first workflow task comes with the start
        # A running `agentloop dev` wrote its UI's address beside its server's.
        settings.temporal_ui = (args.temporal_ui or os.environ.get("AGENTLOOP_TEMPORAL_UI") or s.ui_url
                                 or (dev.ui_url if dev else None) or settings.temporal_ui)
        if settings.temporal_ui:
            settings.temporal_ui = settings.temporal_ui.rstrip("/")
        # Runs naming no workspace get the default of the worker that runs them, when it is known.
        settings.default_workspace = default_workspace(args.workspace) if embedded else dev.workspace if dev else None
        # The embedded worker hands its live deltas to this process's gateway in memory; dev's worker
        # finds this server through a pairing file with a secret made now (docs/live-deltas.md).
        settings.live_in_process = embedded and not live_off()
        if dev is not None and not live_off():
            settings.live_token = settings.live_token or secrets.token_urlsafe(32)
        app = create_app(client, settings)
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=3))
        sock = listening_socket(host, args.port)
        port = settings.port = sock.getsockname()[1]
        pairing = paired_with_dev(host, port, settings.live_token) if dev is not None and not live_off() else None
        where = f"embedded server {s.config.address}" if embedded else f"Temporal at {s.config.address}"
        shown = f"[{host}]" if ":" in host else host
        say(f"agentloop serve: http://{shown}:{port}/ ({where}, namespace {s.config.namespace!r}, "
            f"task queue {s.config.task_queue!r})")
        if settings.tokens:
            say(f"tokens: {', '.join(f'{t.name} ({t.scope})' for t in settings.tokens)}")
        else:
            say("no API token configured (AGENTLOOP_API_TOKENS): listening on 127.0.0.1 only, every caller may act")
        say_doors(server_doors(settings))
        say("inline specs: " + ("accepted (a request may name any tool and workspace)" if settings.inline_specs else
                                "refused, registered agents only (--allow-inline-specs to accept them)"))
        if settings.agents:
            say(f"agents: {', '.join(sorted(settings.agents))}")
        say_live(settings, pairing)
        try:
            await serve_until_cancelled(server, [sock])
        except asyncio.CancelledError:
            # Stopping: the embedded worker cancels the activities under way,
            # which the runs record; the SDK's warning with a traceback would
            # only repeat it.
            logging.getLogger("temporalio.activity").setLevel(logging.ERROR)
            raise
        finally:
            if pairing is not None and settings.live_token:
                remove_pairing(pairing, settings.live_token)
    return 0


def paired_with_dev(host: str, port: int, token: str | None) -> Path | None:
    """Write the pairing file dev's worker reads (docs/live-deltas.md): this
    server's loopback URL and live secret, 0600, removed when serve stops."""
    from agentloop.workers.config import agentloop_home

    if not token:
        return None
    reach = {"0.0.0.0": "127.0.0.1", "::": "[::1]", "::1": "[::1]", "localhost": "127.0.0.1"}.get(host, host)
    reach = f"[{reach}]" if ":" in reach and not reach.startswith("[") else reach
    path = agentloop_home() / LIVE_FILE
    try:
        write_pairing(path, f"http://{reach}:{port}", token)
    except OSError as err:
        say(f"live deltas: cannot write {path} ({err.strerror}); dev's worker will not post them here")
        return None
    return path


def say_live(settings: Any, pairing: Path | None) -> None:
    """The start line on live deltas: where they come from, or that they are off."""
    if settings.live_in_process:
        say("live deltas: from the worker of this process, in memory (AGENTLOOP_LIVE=off: off)")
    elif pairing is not None:
        say(f"live deltas: from agentloop dev's worker, paired through {pairing} (AGENTLOOP_LIVE=off: off)")
    elif settings.live_token:
        say("live deltas: from workers that hold AGENTLOOP_LIVE_TOKEN, on POST /internal/live")
    else:
        say("live deltas: off (docs/live-deltas.md)")


#: ``agentloop serve``'s default port: not 8000, which `mkdocs serve` and many dev servers take.
SERVE_PORT = 8420


def add_serve_parser(sub: Any) -> None:
    """The ``serve`` command and its options."""
    serve = sub.add_parser(
        "serve", help="serve the HTTP API, AG-UI streams and the web console",
        description="Serve runs over HTTP: a JSON API under /v1, Server-Sent Events, AG-UI, and a web console "
                    "at /. Bearer tokens come from AGENTLOOP_API_TOKENS (name:scope:secret, comma-separated; "
                    "scope read or act; name:act:secret:agents=a|b limits a token to some agents); with none, "
                    "it listens on 127.0.0.1 only and answers only requests addressed to 127.0.0.1, localhost "
                    "or [::1] (docs/security.md).",
    )
    listen_host(serve)
    serve.add_argument("--port", type=port_number, default=SERVE_PORT,
                       help=f"the HTTP port (default: {SERVE_PORT}, a port of its own beside `mkdocs serve` and "
                            "other dev servers' 8000; 0: a free one, printed)")
    serve.add_argument("--agent", action="append", default=[], metavar="[NAME=]FILE|MODULE:ATTR",
                       help="an agent clients may start by name (AG-UI's /v1/ag-ui/NAME); repeatable")
    specs = serve.add_mutually_exclusive_group()
    specs.add_argument("--registered-only", action="store_true", default=None,
                       help="start only --agent agents (refuse specs sent in request bodies); the default "
                            "when API tokens are configured")
    specs.add_argument("--allow-inline-specs", dest="registered_only", action="store_false",
                       help="with API tokens, still accept whole specs in request bodies (an act token can then "
                            "start any tool in any workspace)")
    allowed_hosts(serve)
    serve.add_argument("--max-body-bytes", type=int, default=2 * 1024 * 1024, metavar="N",
                       help="the largest request body accepted, 413 above it (default: 2 MiB)")
    serve.add_argument("--max-payload-bytes", type=int, default=2 * 1024 * 1024, metavar="N",
                       help="Temporal's payload size limit: an approval or tool output over 90%% of it is refused "
                            "with 413 (default: 2 MiB, the server's default blob size limit)")
    serve.add_argument("--max-streams", type=int, default=1000, metavar="N",
                       help="Server-Sent Events streams open at once, in all (default: 1000); 429 past it")
    serve.add_argument("--max-streams-per-token", type=int, default=500, metavar="N",
                       help="streams open at once per token, or for the token-less local caller (default: 500)")
    serve.add_argument("--cors-origin", action="append", default=[], metavar="ORIGIN",
                       help="a browser origin allowed to call the API (also $AGENTLOOP_CORS_ORIGINS); repeatable")
    serve.add_argument("--temporal-ui", metavar="URL",
                       help="the Temporal UI's address, for the console's links to runs (also $AGENTLOOP_TEMPORAL_UI; "
                            "default: the embedded server's UI, when it runs one)")
    workspace(serve, "default workspace for runs that name none (embedded worker)")
    imports(serve)
