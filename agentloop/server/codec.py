"""``agentloop codec-server``: Temporal's remote codec endpoint, so the
Temporal UI and ``temporal workflow show --codec-endpoint`` show encrypted
payloads in plaintext to those who hold the keys (docs/security.md).

``POST /decode`` and ``POST /encode`` take and answer Temporal's JSON form of
``Payloads`` (``{"payloads": [{"metadata": {"encoding": "<base64>"}, "data":
"<base64>"}]}``); the ``X-Namespace`` header the UI and CLI send is accepted
and not needed (one codec server holds one set of keys). Bearer tokens are the
HTTP API's (``AGENTLOOP_API_TOKENS``): decoding needs scope ``read``, encoding
``act`` (an encoded payload can be signalled into a run). With no token
configured, ``agentloop codec-server`` listens on 127.0.0.1 only, which is
what the Temporal UI needs anyway: the browser calls the codec server, not
the UI's server.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads
from temporalio.converter import PayloadCodec

from agentloop.server import problems
from agentloop.server.access.auth import authorize
from agentloop.server.access.doors import DoorGuard, Doors, doors_for
from agentloop.server.problems import Problem
from agentloop.server.settings import Scope, ServerSettings
from agentloop.shared.base.errors import AgentLoopError

#: The Temporal UI's origins when none is configured: the one ``agentloop
#: dev`` and ``temporal server start-dev`` serve (port 8233).
DEFAULT_UI_ORIGINS = ["http://localhost:8233", "http://127.0.0.1:8233"]

#: Largest body accepted (the UI sends a history page's payloads at once).
MAX_BODY_BYTES = 64 * 1024 * 1024


def create_codec_app(codec: PayloadCodec, settings: ServerSettings | None = None) -> FastAPI:
    """The codec server's app.

    Args:
        codec: Encodes and decodes (an ``EncryptionCodec``, or your own).
        settings: Tokens and CORS origins; from the environment when None
            (``AGENTLOOP_API_TOKENS``, ``AGENTLOOP_CORS_ORIGINS``), with
            :data:`DEFAULT_UI_ORIGINS` when no origin is set.
    """
    settings = settings or ServerSettings.from_env()
    origins = settings.cors_origins or DEFAULT_UI_ORIGINS
    app = FastAPI(title="agentloop codec server", docs_url=None, redoc_url=None, openapi_url=None)
    problems.install(app)
    app.add_middleware(
        CORSMiddleware, allow_origins=origins, allow_methods=["POST", "OPTIONS"],
        allow_headers=["Authorization", "Content-Type", "X-Namespace"], allow_credentials="*" not in origins,
        max_age=600,
    )
    # Outermost: a page that rebinds its name to 127.0.0.1 gets nothing decoded.
    app.add_middleware(DoorGuard, doors=lambda: codec_doors(settings))

    async def answer(request: Request, needed: Scope, decode: bool) -> JSONResponse:
        authorize(settings, request, needed)
        payloads = await _payloads(request)
        try:
            done = await (codec.decode(payloads.payloads) if decode else codec.encode(payloads.payloads))
        except AgentLoopError as err:
            raise Problem(400, "Cannot decode" if decode else "Cannot encode", str(err)) from None
        body = json_format.MessageToDict(Payloads(payloads=done))
        return JSONResponse(body if body else {"payloads": []})

    @app.post("/decode")
    async def decode(request: Request) -> JSONResponse:
        return await answer(request, "read", decode=True)

    @app.post("/encode")
    async def encode(request: Request) -> JSONResponse:
        return await answer(request, "act", decode=False)

    return app


def codec_doors(settings: ServerSettings) -> Doors:
    """The codec server's host, origin, content-type and size checks: its
    CORS origins (the UI's by default) are the origins allowed."""
    return doors_for(tokens=bool(settings.tokens), allowed_hosts=settings.allowed_hosts,
                     cors_origins=settings.cors_origins or DEFAULT_UI_ORIGINS, port=settings.port,
                     max_body_bytes=MAX_BODY_BYTES)


async def _payloads(request: Request) -> Payloads:
    body = await request.body()
    if len(body) > MAX_BODY_BYTES:
        raise Problem(413, "Body too large", f"the body is {len(body)} bytes; at most {MAX_BODY_BYTES} are accepted")
    payloads = Payloads()
    try:
        json_format.Parse(body or b"{}", payloads, ignore_unknown_fields=True)
    except json_format.ParseError as err:
        raise Problem(400, "Not Payloads", "the body must be Temporal's JSON Payloads, "
                      '{"payloads": [{"metadata": {...}, "data": "<base64>"}]}: ' + str(err)[:200]) from None
    return payloads
