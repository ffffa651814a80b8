"""A sentence, never a traceback: bad input and unreachable servers on every
`agentloop` command (CLI subprocesses against the session's dev server), run
ids already in use (also through `AgentClient.start`), `--version`, and the
worker's start and stop lines."""

from __future__ import annotations

import asyncio
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from agentloop import AgentClient, AgentSpec
from agentloop.activities.shell_sandbox import sandbox
from agentloop.client.runs import RunIdInUse
from agentloop.workers.devserver import DevServer, free_port
from tests.helpers.cli import agentloop_async, clean_env, read_until, write_script
from tests.helpers.paths import ROOT
from tests.helpers.runs import wait_status

# Run ids in use -------------------------------------------------------------------------


async def test_run_with_the_id_of_a_running_run_says_so(
    agent_client: AgentClient, worker, workspace: Path, env: dict[str, str]
) -> None:
    async with worker():
        handle = await agent_client.start(AgentSpec(model=write_script(), tools=["write_file"]), "write it")
        await wait_status(handle, "awaiting_approval")
        proc = await agentloop_async("run", "again", "--model", "scripted:demo", "--workspace", str(workspace),
                               "--run-id", handle.run_id, env=env)
        with pytest.raises(RunIdInUse) as raised:
            await agent_client.start(AgentSpec(model="scripted:demo"), "again", run_id=handle.run_id, allow_reuse=True)
        await handle.cancel()
    assert proc.code == 2 and "Traceback" not in proc.err
    assert proc.err == (f"agentloop: run {handle.run_id} is already running; follow it with `agentloop watch "
                        f"{handle.run_id}`, cancel it with `agentloop cancel {handle.run_id}`, or choose another "
                        "--run-id\n")
    assert raised.value.running and raised.value.status == "running"  # allow_reuse never takes a running id


async def test_the_id_of_a_finished_run_is_reused_only_when_allowed(
    agent_client: AgentClient, worker, workspace: Path, env: dict[str, str]
) -> None:
    run_id = f"reuse-{uuid.uuid4().hex[:8]}"
    async with worker():
        first = await agent_client.run(AgentSpec(model="scripted:demo", tools=["list_dir", "read_file"]), "look",
                                       run_id=run_id)
        with pytest.raises(RunIdInUse) as raised:
            await agent_client.start(AgentSpec(model="scripted:demo"), "again", run_id=run_id)
        refused = await agentloop_async("run", "again", "--model", "scripted:demo", "--workspace", str(workspace),
                                  "--run-id", run_id, "--local-worker", env=env)
        reused = await agentloop_async("run", "again", "--model", "scripted:demo", "--workspace", str(workspace),
                                 "--run-id", run_id, "--allow-reuse", "--local-worker", env=env)
    assert first.status == "completed"
    assert (raised.value.running, raised.value.status) == (False, "completed")
    assert "allow_reuse=True" in str(raised.value)
    assert refused.code == 2
    assert refused.err.startswith(f"agentloop: run {run_id} has already ended (completed, ")
    assert "pass --allow-reuse to start a new run under this id" in refused.err
    assert reused.code == 0, reused.err
    assert "You asked: 'again'" in reused.out


# Unreachable servers ---------------------------------------------------------------------


@pytest.mark.parametrize("command", [
    ["run", "x", "--model", "scripted:demo"],
    ["worker"],
    ["list"],
    ["show", "some-run"],
    ["approve", "some-run", "call_0_0"],
    ["watch", "some-run"],
    ["cancel", "some-run"],
], ids=lambda c: c[0])
async def test_an_unreachable_temporal_address_is_a_sentence(tmp_path: Path, command: list[str]) -> None:
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    proc = await agentloop_async(*command, env=clean_env(tmp_path, TEMPORAL_ADDRESS=address))
    assert proc.code == 2, proc.err
    assert proc.err == (f"agentloop: cannot connect to Temporal at {address} (from TEMPORAL_ADDRESS; namespace "
                        "'default', plaintext): connection refused; check that the server is running and the "
                        "address is right\n")


# Every command, bad input ------------------------------------------------------------------

