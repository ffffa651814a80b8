"""``first_token``'s SSE client: one run started over HTTP and read to its
end, timed, in this process or (``--client-process``) in a process of its own.

In the benchmark's process the client shares the event loop and the
interpreter lock with the worker, so a delta the gateway has written waits
until the worker's workflow task (the one its own signal starts) is done
before the client reads it. A browser has a process of its own; so does
the client here with ``--client-process``. The process reads one request a
line on stdin (JSON: ``url``, ``body``, ``stream``) and answers one JSON
line a run (:func:`timed_sse`'s fields); times are wall-clock seconds, as
the worker's event times are. Usage (by ``first_token``)::

    python -m benchmarks.streaming.sse_timing
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from datetime import datetime
from typing import Any

import httpx

from benchmarks.streaming.stream_latency import _latencies


async def timed_sse(http: httpx.AsyncClient, body: dict[str, Any], stream: bool) -> dict[str, Any]:
    """Start a run (``POST /v1/runs`` then ``GET .../events``, or with
    ``stream`` the one ``POST /v1/runs/stream``) and read its events to the
    end: when the client began, the POST was answered and the stream
    opened, when the first text delta came and its event's time (it reached
    the worker's publisher), whether it came live (no ``id:``), each
    chunk's latency, and the run id."""
    began = time.time()
    got: dict[str, Any] = {"began": began, "posted": None, "first": None, "at": None, "live": None,
                           "latencies": []}
    if not stream:
        got["run_id"] = (await http.post("/v1/runs", json=body)).json()["run_id"]
        got["posted"] = time.time()
    request = http.build_request("POST", "/v1/runs/stream", json=body) if stream else \
        http.build_request("GET", f"/v1/runs/{got['run_id']}/events")
    response = await http.send(request, stream=True)
    async with contextlib.aclosing(response):  # type: ignore[type-var]
        got["opened"] = time.time()
        got["run_id"] = response.headers.get("x-agentloop-run-id") or got["run_id"]
        has_id = False
        async for line in response.aiter_lines():
            has_id = line.startswith("id:") or (has_id and line != "")
            if not line.startswith("data:"):
                continue
            event, received = json.loads(line[5:]), time.time()
            if event["type"] == "thread.message.delta" and event["delta"]["kind"] == "text":
                if got["first"] is None:
                    got["first"], got["live"] = received, not has_id
                    got["at"] = datetime.fromisoformat(event["time"]).timestamp()
                got["latencies"] += _latencies(event["delta"]["text"], received)
            if event["type"].startswith("thread.run.") and event["type"] != "thread.run.requires_action":
                break
    return got


class ClientProcess:
    """This module as a process of its own, one run at a time."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls, cwd: str, env: dict[str, str]) -> ClientProcess:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "benchmarks.streaming.sse_timing", cwd=cwd, env=env,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=1 << 24)
        return cls(proc)

    async def run(self, url: str, body: dict[str, Any], stream: bool) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write((json.dumps({"url": url, "body": body, "stream": stream}) + "\n").encode())
        await self.proc.stdin.drain()
        line = await self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the SSE client process ended (exit {await self.proc.wait()}); its error is above")
        return dict(json.loads(line))

    async def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        await self.proc.wait()


async def main() -> None:
    clients: dict[str, httpx.AsyncClient] = {}
    reader = asyncio.StreamReader(limit=1 << 24)
    await asyncio.get_running_loop().connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    try:
        while line := await reader.readline():
            ask = json.loads(line)
            http = clients.get(ask["url"])
            if http is None:
                http = clients[ask["url"]] = httpx.AsyncClient(base_url=ask["url"], timeout=60)
            print(json.dumps(await timed_sse(http, ask["body"], ask["stream"])), flush=True)
    finally:
        for http in clients.values():
            await http.aclose()


if __name__ == "__main__":
    asyncio.run(main())
