"""The embedded Temporal server's life, as `agentloop run` and `agentloop dev`
users meet it: a server that cannot start says why; Ctrl-C, SIGTERM, SIGHUP
and even SIGKILL leave no server behind and cancel the run for real; a server
an earlier command left running is found; `agentloop run` uses a running
`agentloop dev`. CLI subprocesses, real servers, processes found in /proc."""

from __future__ import annotations

import asyncio
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from agentloop import AgentClient
from agentloop.workers.devserver import DevServer, find_temporal_binary, free_port
from tests.helpers.cli import agentloop, agentloop_async, clean_env, read_until, start_run
from tests.helpers.paths import ROOT
from tests.helpers.polling import eventually
from tests.helpers.processes import process_gone, processes_with_argument, wait_until_gone


def data_file(tmp_path: Path) -> str:
    """The embedded server's SQLite file: its processes carry it in their command line."""
    return str(tmp_path / "home" / "temporal.db")


async def finish(proc: asyncio.subprocess.Process) -> tuple[str, str]:
    """Wait for a CLI subprocess (killed if it hangs) and return its stdout and stderr."""
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return out.decode(), err.decode()


# A server that cannot start -------------------------------------------------------------


async def test_dev_refuses_a_port_another_temporal_server_holds(tmp_path: Path, dev_server: DevServer) -> None:
    # The session's dev server plays the user's own `temporal server start-dev`.
    dev = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentloop.cli", "dev", "--headless", "--port", str(dev_server.port),
        cwd=ROOT, env=clean_env(tmp_path), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await finish(dev)
    assert dev.returncode == 2, err
    assert err.startswith(f"agentloop: cannot start the Temporal dev server: its gRPC port 127.0.0.1:{dev_server.port} "
                          "is in use")
    assert "--port 0 for a free one" in err
    assert "TEMPORAL_ADDRESS" not in out  # no banner for a server that is not ours
    assert not processes_with_argument(data_file(tmp_path))


