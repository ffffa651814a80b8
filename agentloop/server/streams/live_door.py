"""``POST /internal/live``: the door workers post live deltas through.

Only a worker holding the gateway's live secret (``AGENTLOOP_LIVE_TOKEN``,
in the environment of both, compared in constant time) may post, and that
secret opens nothing else: API tokens, ``admin`` included, cannot post here,
and the live secret is not an API token (the server refuses to start when
it equals one). The Host, Origin and content-type checks of every door
apply (``DoorGuard``); the body is capped at :data:`LIVE_MAX_BODY_BYTES`.

The answer says which runs nobody follows on this gateway (the worker then
stops sending theirs for a while): 200 with ``unfollowed``, or 404 when no
run of the body is followed.
"""

from __future__ import annotations

import hmac
import json
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentloop.server.problems import Problem
from agentloop.server.streams.hub import RunHub
from agentloop.shared.base.contracts import LIVE_PATH, LIVE_TOKEN_ENV
from agentloop.shared.base.errors import describe_validation_error
from agentloop.shared.definition.activity_io import StreamDelta
from agentloop.shared.live.pairing import HELLO_SUFFIX, hello_proof
from agentloop.shared.runs.events import MessageDelta, MessageReset

#: The largest body the live door reads (a worker sends far less at a time).
LIVE_MAX_BODY_BYTES = 256 * 1024


class LivePiece(BaseModel):
    """One live delta (``text``/``thinking`` at position ``at`` of its
    message's text of that kind and attempt) or a retried attempt's ``reset``."""

    model_config = ConfigDict(extra="forbid")

    run_id: str = Field(min_length=1, max_length=1000)
    message_id: str = Field(min_length=1, max_length=1100)
    step: int = Field(ge=0)
    attempt: int = Field(ge=1)
    kind: Literal["text", "thinking", "reset"]
    text: str = ""
    at: int = Field(default=0, ge=0)
    reason: str | None = Field(default=None, max_length=2000)

    def event(self, time: datetime) -> Any:
        common: dict[str, Any] = {"run_id": self.run_id, "step": self.step, "time": time,
                                  "message_id": self.message_id, "attempt": self.attempt}
        if self.kind == "reset":
            return MessageReset(**common, reason=self.reason)
        return MessageDelta(**common, delta=StreamDelta(kind=self.kind, text=self.text))


class LiveBatch(BaseModel):
    """What a worker posts: live pieces, of one run or several, in order."""

    model_config = ConfigDict(extra="forbid")

    deltas: list[LivePiece] = Field(max_length=10_000)


def live_router(hub: RunHub, token: str | None) -> APIRouter:
    """The live door of ``hub``, open to ``token`` (404 for all when None)."""
    router = APIRouter()

    @router.post(LIVE_PATH, include_in_schema=False)
    async def post_live(request: Request) -> Response:
        _check_token(request, token)
        batch = _batch(await _body(request))
        now = datetime.now(UTC)
        runs: dict[str, list[tuple[Any, int]]] = defaultdict(list)
        for piece in batch.deltas:
            runs[piece.run_id].append((piece.event(now), piece.at))
        unfollowed = [run_id for run_id, events in runs.items() if not hub.post_live(run_id, events)]
        if runs and len(unfollowed) == len(runs):
            raise Problem(404, "Not followed here", f"no reader follows run {unfollowed[0][:200]!r} on this "
                          "server (or no such run): its deltas reach readers through the run's history",
                          unfollowed=unfollowed)
        return JSONResponse({"accepted": len(batch.deltas), "unfollowed": unfollowed})

    @router.post(LIVE_PATH + HELLO_SUFFIX, include_in_schema=False)
    async def post_hello(request: Request) -> Response:
        # A worker paired through dev's file asks this before sending the
        # secret or a delta: the proof shows this server holds the secret.
        if not token:
            _check_token(request, token)
        try:
            hello = LiveHello.model_validate(json.loads(await _body(request) or b"null"))
        except ValueError:
            raise Problem(422, "Invalid hello", 'send {"nonce": "<16 to 128 characters>"}') from None
        return JSONResponse({"proof": hello_proof(token or "", hello.nonce)})

    return router


class LiveHello(BaseModel):
    """A paired worker's challenge (docs/live-deltas.md)."""

    model_config = ConfigDict(extra="forbid")

    nonce: str = Field(min_length=16, max_length=128)


def _check_token(request: Request, token: str | None) -> None:
    if not token:
        raise Problem(404, "Live deltas off", f"this server takes no live deltas: start it with {LIVE_TOKEN_ENV} "
                      "set, to the secret its workers hold")
    kind, _, presented = request.headers.get("authorization", "").partition(" ")
    if kind.lower() != "bearer" or not presented.strip():
        raise Problem(401, "Live token required", f"send `Authorization: Bearer <{LIVE_TOKEN_ENV}>`")
    if not hmac.compare_digest(token.encode(), presented.strip().encode()):
        raise Problem(401, "Not the live token", f"the bearer token is not this server's {LIVE_TOKEN_ENV} "
                      "(API tokens, admin ones included, cannot post live deltas)")


async def _body(request: Request) -> bytes:
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > LIVE_MAX_BODY_BYTES:
        raise Problem(413, "Body too large", f"the live door takes at most {LIVE_MAX_BODY_BYTES} bytes a request, "
                      f"not {length}")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > LIVE_MAX_BODY_BYTES:
            raise Problem(413, "Body too large", f"the live door takes at most {LIVE_MAX_BODY_BYTES} bytes a request")
    return bytes(body)


def _batch(body: bytes) -> LiveBatch:
    try:
        return LiveBatch.model_validate(json.loads(body or b"null"))
    except ValueError as err:
        detail = describe_validation_error(err) if isinstance(err, ValidationError) else "the body is not JSON"
        raise Problem(422, "Invalid live deltas", f"{detail}: send {{\"deltas\": [{{\"run_id\", \"message_id\", "
                      "\"step\", \"attempt\", \"kind\", \"text\", \"at\"}, ...]}") from None
