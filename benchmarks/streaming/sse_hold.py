"""What an open Server-Sent Events stream costs ``agentloop serve``.

A run waits for an approval (nothing happens on it), and N streams follow
it from a client process of their own: the gateway's resident memory and
CPU with N streams held, against the same gateway with none, in one run.
Per stream: (RSS with N - RSS with none) / N, and (CPU over the hold with N
- CPU over as long idle) / N. The gateway has one reader for the run,
whatever N (``RunHub``), so what grows is each connection's socket, task
and queue. N defaults to 500, within the per-token cap (500) and the total
(1000) of ``agentloop serve``.

Usage::

    python -m benchmarks.streaming.sse_hold [--streams 500] [--hold 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

from agentloop.workers.devserver import DevServer
from benchmarks.streaming.sse_fanout import ROOT, _env, start_gateway


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.loads(answer.read())


CLIENT = r'''
import asyncio, sys
async def main(host, port, path, n):
    held = []
    for _ in range(n):
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: text/event-stream\r\n\r\n".encode())
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        assert b" 200 " in head.split(b"\r\n", 1)[0], head[:200]
        held.append((reader, writer))
    print("held", flush=True)
    async def drain(r):
        while await r.read(65536):
            pass
    tasks = [asyncio.ensure_future(drain(r)) for r, _ in held]
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    for _, w in held:
        w.close()
asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])))
'''


def cpu_over(gateway, seconds: float) -> float:
    before = gateway.cpu_seconds()
    time.sleep(seconds)
    return gateway.cpu_seconds() - before


def main(streams: int, hold: float) -> None:
    with DevServer() as server, tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as ws:
        asyncio.run(server.wait_ready())
        queue = f"hold-{uuid.uuid4().hex[:8]}"
        worker = __import__("subprocess").Popen(
            [sys.executable, "-m", "agentloop.cli", "worker"], cwd=ROOT,
            env=_env(TEMPORAL_ADDRESS=server.address, AGENTLOOP_TASK_QUEUE=queue),
            stdout=__import__("subprocess").DEVNULL, stderr=__import__("subprocess").DEVNULL)
        gateway = start_gateway(server.address, queue, home)
        try:
            Path(ws, "notes.txt").write_text("hello\n")
            spec = {"model": "scripted:demo", "tools": ["list_dir", "read_file"], "workspace": ws,
                    "permissions": [{"tool": "read_file", "action": "ask"}]}
            run_id = post(f"{gateway.url}/v1/runs", {"spec": spec, "input": "look"})["run_id"]
            for _ in range(600):
                if get(f"{gateway.url}/v1/runs/{run_id}")["status"] == "awaiting_approval":
                    break
                time.sleep(0.1)
            time.sleep(2)
            idle_rss = rss_mb(gateway.proc.pid)
            idle_cpu = cpu_over(gateway, hold)
            host, port = gateway.url.removeprefix("http://").split(":")
            clients = __import__("subprocess").Popen(
                [sys.executable, "-c", CLIENT, host, port, f"/v1/runs/{run_id}/events", str(streams)],
                stdin=__import__("subprocess").PIPE, stdout=__import__("subprocess").PIPE, text=True)
            started = time.perf_counter()
            assert clients.stdout is not None and clients.stdout.readline().strip() == "held"
            opened = time.perf_counter() - started
            time.sleep(2)
            held_rss = rss_mb(gateway.proc.pid)
            held_cpu = cpu_over(gateway, hold)
            assert clients.stdin is not None
            clients.stdin.write("\n")
            clients.stdin.flush()
            clients.wait(30)
        finally:
            gateway.proc.terminate()
            worker.terminate()
            gateway.proc.wait(30)
            worker.wait(30)
    print(f"agentloop serve, {streams} SSE streams held on one run waiting for approval, {hold:.0f} s each:")
    print(f"  opened in {opened:.1f} s")
    print(f"  RSS: {idle_rss:.1f} MB with none, {held_rss:.1f} MB with {streams}: "
          f"{(held_rss - idle_rss) * 1024 / streams:.1f} KB a stream")
    print(f"  CPU over {hold:.0f} s: {idle_cpu:.2f} s with none, {held_cpu:.2f} s with {streams}: "
          f"{(held_cpu - idle_cpu) * 1000 / streams / hold:.3f} ms a stream a second "
          f"(heartbeats every 15 s)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--hold", type=float, default=20.0)
    args = parser.parse_args()
    main(args.streams, args.hold)
