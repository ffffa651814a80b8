"""Sends each streamed delta to the gateway at once (live deltas, docs/events.md).

With ``AGENTLOOP_LIVE_URL`` and ``AGENTLOOP_LIVE_TOKEN`` (or
``AGENTLOOP_LIVE_TOKEN_FILE``) in the worker's environment, or paired with
an ``agentloop serve`` beside ``agentloop dev`` (docs/live-deltas.md),
:class:`~agentloop.activities.stream_publisher.DeltaPublisher` hands every
text and thinking delta (and a retried attempt's reset) to this process's
:class:`LiveSender` (one per gateway: :class:`LiveFanout` posts to each
gateway the URLs name) as well as to the run's history; embedded ``serve``
takes them in memory instead (``agentloop.shared.live.sinks``). The sender
posts them from a background task, with no batch window: what queued while
a post was on its way goes in the next one. It never blocks or fails a
model call: the queue is bounded (a delta that finds it full is dropped;
the history still brings its text), posts time out within a second, and a
gateway that is down, refuses, or follows nobody of a run is left alone for
a while (:data:`MUTE_SECONDS`), logged once. The secret is sent in the
``Authorization`` header only, never logged.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import os
import secrets
import socket
import weakref
from typing import Any, Final
from urllib.parse import urlsplit

import httpx

from agentloop.shared.base.contracts import LIVE_PATH, LIVE_URL_ENV
from agentloop.shared.base.errors import UserError
from agentloop.shared.live.pairing import HELLO_SUFFIX, hello_proof, paired_gateway
from agentloop.shared.live.secret import live_secret
from agentloop.shared.live.sinks import LiveSink, Mutes, live_off, local_sink

log = logging.getLogger("agentloop.stream")

#: Deltas waiting to be posted, at most; past it a delta is dropped.
QUEUE_SIZE: Final = 10_000
#: Deltas in one post, at most.
POST_MOST: Final = 500
#: How long a gateway that failed is left alone (a run nobody follows on it:
#: agentloop.shared.live.sinks.Mutes).
MUTE_SECONDS: Final = 1.0
#: How long a gateway that refused the secret or the body is left alone.
REFUSED_SECONDS: Final = 60.0
#: How often a gateway URL's host name is resolved again (replicas come and go).
RESOLVE_SECONDS: Final = 5.0
TIMEOUT: Final = httpx.Timeout(1.0, connect=0.5)


class LiveSender:
    """Posts live pieces to ``url`` + ``/internal/live`` with ``token``."""

    def __init__(self, url: str, token: str, verify: bool = False, host: str | None = None) -> None:
        self.url = url.rstrip("/") + LIVE_PATH
        self._token = token
        # An address a gateway's name resolved to: posted to with the name's Host header.
        self._host = host
        # Paired through dev's file: the gateway proves it holds the secret first.
        self._verify = verify
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(QUEUE_SIZE)
        self._task: asyncio.Task[None] | None = None
        self._mutes = Mutes()
        self._down_until = 0.0
        self._said: set[str] = set()
        self.sent = self.dropped = self.posts = 0

    def offer(self, piece: dict[str, Any]) -> None:
        """Queue one piece (a dict of ``LivePiece``'s fields); never blocks or raises."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        if now < self._down_until or self._mutes.muted(piece["run_id"], now):
            return
        try:
            self._queue.put_nowait(piece)
        except asyncio.QueueFull:
            self.dropped += 1
            self._say("full", "live deltas dropped: the gateway takes them slower than they come")
            return
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run(), name="agentloop-live-sender")

    def close(self) -> None:
        """Stop posting (a gateway address that no longer resolves)."""
        if self._task is not None:
            self._task.cancel()

    async def _run(self) -> None:
        limits = httpx.Limits(max_connections=2, max_keepalive_connections=2)
        headers = {"content-type": "application/json", **({"host": self._host} if self._host else {})}
        async with httpx.AsyncClient(timeout=TIMEOUT, limits=limits, headers=headers) as http:
            if self._verify and not await self._hello(http):
                while not self._queue.empty():  # what waited is stale by the next try
                    self._queue.get_nowait()
                return
            while True:
                batch = [await self._queue.get()]
                while len(batch) < POST_MOST and not self._queue.empty():
                    batch.append(self._queue.get_nowait())
                await self._post(http, batch)

    async def _post(self, http: httpx.AsyncClient, batch: list[dict[str, Any]]) -> None:
        loop = asyncio.get_running_loop()
        if loop.time() < self._down_until:
            return
        try:
            answer = await http.post(self.url, content=json.dumps({"deltas": batch}),
                                     headers={"authorization": f"Bearer {self._token}"})
        except (httpx.HTTPError, OSError) as err:
            self._down_until = loop.time() + MUTE_SECONDS
            self._say("down", f"live deltas not sent to {self.url} ({type(err).__name__}); "
                              "retrying each second, the runs' history brings them meanwhile")
            return
        self.posts += 1
        if answer.status_code == 200:
            self.sent += len(batch)
            unfollowed = answer.json().get("unfollowed", [])
            for run_id in {piece["run_id"] for piece in batch} - set(unfollowed):
                self._mutes.followed(run_id)
            self._mutes.unfollowed(unfollowed, loop.time())
        elif answer.status_code == 404 and "unfollowed" in answer.text:
            self._mutes.unfollowed(list({piece["run_id"] for piece in batch}), loop.time())
        else:
            self._down_until = loop.time() + REFUSED_SECONDS
            self._say(f"refused{answer.status_code}", f"the gateway at {self.url} refused live deltas "
                      f"({answer.status_code}: {_detail(answer)}); trying again in {REFUSED_SECONDS:.0f} s")

    async def _hello(self, http: httpx.AsyncClient) -> bool:
        """Whether the paired gateway proves it holds the secret (which is not sent)."""
        loop = asyncio.get_running_loop()
        nonce = secrets.token_hex(16)
        try:
            answer = await http.post(self.url + HELLO_SUFFIX, content=json.dumps({"nonce": nonce}))
            proof = str(answer.json().get("proof", "")) if answer.status_code == 200 else ""
        except (httpx.HTTPError, OSError, ValueError, AttributeError) as err:
            self._down_until = loop.time() + MUTE_SECONDS
            self._say("down", f"live deltas not sent to {self.url} ({type(err).__name__}); "
                              "retrying each second, the runs' history brings them meanwhile")
            return False
        if not hmac.compare_digest(proof, hello_proof(self._token, nonce)):
            self._down_until = loop.time() + REFUSED_SECONDS
            self._say("unproved", f"the gateway at {self.url} did not prove it holds the secret of the pairing "
                                  f"file (it answered {answer.status_code}): no live deltas sent to it")
            return False
        self._verify = False
        return True

    def _say(self, what: str, message: str) -> None:
        if what not in self._said:  # once per kind of trouble
            self._said.add(what)
            log.warning(message)


