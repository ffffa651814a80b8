"""``agentloop serve`` as a subprocess on the session's dev server (a worker
subprocess runs the runs): a round trip over HTTP as curl would make it,
tokens from the environment, and no other host than 127.0.0.1 without one."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys

import httpx
from temporalio.client import Client

from agentloop.workers.config import ADDRESS_FILE, LOCK_FILE
from tests.helpers.cli import agentloop, clean_env
from tests.helpers.http_api import read_sse
from tests.helpers.paths import ROOT

SECRET = "ops-secret-0123456789"


async def start_serve(env: dict[str, str], *args: str) -> tuple[asyncio.subprocess.Process, str, list[str]]:
    """``agentloop serve --port 0 ARGS``; the process, its URL, and what it said up to the URL."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentloop.cli", "serve", "--port", "0", *args, cwd=ROOT, env=env,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    said: list[str] = []
    assert proc.stderr is not None
    while True:
        line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
        assert line, f"agentloop serve ended before serving: {''.join(said)}"
        said.append(line)
        if found := re.match(r"agentloop serve: (http://\S+)/ ", line):
            url = found.group(1).replace("0.0.0.0", "127.0.0.1")
            break
    # What it says after the URL (tokens, or that it listens on 127.0.0.1 only) comes at once.
    said.append((await asyncio.wait_for(proc.stderr.readline(), 30)).decode())
    return proc, url, said


async def stop(proc: asyncio.subprocess.Process) -> int:
    proc.send_signal(signal.SIGINT)
    return await asyncio.wait_for(proc.wait(), 30)


async def test_serve_round_trip_start_follow_and_read(env, spawn_worker) -> None:
    spawn_worker()
    proc, url, said = await start_serve(env, "--temporal-ui", "http://ui.example:8233/")
    try:
        assert url.startswith("http://127.0.0.1:")
        assert "no API token configured (AGENTLOOP_API_TOKENS): listening on 127.0.0.1 only" in said[-1]
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            started = await http.post("/v1/runs", json={"spec": {"model": "scripted:demo",
                                                                 "tools": ["list_dir", "read_file"]},
                                                        "input": "what is here?"})
            assert started.status_code == 201, started.text
            run_id = started.json()["run_id"]
            async with http.stream("GET", f"/v1/runs/{run_id}/events") as response:
                sse = await read_sse(response)
            assert sse.closed_by_server and sse.ids == list(range(len(sse.events)))
            assert sse.types[-1] == "thread.run.completed"
            state = (await http.get(f"/v1/runs/{run_id}")).json()
            assert state["status"] == "completed"
            assert (await http.get("/v1/openapi.json")).json()["info"]["title"] == "agentloop"
            # The console links the run to the Temporal UI given with --temporal-ui.
            page = (await http.get(f"/runs/{run_id}")).text
            assert f"http://ui.example:8233/namespaces/default/workflows/{run_id}" in page, page
    finally:
        code = await stop(proc)
    assert code in (0, 130), code


async def test_serve_with_tokens_on_every_host_asks_for_one(env) -> None:
    proc, url, said = await start_serve({**env, "AGENTLOOP_API_TOKENS": f"ops:act:{SECRET}"}, "--host", "0.0.0.0")
    try:
        assert "tokens: ops (act)" in said[-1]
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            refused = await http.get("/v1/runs")
            allowed = await http.get("/v1/runs", headers={"Authorization": f"Bearer {SECRET}"})
        assert refused.status_code == 401 and refused.headers["content-type"] == "application/problem+json"
        assert allowed.status_code == 200 and isinstance(allowed.json()["runs"], list)
    finally:
        await stop(proc)


def test_serve_refuses_other_hosts_without_a_token(env) -> None:
    done = agentloop("serve", "--host", "0.0.0.0", "--port", "0", env=env, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "agentloop: no API token is configured, so the server listens on 127.0.0.1 only (asked: 0.0.0.0); "
        "set AGENTLOOP_API_TOKENS=name:scope:secret,... to serve other hosts")
    bad = agentloop("serve", env={**env, "AGENTLOOP_API_TOKENS": "ops:write:short"}, timeout=60)
    assert bad.returncode == 2
    assert "token 'ops' has scope 'write'; a scope is read, act or admin" in bad.stderr


def test_a_port_in_use_is_a_sentence_and_the_default_is_not_8000(env) -> None:
    import socket

    from agentloop.cli.parser import build_parser

    # Its own default: `mkdocs serve` (and many dev servers) take 8000.
    assert build_parser().parse_args(["serve"]).port == 8420
    with socket.socket() as taken:  # as `mkdocs serve` holds it
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = agentloop("serve", "--port", str(port), env=env, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"agentloop: cannot listen on 127.0.0.1:{port} (Address already in use); choose another --port "
        "(0: a free one) or --host")
    assert "Traceback" not in done.stderr


async def test_embedded_serve_starts_a_streamed_run_eagerly(tmp_path) -> None:
    # No Temporal address and no `agentloop dev`: serve embeds the server and a worker, and its starts hand
    # the run's first workflow task to that worker (eager start, docs/live-deltas.md).
    env = clean_env(tmp_path)
    proc, url, _ = await start_serve(env)
    assert proc.stderr is not None
    drain = asyncio.create_task(proc.stderr.read())  # what it logs must not fill the pipe
    try:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            async with http.stream("POST", "/v1/runs/stream", json={"spec": {"model": "scripted:demo",
                                   "tools": ["list_dir", "read_file"]}, "input": "what is here?"}) as response:
                assert response.status_code == 200, await response.aread()
                run_id = response.headers["x-agentloop-run-id"]
                sse = await read_sse(response)
        # Live deltas (on by default here, in memory) come without an id; the history's events keep theirs.
        known = [i for i in sse.ids if i is not None]
        assert sse.closed_by_server and known[0] == 0 and known == sorted(set(known)), sse.ids
        assert sse.types[0] == "agent.run.created" and sse.types[-1] == "thread.run.completed", sse.events[-1]
        address = (tmp_path / "home" / ADDRESS_FILE).read_text().strip()
        temporal = await Client.connect(address)
        first = (await temporal.get_workflow_handle(run_id).fetch_history()).events[0]
        assert first.workflow_execution_started_event_attributes.eager_execution_accepted
        # Ctrl-C stops it, its worker and its Temporal server, and it exits 130 (128 + SIGINT). Before, uvicorn
        # took the signal and raised it again after its own shutdown; that late cancel cut the worker's stop
        # short, and its pollers kept the process alive, retrying the stopped server.
        server_pid = json.loads((tmp_path / "home" / LOCK_FILE).read_text())["server_pid"]
        assert await stop(proc) == 128 + signal.SIGINT
        assert not pid_alive(server_pid)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        drain.cancel()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