#: (arguments, extra environment, exit code, what stderr says). The run and
#: watch commands' own bad input is covered where they are tested; this is
#: what the audit of every command for tracebacks found, and its neighbours.
BAD_INPUT: list[tuple[list[str], dict[str, str], int, str]] = [
    (["run", "  ", "--model", "scripted:demo"], {}, 2, "agentloop: the instruction is empty: say what the agent"),
    (["run", "x", "--model", "scripted:demo", "--max-steps", "0"], {}, 2,
     "agentloop: max_steps: Input should be greater than or equal to 1"),
    (["run", "x", "--model", "scripted:demo", "--run-id", ""], {}, 2, "argument --run-id: a run id is not empty"),
    (["run", "x", "--model", "scripted:demo", "--workspace", "/no/such/dir"], {}, 2,
     "agentloop: --workspace /no/such/dir is not a directory"),
    (["run", "x", "--model", "gpt-4"], {}, 2, "agentloop: model: model 'gpt-4' must be 'provider:model'"),
    (["run", "x", "--model", "scripted:demo", "--import", "no_such_module_here"], {}, 2,
     "agentloop: could not import 'no_such_module_here' for the worker"),
    (["show", ""], {}, 2, "argument run: a run id is not empty"),
    (["list", "--limit", "0"], {}, 2, "argument --limit: 0: give 1 or more"),
    (["list", "--query", "(("], {}, 2, "agentloop: the server rejected the query"),
    (["worker", "--workspace", "/no/such/dir"], {}, 2, "agentloop: --workspace /no/such/dir is not a directory"),
    (["worker", "--role", "tools"], {"OPENAI_API_KEY": "sk-x"}, 2,
     "agentloop: a tools worker must not hold provider keys, but OPENAI_API_KEY is set"),
    (["worker"], {"AGENTLOOP_WORKER_ROLE": "boss"}, 2,
     "agentloop: worker role 'boss' is not one of all, models, tools"),
    (["dev", "--port", "70000"], {}, 2, "argument --port: 70000 is not a port number"),
    (["dev"], {}, 2, "agentloop: TEMPORAL_ADDRESS names a Temporal server"),
    (["submit", "some-run"], {}, 2, "agentloop: give at least one output"),
    (["approve", "some-run", "c", "--deny", "--result", "x"], {}, 2, "agentloop: --deny takes --reason, not --result"),
    (["watch", "some-run", "--from", "-1"], {}, 2, "agentloop: --from -1: an offset is 0 or more"),
    (["list"], {"TEMPORAL_NAMESPACE": "no-such-namespace"}, 1,
     "agentloop: the Temporal server has no such namespace"),
    (["show", "some-run"], {"TEMPORAL_NAMESPACE": "no-such-namespace"}, 1,
     "agentloop: the Temporal server has no such namespace"),
    (["run", "x", "--model", "scripted:demo", "--local-worker"], {"TEMPORAL_NAMESPACE": "no-such-namespace"}, 1,
     "agentloop: the Temporal server has no such namespace"),
    (["list"], {"TEMPORAL_PROFILE": "no-such-profile"}, 2,
     "agentloop: cannot read Temporal's client configuration ("),
    (["list"], {"TEMPORAL_TLS_CLIENT_CERT_PATH": "/no/such/cert.pem", "TEMPORAL_TLS_CLIENT_KEY_PATH": "/no/key.pem"},
     2, "agentloop: cannot read the TLS file /no/such/cert.pem: No such file or directory"),
]


@pytest.mark.parametrize("case", BAD_INPUT, ids=lambda c: " ".join(c[0])[:40] + " " + " ".join(c[1]))
async def test_bad_input_is_a_sentence(env: dict[str, str], workspace: Path, case: Any) -> None:
    args, extra, code, said = case
    if args[0] == "run" and "--workspace" not in args:
        args = [*args, "--workspace", str(workspace)]
    proc = await agentloop_async(*args, env={**env, **extra})
    assert "Traceback" not in proc.err, proc.err
    assert proc.code == code, proc.err
    assert said in proc.err


async def test_bad_temporal_config_file_is_a_sentence(tmp_path: Path) -> None:
    config = tmp_path / "temporal.toml"
    config.write_text("[profile.default\naddress = \n")
    proc = await agentloop_async("list", env=clean_env(tmp_path, TEMPORAL_CONFIG_FILE=str(config)))
    assert proc.code == 2 and "Traceback" not in proc.err
    assert proc.err.startswith(f"agentloop: cannot read Temporal's client configuration ({config}, profile 'default'):")