def _detail(answer: httpx.Response) -> str:
    try:
        return str(answer.json().get("detail", ""))[:300]
    except ValueError:
        return answer.text[:300]


class LiveFanout:
    """Offers each piece to every gateway ``urls`` name (docs/live-deltas.md):
    several ``serve`` replicas each get the deltas of the runs they follow.
    An ``http`` URL's host name is resolved (again every
    :data:`RESOLVE_SECONDS`, off the event loop) and each address is posted
    to with the name's ``Host`` header, so a headless Service's name
    reaches every replica; each replica answers which runs nobody follows
    there, and soon gets nothing of them. Until the first resolution, the
    URL itself is posted to."""

    def __init__(self, urls: list[str], token: str) -> None:
        self.urls, self._token = urls, token
        self.senders: dict[tuple[str, str | None], LiveSender] = {(url, None): LiveSender(url, token) for url in urls}
        self._resolved_at = -RESOLVE_SECONDS
        self._resolving: asyncio.Task[None] | None = None

    def offer(self, piece: dict[str, Any]) -> None:
        """Offer one piece to each gateway's sender; never blocks or raises."""
        loop = asyncio.get_running_loop()
        if loop.time() - self._resolved_at >= RESOLVE_SECONDS and (self._resolving is None or self._resolving.done()):
            self._resolved_at = loop.time()
            self._resolving = loop.create_task(self._resolve(), name="agentloop-live-resolve")
        for sender in self.senders.values():
            sender.offer(piece)

    async def _resolve(self) -> None:
        found: dict[tuple[str, str | None], LiveSender] = {}
        for url in self.urls:
            try:
                targets = await gateway_addresses(url)
            except OSError as err:
                _say_once(f"live deltas: {url}'s host does not resolve ({err}); posting to the URL as it is")
                targets = [(url, None)]
            for target in targets:
                found[target] = self.senders.get(target) or LiveSender(target[0], self._token, host=target[1])
        for target, sender in self.senders.items():
            if target not in found:
                sender.close()
        self.senders = found


async def gateway_addresses(url: str) -> list[tuple[str, str | None]]:
    """``url`` as (URL to post to, Host header): one per address its host
    resolves to, for ``http`` with a host name; else ``url`` itself.

    Raises:
        OSError: The name does not resolve.
    """
    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port or 80
    if parts.scheme != "http" or not host or _is_address(host) or host == "localhost":
        return [(url, None)]
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses = sorted({str(info[4][0]) for info in infos})
    netloc = parts.netloc.rpartition("@")[2]
    return [(f"http://{f'[{a}]' if ':' in a else a}:{port}{parts.path}", netloc) for a in addresses]


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _say_once(message: str) -> None:
    if message not in _said:  # once per problem: the history still brings the text
        _said.add(message)
        log.warning(message)


_said: set[str] = set()
_senders: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str], LiveSink]] = \
    weakref.WeakKeyDictionary()


def live_sender(environ: dict[str, str] | None = None) -> LiveSink | None:
    """Where this process's live pieces go (docs/live-deltas.md): nowhere
    with ``AGENTLOOP_LIVE=off``; else this event loop's sender to the
    gateway ``AGENTLOOP_LIVE_URL`` and ``AGENTLOOP_LIVE_TOKEN`` name (a
    setting beats a default); else the gateway of this very process
    (embedded ``agentloop serve``), in memory; else the ``agentloop serve``
    beside this ``agentloop dev`` that its pairing file names (verified
    first); else None."""
    env = os.environ if environ is None else environ
    if live_off(env):
        return None
    url = env.get(LIVE_URL_ENV, "").strip()
    try:
        token = (live_secret(env) or "") if url else ""
    except UserError as err:
        _say_once(f"live deltas not sent: {err}")
        token = ""
    verify = False
    if not url or not token:
        local = local_sink()
        paired = paired_gateway() if local is None else None
        if paired is None:
            return local
        url, token, verify = paired.url, paired.token, True
    senders = _senders.setdefault(asyncio.get_running_loop(), {})
    sender = senders.get((url, token))
    if sender is None:
        urls = [u.strip() for u in url.split(",") if u.strip()]
        sender = senders[(url, token)] = LiveSender(url, token, verify) if verify else LiveFanout(urls, token)
    return sender