def test_an_embedded_server_that_exits_at_start_says_why(tmp_path: Path, workspace: Path) -> None:
    (tmp_path / "home" / "temporal.db").mkdir(parents=True)  # SQLite cannot open a directory
    proc = agentloop("run", "look", "--model", "scripted:demo", "--workspace", str(workspace),
                     env=clean_env(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("agentloop: the Temporal dev server exited with code 1 at start; it said:\n  ")
    assert "unable to open database file" in proc.stderr  # the server's own words, from its log
    assert f"(its whole output is in {tmp_path / 'home' / 'temporal.log'})" in proc.stderr
    assert "Traceback" not in proc.stderr


# Every way `agentloop run` ends stops what it started ------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
async def test_a_signal_cancels_the_run_and_stops_the_embedded_server(
    tmp_path: Path, workspace: Path, sig: signal.Signals
) -> None:
    env = clean_env(tmp_path)
    run_id = f"sig-{sig.name.lower()}"
    run = await start_run("write it", "scripted:cli-ops-write", workspace, env, "--run-id", run_id)
    try:
        assert run.stdout is not None
        await read_until(run.stdout, "  deny:    ")  # waiting for an approval
        assert len(processes_with_argument(data_file(tmp_path))) == 1  # its embedded server
        run.send_signal(sig)
    finally:
        _, err = await finish(run)
    assert run.returncode == 128 + sig, err
    assert f"run {run_id} cancelled; `agentloop show {run_id}` shows where it stopped" in err
    assert await wait_until_gone(data_file(tmp_path)) == []
    assert not (tmp_path / "home" / "server.address").exists()

    # The next command starts a server on the same data, where the run ended cancelled.
    again = agentloop("run", "write it", "--model", "scripted:demo", "--workspace", str(workspace),
                      "--run-id", run_id, env=env, cwd=tmp_path)
    assert again.returncode == 2
    assert again.stderr.startswith(f"agentloop: run {run_id} has already ended (cancelled, ")
    assert "--allow-reuse" in again.stderr
    assert await wait_until_gone(data_file(tmp_path)) == []


async def test_a_killed_run_leaves_no_server_and_the_next_run_works(tmp_path: Path, workspace: Path) -> None:
    env = clean_env(tmp_path)
    run = await start_run("write it", "scripted:cli-ops-write", workspace, env, "--run-id", "killed")
    try:
        assert run.stdout is not None
        await read_until(run.stdout, "  deny:    ")
        run.kill()  # SIGKILL: nothing runs in the command any more
    finally:
        await finish(run)
    # The server got SIGTERM when its parent died.
    assert await wait_until_gone(data_file(tmp_path)) == []
    # The address file it left is seen as stale by a command that acts (one that reads starts the server).
    stopping = agentloop("stop", "killed", env=env, cwd=tmp_path)
    assert stopping.returncode == 2 and "the agentloop command that wrote" in stopping.stderr
    assert "has ended" in stopping.stderr
    demo = agentloop("run", "look", "--model", "scripted:demo", "--workspace", str(workspace), env=env, cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr


# A server that outlived its command ------------------------------------------------------


def test_a_server_an_earlier_command_left_running_is_stopped_first(tmp_path: Path, workspace: Path) -> None:
    home = tmp_path / "home"
    # What an agentloop command killed before it could stop its server leaves behind.
    stale = DevServer(db_file=home / "temporal.db", log_file=home / "temporal.log").start()
    try:
        proc = agentloop("run", "look", "--model", "scripted:demo", "--workspace", str(workspace),
                         env=clean_env(tmp_path), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert (f"agentloop: stopping the Temporal server (pid {stale.pid}) that an earlier agentloop command "
                f"left running on {home / 'temporal.db'}") in proc.stderr
        assert stale.pid is not None and process_gone(stale.pid)
    finally:
        stale.stop()


async def test_a_server_agentloop_did_not_start_on_its_data_is_reported(tmp_path: Path, workspace: Path) -> None:
    db = tmp_path / "home" / "temporal.db"
    db.parent.mkdir()
    port = free_port()
    foreign = subprocess.Popen(
        [find_temporal_binary(), "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(port),
         "--db-filename", str(db), "--log-level", "error"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        await eventually(lambda: _accepts(port), f"the server to accept on port {port}")
        proc = agentloop("run", "look", "--model", "scripted:demo", "--workspace", str(workspace),
                         env=clean_env(tmp_path), cwd=tmp_path)
        assert proc.returncode == 2
        assert proc.stderr == (f"agentloop: a Temporal server that agentloop did not start (pid {foreign.pid}) is "
                               f"using {db}; stop it (kill {foreign.pid}) and try again, or set AGENTLOOP_HOME to "
                               "another directory\n")
        assert foreign.poll() is None  # not ours to stop
    finally:
        foreign.terminate()
        foreign.wait(timeout=30)


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


# `agentloop run` next to `agentloop dev` and another `agentloop run` ---------------------


async def test_run_uses_the_server_of_a_running_dev(tmp_path: Path, workspace: Path) -> None:
    env = clean_env(tmp_path)  # no TEMPORAL_ADDRESS anywhere
    dev = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentloop.cli", "dev", "--headless", "--port", "0", "--workspace", str(workspace),
        cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert dev.stdout is not None
        banner = await read_until(dev.stdout, "agentloop list --status awaiting_approval")
        address = re.search(r"export TEMPORAL_ADDRESS=(\S+)", banner).group(1)
        assert re.fullmatch(r"127\.0\.0\.1:\d+", address) and not address.endswith(":0")  # --port 0: a free port

        run = await agentloop_async("run", "look", "--model", "scripted:demo", "--workspace", str(workspace),
                                    "--run-id", "on-dev", env=env)
        assert run.code == 0, run.err
        assert f"using the Temporal server of `agentloop dev` (pid {dev.pid}) at {address}: its worker runs this run" \
            in run.err
        result = await (await AgentClient.connect(address)).get_handle("on-dev").result()
        assert result.status == "completed"
    finally:
        dev.send_signal(signal.SIGINT)
        _, dev_err = await finish(dev)
    assert dev.returncode == 0, dev_err
    assert "stopping the worker and the Temporal server" in dev_err
    assert await wait_until_gone(data_file(tmp_path)) == []


async def test_a_second_run_is_told_the_address_of_the_run_that_holds_the_server(
    tmp_path: Path, workspace: Path
) -> None:
    env = clean_env(tmp_path)
    home = tmp_path / "home"
    first = await start_run("write it", "scripted:cli-ops-write", workspace, env, "--run-id", "holder")
    try:
        assert first.stdout is not None
        await read_until(first.stdout, "  deny:    ")
        address = (home / "server.address").read_text().strip()
        second = await agentloop_async("run", "look", "--model", "scripted:demo", "--workspace", str(workspace),
                                       env=env)
        assert second.code == 2
        assert second.err.startswith(f"agentloop: `agentloop run` (pid {first.pid}) is using the embedded Temporal "
                                     f"server in {home} at {address}, and stops it when its run ends; ")
        assert "`agentloop dev`" in second.err
        first.send_signal(signal.SIGTERM)
    finally:
        await finish(first)
    assert first.returncode == 128 + signal.SIGTERM


# AgentClient next to `agentloop dev` -----------------------------------------------------

#: A user's script: AgentClient.connect() with no address, then a run on the queue it chose.
CONNECT_SCRIPT = """
import asyncio, logging, sys
from agentloop import AgentClient, AgentSpec

async def main():
    client = await AgentClient.connect()
    print("queue", client.task_queue)
    spec = AgentSpec(model="scripted:demo", tools=["list_dir", "read_file"], default_permission="allow",
                     workspace=sys.argv[1])
    handle = await client.start(spec, "look")
    print("status", (await handle.result()).status)

logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
asyncio.run(main())
"""


async def test_agent_client_connects_to_a_running_dev_and_says_so(tmp_path: Path, workspace: Path) -> None:
    env = clean_env(tmp_path)  # no TEMPORAL_ADDRESS anywhere
    env.pop("AGENTLOOP_TASK_QUEUE", None)
    script = tmp_path / "connect.py"
    script.write_text(CONNECT_SCRIPT)
    before = subprocess.run([sys.executable, str(script), str(workspace)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert before.returncode == 1
    assert ("agentloop.shared.base.errors.UserError: no Temporal address: pass one, set TEMPORAL_ADDRESS, or start "
            f"`agentloop dev` in another terminal (none is serving {tmp_path / 'home'})") in before.stderr
    dev = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentloop.cli", "dev", "--headless", "--port", "0", "--workspace", str(workspace),
        cwd=ROOT, env={**env, "AGENTLOOP_TASK_QUEUE": "dev-queue"}, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert dev.stdout is not None
        banner = await read_until(dev.stdout, "agentloop list --status awaiting_approval")
        address = re.search(r"export TEMPORAL_ADDRESS=(\S+)", banner).group(1)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(script), str(workspace), cwd=tmp_path, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await finish(proc)
        assert proc.returncode == 0, err
        assert out.splitlines() == ["queue dev-queue", "status completed"]
        assert (f"agentloop.client.agent_client: connected to Temporal at {address} (from the running "
                f"`agentloop dev` (pid {dev.pid}); namespace 'default', task queue 'dev-queue')") in err
    finally:
        dev.send_signal(signal.SIGINT)
        _, dev_err = await finish(dev)
    assert dev.returncode == 0, dev_err


async def start_dev(env: dict[str, str], workspace: Path) -> tuple[asyncio.subprocess.Process, str]:
    """`agentloop dev` on a free port, its banner read; returns it and its address."""
    dev = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentloop.cli", "dev", "--headless", "--port", "0", "--workspace", str(workspace),
        cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    assert dev.stdout is not None
    banner = await read_until(dev.stdout, "agentloop list --status awaiting_approval")
    return dev, re.search(r"export TEMPORAL_ADDRESS=(\S+)", banner).group(1)


async def test_dev_prints_one_line_per_failed_run_and_logs_the_traceback(tmp_path: Path, workspace: Path) -> None:
    env = clean_env(tmp_path)
    dev, _ = await start_dev(env, workspace)
    try:
        assert dev.stderr is not None
        for run_id in ("broken-1", "broken-2"):
            run = await agentloop_async("run", "look", "--model", "scripted:no-such-model", "--workspace",
                                        str(workspace), "--run-id", run_id, env=env)
            assert run.code == 1, run.err
        said = await read_until(dev.stderr, "run broken-2 failed")
    finally:
        dev.send_signal(signal.SIGINT)
        _, rest = await finish(dev)
    said += rest
    assert dev.returncode == 0, said
    assert "Traceback" not in said
    lines = [line for line in said.splitlines() if "broken-" in line]
    assert [line.split()[1] for line in lines] == ["broken-1", "broken-2"], said
    assert all("no scripted model named 'no-such-model'" in line for line in lines)
    log = (tmp_path / "home" / "dev.log").read_text()
    assert "Traceback" in log and "no-such-model" in log


async def test_run_with_imports_a_key_or_local_worker_runs_on_its_own_worker_beside_dev(
    tmp_path: Path, workspace: Path
) -> None:
    from tests.helpers.servers.provider_servers import (
        OpenAIServer,
        openai_completion,
        openai_completion_chunks,
        openai_stream,
    )

    env = clean_env(tmp_path)  # dev has no provider key and imports nothing
    dev, address = await start_dev(env, workspace)
    try:
        # A scripted model only this command's --import registers.
        imported = await agentloop_async("run", "write it", "--model", "scripted:cli-ops-write", "--yes",
                                         "--import", "tests.helpers.cli", "--workspace", str(workspace),
                                         "--run-id", "own-import", env=env)
        assert imported.code == 0, imported.err
        assert (f"using the Temporal server of `agentloop dev` (pid {dev.pid}) at {address}, with a worker in this "
                "process on task queue 'agentloop-run-own-import' (for --import)") in imported.err
        # A provider key only this command has.
        with OpenAIServer() as server:
            server.enqueue(openai_stream(openai_completion_chunks(openai_completion(content="Keyed."), pieces=2)))
            keyed = await agentloop_async("run", "answer", "--model", "openai:gpt-test", "--tool", "read_file",
                                          "--workspace", str(workspace), "--run-id", "own-key",
                                          env={**env, "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": server.base_url})
        assert keyed.code == 0, keyed.err
        assert keyed.out.endswith("Keyed.\n")
        assert "(for OPENAI_API_KEY, OPENAI_BASE_URL)" in keyed.err
        # --local-worker means this process's worker, alone.
        local = await agentloop_async("run", "look", "--model", "scripted:demo", "--local-worker",
                                      "--workspace", str(workspace), "--run-id", "own-local", env=env)
        assert local.code == 0, local.err
        client = await AgentClient.connect(address)
        for run_id in ("own-import", "own-key", "own-local"):
            description = await client.temporal.get_workflow_handle(run_id).describe()
            assert description.task_queue == f"agentloop-run-{run_id}"
        # Without them, dev's worker runs the run, as before.
        plain = await agentloop_async("run", "look", "--model", "scripted:demo", "--workspace", str(workspace),
                                      "--run-id", "on-dev-queue", env=env)
        assert plain.code == 0, plain.err
        assert (await client.temporal.get_workflow_handle("on-dev-queue").describe()).task_queue == "agentloop"
    finally:
        dev.send_signal(signal.SIGINT)
        await finish(dev)
    assert dev.returncode == 0


async def test_show_after_ctrl_c_starts_the_embedded_server_and_counts_the_step(
    tmp_path: Path, workspace: Path
) -> None:
    env = clean_env(tmp_path)
    run = await start_run("write it", "scripted:cli-ops-write", workspace, env, "--run-id", "cc-1")
    try:
        assert run.stdout is not None
        await read_until(run.stdout, "  deny:    ")  # step 1 asked its LLM, then waits for an approval
        run.send_signal(signal.SIGINT)
    finally:
        _, err = await finish(run)
    assert "`agentloop show cc-1` shows where it stopped" in err
    assert await wait_until_gone(data_file(tmp_path)) == []

    # What the Ctrl-C line suggests works, with no server running.
    show = await agentloop_async("show", "cc-1", env=env)
    assert show.code == 0, show.err
    assert "Traceback" not in show.err
    assert "  status:   cancelled" in show.out
    assert "  steps:    1\n" in show.out and "1 LLM request" in show.out, show.out
    assert await wait_until_gone(data_file(tmp_path)) == []  # and it stops what it started
    assert not (tmp_path / "home" / "server.address").exists()
    # Every read command does the same: `list` too.
    listed = await agentloop_async("list", env=env)
    assert listed.code == 0, listed.err
    assert "no Temporal server is running; starting the embedded one" in listed.err
    assert "cc-1" in listed.out and "cancelled" in listed.out, listed.out
    assert await wait_until_gone(data_file(tmp_path)) == []
    schedules = await agentloop_async("schedule", "list", env=env)
    assert schedules.code == 0 and schedules.out == "no schedules\n", schedules.err
    assert await wait_until_gone(data_file(tmp_path)) == []


async def test_serve_beside_dev_links_dev_s_temporal_ui_and_stops_quietly(tmp_path: Path, workspace: Path) -> None:
    env = clean_env(tmp_path)
    dev = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentloop.cli", "dev", "--port", "0", "--ui-port", "0", "--workspace", str(workspace),
        cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert dev.stdout is not None
        banner = await read_until(dev.stdout, "agentloop list --status awaiting_approval")
        ui = re.search(r"Temporal UI: +(\S+)", banner).group(1)
        # Its UI answers loopback names only: a page rebound to 127.0.0.1 reads and starts nothing.
        rebound = {"Host": f"evil.example:{ui.rstrip('/').rsplit(':', 1)[1]}"}
        start = {"workflowType": {"name": "AgentRunWorkflow"}, "taskQueue": {"name": "rebound"}}
        async with httpx.AsyncClient(base_url=ui, timeout=30) as browser:
            # The UI answers 503 until it has connected to the server, which may come after the banner.
            async def ui_lists() -> bool:
                return (await browser.get("/api/v1/namespaces/default/workflows")).status_code == 200
            await eventually(ui_lists, "the Temporal UI to list workflows through its door")
            csrf = {"X-CSRF-TOKEN": browser.cookies.get("_csrf") or ""}
            listed = await browser.get("/api/v1/namespaces/default/workflows", headers=rebound)
            assert listed.status_code == 403 and "DNS rebinding" in listed.text, listed.text
            started = await browser.post("/api/v1/namespaces/default/workflows/rebound", json=start,
                                         headers={**rebound, **csrf})
            assert started.status_code == 403, started.text
            described = await browser.get("/api/v1/namespaces/default/workflows/rebound")
            assert described.status_code == 404, described.text
        for stop_signal in (signal.SIGTERM, signal.SIGINT):
            serve = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "agentloop.cli", "serve", "--port", "0", cwd=ROOT, env=env,
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            try:
                assert serve.stderr is not None
                said = await read_until(serve.stderr, "agentloop serve: http://")
                while not (found := re.search(r"agentloop serve: (http://\S+)/ ", said)):
                    said += (await asyncio.wait_for(serve.stderr.readline(), 30)).decode()
                url = found.group(1)
                async with httpx.AsyncClient(base_url=url, timeout=30) as http:
                    page = (await http.get("/runs/some-run")).text
                    if stop_signal == signal.SIGTERM:
                        # A run naming no workspace gets dev's worker's, and the answer says so.
                        started = await http.post("/v1/runs", json={"spec": {"model": "scripted:demo"},
                                                                    "input": "hello"})
                        assert started.status_code == 201, started.text
                        assert started.json()["workspace"] == str(workspace)
                # The console links runs to the UI `agentloop dev` printed.
                assert f"{ui.rstrip('/')}/namespaces/default/workflows/some-run" in page, page
                serve.send_signal(stop_signal)
            finally:
                _, err = await finish(serve)
            # Ctrl-C or SIGTERM: it stops quietly, with 128 + the signal's number.
            assert serve.returncode == 128 + stop_signal, err
            assert "Traceback" not in err and "CancelledError" not in err, err
    finally:
        dev.send_signal(signal.SIGINT)
        await finish(dev)
    assert dev.returncode == 0
