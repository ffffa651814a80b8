"""Several ``agentloop serve`` replicas, one worker (docs/live-deltas.md):
the worker's ``AGENTLOOP_LIVE_URL`` names both gateways (or a host name
that resolves to both), each gets the deltas of the runs it follows, and a
client on each sees them live, the text once. Real ``agentloop serve``
processes on the session's dev server; the worker in this process."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from agentloop.activities import live_sender as sender_module
from agentloop.activities.live_sender import LiveFanout, gateway_addresses
from agentloop.shared.base.contracts import LIVE_TOKEN_ENV, LIVE_URL_ENV
from agentloop.testing import reply, script
from tests.helpers import agents
from tests.process.http.test_http_serve import start_serve, stop
from tests.server.http.test_live_deltas import LONG_TEXT, Client, shown, spec_json

SECRET = "replicas-live-secret-0123456789"


async def test_a_client_on_each_replica_sees_the_deltas_live(env, worker, monkeypatch: pytest.MonkeyPatch) -> None:
    served = [await start_serve({**env, LIVE_TOKEN_ENV: SECRET}) for _ in range(2)]
    try:
        urls = [url for _, url, _ in served]
        monkeypatch.setenv(LIVE_URL_ENV, ",".join(urls))
        monkeypatch.setenv(LIVE_TOKEN_ENV, SECRET)
        model = script(reply(LONG_TEXT), delta_seconds=0.3)
        async with worker(), httpx.AsyncClient(timeout=60) as http:
            spec = agents.spec(model, stream_batch_seconds=0.02)
            started = await http.post(f"{urls[0]}/v1/runs", json={"spec": spec_json(spec), "input": "go"})
            run_id = started.json()["run_id"]
            clients = [Client(), Client()]

            async def follow(client: Client, url: str) -> bool:
                async with httpx.AsyncClient(base_url=url, timeout=60) as one:
                    return await client.follow(one, run_id)

            await asyncio.gather(*(follow(c, u) for c, u in zip(clients, urls, strict=True)))
    finally:
        codes = [await stop(proc) for proc, _, _ in served]
    assert all(code in (0, 130) for code in codes), codes
    for client in clients:
        assert shown(client, f"{run_id}:msg:0") == LONG_TEXT
        assert client.live_deltas >= 2, client.live_deltas  # live on both replicas, not one


async def test_a_name_is_posted_to_at_each_of_its_addresses(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = {"serve-live": ["10.0.0.7", "10.0.0.5", "10.0.0.7"]}

    async def getaddrinfo(host: str, port: int, **_: Any) -> list[Any]:
        if host not in answers:
            raise OSError("no such name")
        return [(2, 1, 6, "", (address, port)) for address in answers[host]]

    monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", getaddrinfo)
    assert await gateway_addresses("http://serve-live:8000") == [
        ("http://10.0.0.5:8000", "serve-live:8000"), ("http://10.0.0.7:8000", "serve-live:8000")]
    # An address, https (a certificate names the host) and localhost are posted to as they are.
    for url in ("http://10.1.2.3:8000", "https://serve-live", "http://localhost:8420"):
        assert await gateway_addresses(url) == [(url, None)]
    fanout = LiveFanout(["http://serve-live:8000"], "s")
    monkeypatch.setattr(sender_module.LiveSender, "offer", lambda self, piece: None)
    fanout.offer({"run_id": "r"})
    await fanout._resolving  # type: ignore[misc]
    assert set(fanout.senders) == {("http://10.0.0.5:8000", "serve-live:8000"),
                                   ("http://10.0.0.7:8000", "serve-live:8000")}
    answers["serve-live"] = ["10.0.0.9"]  # a replica went, another came
    fanout._resolved_at -= sender_module.RESOLVE_SECONDS
    fanout.offer({"run_id": "r"})
    await fanout._resolving  # type: ignore[misc]
    assert set(fanout.senders) == {("http://10.0.0.9:8000", "serve-live:8000")}
