"""``agentloop serve`` beside ``agentloop dev`` gets live deltas with no
setting (docs/live-deltas.md): serve writes a pairing file (0600) with a
secret made at its start, dev's worker finds it and posts there, and the
file goes when serve stops. A file left by a serve that ended, or naming a
port whose holder cannot prove it holds the secret, gets no delta and no
secret. Real ``agentloop dev`` and ``agentloop serve`` processes."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import stat
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from agentloop.shared.live.pairing import LIVE_FILE
from agentloop.testing import register_scripted_model, reply
from tests.helpers.cli import ROOT, clean_env, read_until
from tests.helpers.polling import eventually
from tests.process.cli.test_dev_lifecycle import finish

TEXT = "Paired without a setting: each piece of this answer is shown live, and once."


async def _paced(request: Any) -> Any:
    return reply(TEXT)


register_scripted_model("live-pair", _paced, delta_seconds=0.15)
MODULE = "tests.process.cli.test_live_pairing"


class Recorder(ThreadingHTTPServer):
    """A process on a port a stale pairing file names: records what comes,
    answers the hello with a proof that is not one."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, str], bytes]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                recorder.seen.append((self.path, dict(self.headers), body))
                answer = json.dumps({"proof": "0" * 64, "accepted": 1, "unfollowed": []}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"


async def _start(*args: str, env: dict[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentloop.cli", *args, cwd=ROOT, env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)


async def _serve_url(serve: asyncio.subprocess.Process) -> tuple[str, str]:
    assert serve.stderr is not None
    said = await read_until(serve.stderr, "live deltas: ")
    while "\n" not in said.rpartition("live deltas: ")[2]:
        said += (await asyncio.wait_for(serve.stderr.readline(), 30)).decode()
    found = re.search(r"agentloop serve: (http://\S+)/ ", said)
    assert found, said
    return found.group(1), said


async def _sse_text(http: httpx.AsyncClient, run_id: str) -> tuple[str, int, str]:
    """The text a browser shows (deltas, a reset clearing), how many deltas
    came live (no ``id:``), and the completed message's text."""
    text, live, whole, own_id = "", 0, "", None
    async with http.stream("GET", f"/v1/runs/{run_id}/events") as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("id:"):
                own_id = line[3:].strip()
            elif line.startswith("data:"):
                event = json.loads(line[5:])
                if event["type"] == "thread.message.delta" and event["delta"]["kind"] == "text":
                    text += event["delta"]["text"]
                    live += own_id is None
                elif event["type"] == "thread.message.reset":
                    text = ""
                elif event["type"] == "thread.message.completed":
                    whole = "".join(p.get("text", "") for p in event["message"]["content"] if p.get("type") == "text")
            elif line == "":
                own_id = None
    return text, live, whole


async def _run(http: httpx.AsyncClient, batch: float) -> str:
    started = await http.post("/v1/runs", json={"spec": {"model": "scripted:live-pair", "stream_batch_seconds": batch},
                                                 "input": "go"})
    assert started.status_code == 201, started.text
    return started.json()["run_id"]


async def test_serve_beside_dev_gets_live_deltas_with_no_setting(tmp_path: Path, workspace: Path) -> None:
    env = clean_env(tmp_path, drop=("AGENTLOOP_LIVE",))
    pairing = Path(env["AGENTLOOP_HOME"]) / LIVE_FILE
    dev = await _start("dev", "--headless", "--port", "0", "--workspace", str(workspace), "--import", MODULE, env=env)
    try:
        assert dev.stdout is not None
        await read_until(dev.stdout, "agentloop list --status awaiting_approval", timeout=60)
        serve = await _start("serve", "--port", "0", env=env)
        try:
            url, said = await _serve_url(serve)
            assert f"paired through {pairing}" in said, said
            assert stat.S_IMODE(pairing.stat().st_mode) == 0o600
            assert json.loads(pairing.read_text())["url"] == url
            async with httpx.AsyncClient(base_url=url, timeout=60) as http:
                text, live, whole = await _sse_text(http, await _run(http, 0.5))
            assert whole == TEXT and TEXT.startswith(text) and live >= 2, (text, live)
            serve.send_signal(signal.SIGTERM)
        finally:
            _, err = await finish(serve)
        assert "Traceback" not in err, err
        assert not pairing.exists()  # removed when serve stopped
        # A file left by a serve that ended: its port now someone else's. Nothing goes there.
        stranger = Recorder()
        threading.Thread(target=stranger.serve_forever, daemon=True).start()
        try:
            gone = await _start("--version", env=env)
            await gone.wait()
            _write(pairing, stranger.url, gone.pid)
            await _direct_run(env, workspace)
            assert stranger.seen == []
            # A file whose serve seems alive (this test's pid), the port held by one who lacks the
            # secret: it is asked for a proof, fails it, and gets neither the secret nor a delta.
            _write(pairing, stranger.url, os.getpid())
            await asyncio.sleep(1.1)  # the worker looks at the file at most once a second
            await _direct_run(env, workspace)
            await eventually(lambda: bool(stranger.seen), "the worker to ask the stranger for a proof")
            assert {path for path, _, _ in stranger.seen} == {"/internal/live/hello"}, stranger.seen
            assert not any("authorization" in {k.lower() for k in headers} for _, headers, _ in stranger.seen)
            assert not any(b"Paired" in body for _, _, body in stranger.seen)
        finally:
            stranger.shutdown()
            stranger.server_close()
    finally:
        dev.send_signal(signal.SIGINT)
        await finish(dev)
    assert dev.returncode == 0


def _write(path: Path, url: str, pid: int) -> None:
    path.write_text(json.dumps({"url": url, "token": "stale-secret", "pid": pid}))
    path.chmod(0o600)


async def _direct_run(env: dict[str, str], workspace: Path) -> None:
    """A run on dev's worker, to its end (``agentloop run`` against dev)."""
    run = await _start("run", "go", "--model", "scripted:live-pair", "--workspace", str(workspace), env=env)
    out, err = await finish(run)
    assert run.returncode == 0, err


async def test_embedded_serve_shows_its_own_worker_s_deltas_live(tmp_path: Path, workspace: Path) -> None:
    env = clean_env(tmp_path, drop=("AGENTLOOP_LIVE",))
    serve = await _start("serve", "--port", "0", "--workspace", str(workspace), "--import", MODULE, env=env)
    try:
        url, said = await _serve_url(serve)
        assert "live deltas: from the worker of this process, in memory" in said, said
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            text, live, whole = await _sse_text(http, await _run(http, 0.5))
            assert (await http.post("/internal/live", json={"deltas": []})).status_code == 404  # no door for it
        assert whole == TEXT and TEXT.startswith(text) and live >= 2, (text, live)
        assert not (Path(env["AGENTLOOP_HOME"]) / LIVE_FILE).exists()  # nothing written for it
    finally:
        serve.send_signal(signal.SIGTERM)
        await finish(serve)
    assert serve.returncode == 128 + signal.SIGTERM  # it stops, worker and Temporal server too
