"""``agentloop codec-server``: Temporal's remote codec endpoint over the
payload encryption keys (``AGENTLOOP_ENCRYPTION_KEYS``), for the Temporal UI
and ``temporal workflow show --codec-endpoint`` (docs/security.md)."""

from __future__ import annotations

import argparse
import importlib
from typing import Any

from agentloop.cli.common import say
from agentloop.cli.options import allowed_hosts, listen_host, port_number
from agentloop.cli.servers.serve import checked_host, listening_socket, say_doors, serve_until_cancelled
from agentloop.shared.base.errors import UserError


def load_codec(reference: str | None) -> Any:
    """``--codec package.module:NAME`` (a ``PayloadCodec``, its class, or a
    function of no arguments returning one); the environment's ``EncryptionCodec`` when None.

    Raises:
        UserError: It cannot be imported or is not a codec; no key is set.
    """
    from temporalio.converter import PayloadCodec

    from agentloop.shared.base.encryption import KEY_FILE_ENV, KEYS_ENV, codec_from_env

    if reference is None:
        codec = codec_from_env()
        if codec is None:
            raise UserError(f"no encryption key: set {KEYS_ENV}=keyid:base64key,... (or {KEY_FILE_ENV}) as the "
                            "workers have it, or name your own codec with --codec package.module:NAME")
        return codec
    module_name, sep, attribute = reference.partition(":")
    if not sep or not module_name or not attribute:
        raise UserError(f"--codec {reference}: give package.module:NAME")
    try:
        found = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as err:
        raise UserError(f"--codec {reference}: cannot import it ({err})") from None
    codec = found
    if not isinstance(found, PayloadCodec) and callable(found):
        try:
            codec = found()
        except Exception as err:  # noqa: BLE001 - the user's code: say what it raised
            raise UserError(f"--codec {reference}: calling it raised {type(err).__name__}: {err}; give a "
                            "PayloadCodec, its class, or a function of no arguments that returns one") from None
    if not isinstance(codec, PayloadCodec):
        raise UserError(f"--codec {reference} is a {type(codec).__name__}, not a temporalio.converter.PayloadCodec")
    return codec


async def cmd_codec_server(args: argparse.Namespace) -> int:
    import uvicorn

    from agentloop.server.codec import DEFAULT_UI_ORIGINS, codec_doors, create_codec_app
    from agentloop.server.settings import ServerSettings

    codec = load_codec(args.codec)
    settings = ServerSettings.from_env()
    settings.cors_origins += args.cors_origin
    settings.allowed_hosts += args.allowed_host
    host = checked_host(settings, args.host, "the codec server")
    sock = listening_socket(host, args.port)
    settings.port = sock.getsockname()[1]
    app = create_codec_app(codec, settings)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=3))
    shown = f"[{host}]" if ":" in host else host
    say(f"agentloop codec-server: http://{shown}:{settings.port} ({codec!r}); CORS origins: "
        f"{', '.join(settings.cors_origins or DEFAULT_UI_ORIGINS)}")
    say_doors(codec_doors(settings))
    if settings.tokens:
        say("tokens: decode needs scope read, encode needs act: "
            + ", ".join(f"{t.name} ({t.scope})" for t in settings.tokens))
    else:
        say("no API token configured (AGENTLOOP_API_TOKENS): listening on 127.0.0.1 only, every caller may decode")
    await serve_until_cancelled(server, [sock])
    return 0


def add_codec_server_parser(sub: Any) -> None:
    """The ``codec-server`` command and its options."""
    codec = sub.add_parser(
        "codec-server", help="decrypt payloads for the Temporal UI and `temporal workflow show --codec-endpoint`",
        description="Serve Temporal's remote codec endpoint (POST /decode, POST /encode) with the payload "
                    "encryption keys of AGENTLOOP_ENCRYPTION_KEYS (or AGENTLOOP_ENCRYPTION_KEY_FILE). Bearer "
                    "tokens come from AGENTLOOP_API_TOKENS (decode needs scope read, encode act); with none, it "
                    "listens on 127.0.0.1 only.",
    )
    listen_host(codec)
    codec.add_argument("--port", type=port_number, default=8081, help="the HTTP port (default: 8081)")
    codec.add_argument("--cors-origin", action="append", default=[], metavar="ORIGIN",
                       help="the Temporal UI's origin (also $AGENTLOOP_CORS_ORIGINS; default: "
                            "http://localhost:8233 and http://127.0.0.1:8233); repeatable")
    allowed_hosts(codec)
    codec.add_argument("--codec", metavar="MODULE:NAME",
                       help="your own PayloadCodec (or a function returning one) instead of the environment's keys")
