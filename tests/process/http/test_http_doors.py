"""``agentloop serve`` and ``agentloop codec-server`` as subprocesses, tried
as a web page would: a rebound host name, a foreign Origin, a cross-site
form, a token in the URL, a huge body, too many streams. Each refusal, and
the forms that are allowed, against the real server (docs/security.md)."""

from __future__ import annotations

import asyncio
import base64
import os
import re
import sys
from pathlib import Path

import httpx

from tests.helpers.paths import ROOT
from tests.process.http.test_http_serve import start_serve, stop

SECRET = "ops-secret-0123456789"
LIMITED = "triage-secret-0123456789"
JSON = {"Content-Type": "application/json"}


def problem(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"] == "application/problem+json"
    return response.json()


def shell_spec(workspace: Path) -> dict:
    return {"model": "scripted:rebind", "tools": ["shell_command"], "workspace": str(workspace),
            "default_permission": "allow"}


async def test_a_rebound_page_starts_nothing_and_the_same_request_from_the_host_does(env, spawn_worker, tmp_path,
                                                                                    temporal_client,
                                                                                    task_queue) -> None:
    spawn_worker("tests.helpers.fixtures.doors_fixture")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    proc, url, said = await start_serve(env)
    port = url.rsplit(":", 1)[1]
    body = {"spec": shell_spec(workspace), "input": "go"}
    try:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            # DNS rebinding: evil.example resolves to 127.0.0.1, so the browser sends its own name as Host.
            rebound = {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}", **JSON}
            refused = problem(await http.post("/v1/runs", json=body, headers=rebound), 403)
            assert "Host 'evil.example:" in refused["detail"] and "--allowed-host" in refused["detail"]
            # Reading is refused too, and so is a foreign Origin with the local Host.
            problem(await http.get("/v1/runs", headers={"Host": f"evil.example:{port}"}), 403)
            foreign = problem(await http.post("/v1/runs", json=body, headers={"Origin": "http://evil.example",
                                                                               **JSON}), 403)
            assert "origin 'http://evil.example'" in foreign["detail"]
            assert not (workspace / "pwned").exists()
            # The control: the same body from the host itself starts the run, whose shell leaves the file,
            # so the refusals above are what kept it from running.
            started = await http.post("/v1/runs", json=body, headers={"Origin": url})
            assert started.status_code == 201, started.text
            run_id = started.json()["run_id"]
            for _ in range(600):
                state = (await http.get(f"/v1/runs/{run_id}")).json()
                if state["status"] in ("completed", "failed"):
                    break
                await asyncio.sleep(0.1)
            assert state["status"] == "completed", state
            assert (workspace / "pwned").exists()
            # The refused requests started nothing: the test's queue holds the control run alone.
            for _ in range(100):
                listed = [w.id async for w in temporal_client.list_workflows(f'TaskQueue="{task_queue}"')]
                if listed:
                    break
                await asyncio.sleep(0.1)
            assert listed == [run_id]
    finally:
        await stop(proc)


async def test_cross_site_simple_requests_and_tokens_in_urls_are_refused(env) -> None:
    proc, url, said = await start_serve({**env, "AGENTLOOP_API_TOKENS": f"ops:act:{SECRET}"},
                                        "--allowed-host", "agents.example.com")
    port = url.rsplit(":", 1)[1]
    bearer = {"Authorization": f"Bearer {SECRET}"}
    try:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            # A form or text/plain POST (no preflight in a browser) never reaches a handler; nor does an empty one.
            for headers, content in [({"Content-Type": "text/plain"}, b""),
                                     ({"Content-Type": "application/x-www-form-urlencoded"}, b"a=b"),
                                     ({}, b"")]:
                refused = problem(await http.post("/v1/runs/r1/cancel", content=content,
                                                  headers={**bearer, **headers}), 415)
                assert "Content-Type: application/json" in refused["detail"]
            # The token is not taken from the URL on a POST; on a GET stream it is.
            in_url = problem(await http.post("/v1/runs/r1/cancel", params={"access_token": SECRET}, json={}), 401)
            assert "GET .../events streams only" in in_url["detail"]
            problem(await http.get("/v1/runs/nobody-here/events", params={"access_token": SECRET}), 404)
            listing = problem(await http.get("/v1/runs", params={"access_token": SECRET}), 401)
            assert "GET .../events streams only" in listing["detail"]
            # With tokens and --allowed-host, the Host check is on: the named host and loopback pass.
            problem(await http.get("/v1/runs", headers={**bearer, "Host": f"evil.example:{port}"}), 403)
            named = await http.get("/v1/runs", headers={**bearer, "Host": f"agents.example.com:{port}"})
            assert named.status_code == 200, named.text
            # With tokens, inline specs are refused unless --allow-inline-specs.
            inline = problem(await http.post("/v1/runs", json={"spec": {"model": "scripted:demo"}, "input": "x"},
                                             headers=bearer), 403)
            assert "--allow-inline-specs" in inline["detail"]
            # The API docs page loads no third-party script: there is none; the OpenAPI document is served.
            assert (await http.get("/v1/docs")).status_code == 404
            assert (await http.get("/v1/openapi.json")).status_code == 200
    finally:
        await stop(proc)


async def test_bodies_are_capped_before_they_are_read_and_agents_limit_a_token(env, tmp_path) -> None:
    spec = tmp_path / "triage.json"
    spec.write_text('{"model": "scripted:demo", "tools": ["list_dir"]}')
    tokens = f"ops:act:{SECRET},triage:act:{LIMITED}:agents=triage"
    proc, url, said = await start_serve({**env, "AGENTLOOP_API_TOKENS": tokens}, "--agent", f"triage={spec}",
                                        "--agent", f"other={spec}", "--max-body-bytes", "100000")
    try:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            limited = {"Authorization": f"Bearer {LIMITED}"}
            other = problem(await http.post("/v1/runs", json={"spec": "other", "input": "x"}, headers=limited), 403)
            assert "may start only triage" in other["detail"] and "'other'" in other["detail"]
            # A 50 MB body announced by its length is refused before a byte of it is sent.
            status, answer = await announce_only(url, 50_000_000, LIMITED)
            assert status == 413 and b"at most 100000" in answer, answer

            # Sent in chunks, without a length, it is cut off as soon as it passes the cap.
            async def chunks():
                for _ in range(100):
                    yield b" " * 10_000

            chunked = problem(await http.post("/v1/runs", content=chunks(), headers={**limited, **JSON}), 413)
            assert "100000" in chunked["detail"]
    finally:
        await stop(proc)


async def announce_only(url: str, length: int, token: str) -> tuple[int, bytes]:
    """POST headers announcing a ``length``-byte body, and none of the body: the answer's status and bytes."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(f"POST /v1/runs HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
                 f"Authorization: Bearer {token}\r\nContent-Length: {length}\r\n\r\n".encode())
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 10)  # the server closes the connection after its answer
    writer.close()
    return int(answer.split(b" ", 2)[1]), answer


async def test_streams_are_capped_per_token_with_retry_after(env) -> None:
    proc, url, said = await start_serve(env, "--max-streams-per-token", "2")
    try:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            run = await http.post("/v1/runs", json={"spec": {"model": "scripted:demo"}, "input": "x",
                                                    "run_id": "held-" + os.urandom(4).hex()})
            run_id = run.json()["run_id"]
            async with http.stream("GET", f"/v1/runs/{run_id}/events") as one, \
                    http.stream("GET", f"/v1/runs/{run_id}/events") as two:
                assert one.status_code == two.status_code == 200
                third = await http.get(f"/v1/runs/{run_id}/events")
                assert third.status_code == 429 and third.headers["retry-after"] == "5"
                assert "2 streams a caller may hold" in third.json()["detail"]
    finally:
        await stop(proc)


async def test_the_codec_server_answers_only_its_host_and_origins(env) -> None:
    key = base64.b64encode(b"k" * 32).decode()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentloop.cli", "codec-server", "--port", "0", cwd=ROOT,
        env={**env, "AGENTLOOP_ENCRYPTION_KEYS": f"k1:{key}"}, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stderr is not None
    first = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
    found = re.search(r"(http://127\.0\.0\.1:(\d+))", first)
    assert found, first
    url, port = found.group(1), found.group(2)
    said = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
    assert f"accepts Host: 127.0.0.1:{port}, [::1]:{port}, localhost:{port}" in said, said
    assert "http://localhost:8233" in said
    body = {"payloads": []}
    try:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            problem(await http.post("/decode", json=body, headers={"Host": f"evil.example:{port}"}), 403)
            problem(await http.post("/decode", content=b'{"payloads": []}', headers={"Content-Type": "text/plain"}),
                    415)
            problem(await http.post("/decode", json=body, headers={"Origin": "http://evil.example"}), 403)
            ui = await http.post("/decode", json=body, headers={"Origin": "http://localhost:8233",
                                                                "X-Namespace": "default"})
            assert ui.status_code == 200 and ui.json() == {"payloads": []}
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)