async def test_a_data_directory_that_cannot_be_made_is_a_sentence(tmp_path: Path, workspace: Path) -> None:
    home = tmp_path / "not-a-directory"
    home.write_text("")
    run = await agentloop_async("run", "x", "--model", "scripted:demo", "--workspace", str(workspace),
                          env=clean_env(tmp_path, AGENTLOOP_HOME=str(home)))
    dev = await agentloop_async("dev", "--data-dir", str(home), env=clean_env(tmp_path))
    for proc in (run, dev):
        assert proc.code == 2 and "Traceback" not in proc.err
        assert proc.err.startswith(f"agentloop: cannot keep the embedded server's data in {home}: File exists; ")


# --version and the worker's lines ----------------------------------------------------------


async def test_version(tmp_path: Path) -> None:
    from importlib.metadata import version

    proc = await agentloop_async("--version", env=clean_env(tmp_path))
    assert proc.code == 0
    assert proc.out.startswith(f"agentloop {version('agentloop')} (Python ")
    assert f"temporalio {version('temporalio')}" in proc.out


async def test_worker_says_where_it_polls_and_when_it_stopped(
    tmp_path: Path, dev_server: DevServer, task_queue: str
) -> None:
    env = clean_env(tmp_path, TEMPORAL_ADDRESS=dev_server.address, AGENTLOOP_TASK_QUEUE=task_queue)
    worker = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentloop.cli", "worker", "--import", "tests.helpers.cli", cwd=ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert worker.stderr is not None
        started = await read_until(worker.stderr, "allowlisted environment\n")
        worker.send_signal(signal.SIGTERM)
        out, rest = await asyncio.wait_for(worker.communicate(), 60)
    finally:
        if worker.returncode is None:
            worker.kill()
            await worker.wait()
    assert started == (f"agentloop worker: role all, polling task queues {task_queue!r} and {task_queue + '-tools'!r} "
                       f"on {dev_server.address} (namespace 'default', plaintext, unversioned); tools apply_patch, "
                       "grep_files, list_dir, read_file, shell_command, view_image, write_file; model calls of lanes "
                       f"openai, anthropic, scripted on {task_queue + '-llm-<lane>'!r}\n"
                       # The shell's confinement, on a line of its own
                       # (tests/process/workers/test_security.py for its words).
                       "agentloop worker: shell sandbox: namespace; files: confined by Landlock ABI "
                       f"{sandbox.landlock_support()}: the workspace read-write, system directories read-only, a "
                       "private /tmp, /run hidden; network: none (a loopback of its own); processes: own PID "
                       "namespace and /proc, no capabilities, allowlisted environment\n")
    assert worker.returncode == 0
    assert rest.decode().splitlines()[-1] == "agentloop worker: stopped"
    assert out == b""


async def test_a_models_worker_names_the_tools_queue(tmp_path: Path, dev_server: DevServer, task_queue: str) -> None:
    env = clean_env(tmp_path, TEMPORAL_ADDRESS=dev_server.address, AGENTLOOP_TASK_QUEUE=task_queue)
    worker = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentloop.cli", "worker", "--role", "models", cwd=ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert worker.stderr is not None
        started = await read_until(worker.stderr, "\n")
        worker.send_signal(signal.SIGINT)
        await asyncio.wait_for(worker.communicate(), 60)
    finally:
        if worker.returncode is None:
            worker.kill()
            await worker.wait()
    assert started == (f"agentloop worker: role models, polling task queue {task_queue!r} on {dev_server.address} "
                       f"(namespace 'default', plaintext, unversioned); tools run by a tools worker on "
                       f"{task_queue + '-tools'!r}; model calls of lanes openai, anthropic, scripted on "
                       f"{task_queue + '-llm-<lane>'!r}\n")


async def test_a_misspelt_scripted_model_is_refused_before_the_run_starts(
    tmp_path: Path, workspace: Path, env: dict[str, str], agent_client: AgentClient
) -> None:
    # On the embedded server, and with --local-worker on a server of its own: this process's worker runs it.
    for where, extra in ((clean_env(tmp_path), []), (env, ["--local-worker"])):
        run_id = f"typo-{uuid.uuid4().hex[:8]}"
        done = await agentloop_async("run", "hello", "--model", "scripted:demoo", "--workspace", str(workspace),
                                     "--run-id", run_id, *extra, env=where)
        assert done.code == 2, done.err
        assert done.err.startswith("agentloop: --model scripted:demoo: no scripted model named 'demoo' (did you mean "
                                   "scripted:demo?); registered here: "), done.err
        assert "Traceback" not in done.err
    # Nothing was started.
    assert [r async for r in agent_client.temporal.list_workflows(f'WorkflowId="{run_id}"')] == []
