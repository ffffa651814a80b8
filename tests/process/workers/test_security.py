"""Tools cannot read the provider keys, and shell commands cannot outlive
their call.

Canary keys sit in the environment of the process that calls models; a
scripted model then runs every known trick through ``shell_command``
(``tests/helpers/fixtures/security_fixture.py``) in real runs on a real dev server, in each
mode agentloop ships: the embedded default (``agentloop run``, namespace
sandbox), bubblewrap, and a role split (models and tools worker
subprocesses). The canary must appear nowhere: not in tool results, the
run's history (payloads decoded), its events, or any process's output.

A mode whose prerequisite is missing fails with the reason, except
bubblewrap: without it the bwrap tests skip with the install command, and fail
when ``AGENTLOOP_REQUIRE_BWRAP=1`` (``.ci/run`` installs bubblewrap and sets it,
so CI never skips them).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Worker

from agentloop import AgentClient, AgentRunFailed, AgentSpec
from agentloop.activities.builtin_tools.shell_tool import shell_command
from agentloop.activities.shell_sandbox import sandbox
from agentloop.shared.base.errors import ToolError, UserError
from agentloop.testing import call, calls, reply, script
from agentloop.tools.tool_context import ToolContext
from agentloop.workers.devserver import DevServer
from agentloop.workers.worker import build_worker
from tests.helpers import cli
from tests.helpers.agents import awaiting, write
from tests.helpers.cli import agentloop
from tests.helpers.fixtures.security_fixture import TRICKS
from tests.helpers.optional import missing
from tests.helpers.paths import ROOT
from tests.helpers.processes import (
    processes_with_argument,
    unique_sleep,
    wait_until_gone,
    wait_until_running,
)
from tests.helpers.runs import local_activities, scheduled_queues, task_failures, wait_state

#: The environment without Temporal, provider, agentloop and database settings.
clean_env = partial(cli.clean_env, drop=("AGENTLOOP_", "DATABASE_URL"))

# Helpers ---------------------------------------------------------------------------


def canaries() -> tuple[str, dict[str, str]]:
    """A unique token, and provider keys and a database URL that carry it."""
    token = uuid.uuid4().hex
    return token, {
        "OPENAI_API_KEY": f"sk-canary-{token}",
        "ANTHROPIC_API_KEY": f"sk-ant-canary-{token}",
        "DATABASE_URL": f"postgres://app:canary-{token}@db.internal/app",
    }


def history_text(history: WorkflowHistory) -> str:
    """The history as JSON, followed by every payload decoded (payloads are base64 in it)."""
    raw = history.to_json()
    decoded: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "data" and isinstance(value, str):
                    try:
                        decoded.append(base64.b64decode(value).decode("utf-8", "replace"))
                    except ValueError:
                        pass
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(json.loads(raw))
    return raw + "\n" + "\n".join(decoded)


def tool_results(jsonl: str) -> list[dict]:
    """The results of ``agent.tool.execution.completed`` events, in order."""
    events = [json.loads(line) for line in jsonl.splitlines() if line.strip()]
    return [e["result"] for e in events if e["type"] == "agent.tool.execution.completed"]


def check_trick_results(results: list[dict], token: str) -> None:
    """Every trick ran (no error) and printed something, none of it the canary."""
    # Calls run in parallel; the scripted model numbers them call_<step>_<index>.
    shell = sorted((r for r in results if r["name"] == "shell_command"), key=lambda r: int(r["id"].rsplit("_", 1)[1]))
    assert len(shell) == len(TRICKS), [r["content"][:200] for r in results]
    for trick, result in zip(TRICKS, shell, strict=True):
        assert not result["is_error"], (trick, result["content"][:500])
        assert result["content"].startswith("exit code: "), (trick, result["content"][:500])
        assert token not in result["content"], f"the canary leaked through {trick!r}"
    by_trick = dict(zip(TRICKS, (r["content"] for r in shell), strict=True))
    # Not vacuous: the commands ran and read an environment, just not the worker's.
    assert "PATH=" in by_trick["env"]
    assert "PATH=" in by_trick["cat /proc/$PPID/environ"]
    assert "PATH=" in by_trick["cat /proc/self/environ /proc/$$/environ; echo; echo pid=$$ ppid=$PPID"]


def require_namespaces() -> None:
    launcher = sandbox._namespace_launcher()
    if not isinstance(launcher, sandbox.Launcher):
        pytest.fail(f"the namespace sandbox is unavailable on this machine ({launcher}); it is the default, "
                    "so this test must run where user and PID namespaces are allowed")


#: Set to 1 (``.ci/run`` does) to make the bwrap tests fail, not skip, without bubblewrap.
REQUIRE_BWRAP = "AGENTLOOP_REQUIRE_BWRAP"


def require_bwrap() -> None:
    """Skip without bubblewrap (with the install command), or fail when
    ``AGENTLOOP_REQUIRE_BWRAP=1``; fail when it is there but cannot work."""
    if shutil.which("bwrap") is None:
        missing("bubblewrap is not installed, so the bwrap sandbox is not tested: apt-get install -y bubblewrap",
                REQUIRE_BWRAP)
    problem = sandbox._bwrap_problem()
    if problem is not None:
        pytest.fail(f"bubblewrap cannot create its sandbox here: {problem}")


@pytest.fixture
def fresh_probes() -> Iterator[None]:
    """Forget probed launchers before and after (a test changes what works)."""
    for probe in (sandbox._namespace_launcher, sandbox._bwrap_problem, sandbox._none_launcher):
        probe.cache_clear()
    yield
    for probe in (sandbox._namespace_launcher, sandbox._bwrap_problem, sandbox._none_launcher):
        probe.cache_clear()


# Canary keys through real runs -----------------------------------------------------


@pytest.mark.parametrize("mode", ["default", "bwrap"])
async def test_embedded_run_cannot_read_the_provider_keys(mode: str, tmp_path: Path, workspace: Path) -> None:
    """`agentloop run` with no TEMPORAL_ADDRESS: embedded server, in-process
    worker holding the keys, shell in the sandbox."""
    require_namespaces() if mode == "default" else require_bwrap()
    token, secrets = canaries()
    env = clean_env(tmp_path, **secrets)
    if mode == "bwrap":
        env["AGENTLOOP_SHELL_SANDBOX"] = "bwrap"
    run_id = f"sec-{uuid.uuid4().hex[:8]}"
    proc = agentloop(
        "run", "read the keys", "--model", "scripted:security-tricks",
        "--import", "tests.helpers.fixtures.security_fixture",
        "--tool", "shell_command", "--yes", "--jsonl", "--run-id", run_id, "--workspace", str(workspace),
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_trick_results(tool_results(proc.stdout), token)
    assert token not in proc.stdout and token not in proc.stderr
    # The run's history, from the embedded server's SQLite file.
    with DevServer(db_file=tmp_path / "home" / "temporal.db") as server:
        await server.wait_ready()
        client = await Client.connect(server.address)
        text = history_text(await client.get_workflow_handle(run_id).fetch_history())
    assert "tried them all" in text and "PATH=" in text  # payloads were decoded
    assert token not in text


async def test_role_split_tools_worker_cannot_read_the_provider_keys(
    tmp_path: Path, workspace: Path, dev_server: DevServer, temporal_client: Client, task_queue: str,
    agent_client: AgentClient,
) -> None:
    """Keys only in a models worker; tools (shell and Python) in a tools
    worker subprocess whose environment has none."""
    require_namespaces()
    token, secrets = canaries()
    base = clean_env(tmp_path, TEMPORAL_ADDRESS=dev_server.address, AGENTLOOP_TASK_QUEUE=task_queue)
    logs = {name: (tmp_path / f"{name}.log").open("w+") for name in ("models", "tools")}
    workers = {
        "models": subprocess.Popen(
            [sys.executable, "-m", "agentloop.cli", "worker", "--role", "models",
             "--import", "tests.helpers.fixtures.security_fixture"],
            cwd=ROOT, env={**base, **secrets}, stdout=logs["models"], stderr=subprocess.STDOUT),
        "tools": subprocess.Popen(
            [sys.executable, "-m", "agentloop.cli", "worker", "--role", "tools",
             "--import", "tests.helpers.fixtures.security_fixture"],
            cwd=ROOT, env={**base, "AGENTLOOP_WORKSPACE": str(workspace)}, stdout=logs["tools"],
            stderr=subprocess.STDOUT),
    }
    try:
        run_id = f"sec-{uuid.uuid4().hex[:8]}"
        proc = await asyncio.to_thread(
            agentloop, "run", "read the keys", "--model", "scripted:security-split",
            "--tool", "shell_command", "--tool", "python_environ", "--yes", "--jsonl", "--run-id", run_id,
            "--workspace", str(workspace), env=base,
        )
        assert proc.returncode == 0, proc.stderr[-3000:] + "".join(open(f.name).read() for f in logs.values())
        results = tool_results(proc.stdout)
        check_trick_results(results, token)
        (python_tool,) = [r for r in results if r["name"] == "python_environ"]
        # The Python tool ran in the tools worker, whose environment has no keys.
        assert f"pid={workers['tools'].pid}" in python_tool["content"]
        assert token not in python_tool["content"]
        assert token not in proc.stdout + proc.stderr
        # Events, read again from the run's stream (the models worker answers).
        events = [e.model_dump_json() async for e in agent_client.events(run_id)]
        assert any("tried them all" in e for e in events) and not any(token in e for e in events)
        history = await temporal_client.get_workflow_handle(run_id).fetch_history()
    finally:
        for worker in workers.values():
            worker.send_signal(signal.SIGTERM)
        for worker in workers.values():
            try:
                worker.wait(timeout=40)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
    text = history_text(history)
    assert "tried them all" in text and token not in text
    queues = {}
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            queues.setdefault(attrs.activity_type.name, set()).add(attrs.task_queue.name)
    assert queues == {"resolve_tools": {f"{task_queue}-tools"}, "execute_tool": {f"{task_queue}-tools"},
                      "call_model": {f"{task_queue}-llm-scripted"}}
    for name, log in logs.items():
        log.seek(0)
        output = log.read()
        log.close()
        assert token not in output, f"the canary is in the {name} worker's output"


def test_tools_worker_refuses_to_start_with_provider_keys(tmp_path: Path, dev_server: DevServer) -> None:
    token, secrets = canaries()
    env = clean_env(tmp_path, TEMPORAL_ADDRESS=dev_server.address, OPENAI_API_KEY=secrets["OPENAI_API_KEY"])
    proc = agentloop("worker", "--role", "tools", env=env, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.startswith(
        "agentloop: a tools worker must not hold provider keys, but OPENAI_API_KEY is set in its environment; "
        "start it without them (e.g. env -u OPENAI_API_KEY agentloop worker --role tools)"
    ), proc.stderr
    assert token not in proc.stderr + proc.stdout
    # The same from the environment variable, and an unknown role.
    proc = agentloop("worker", env={**env, "AGENTLOOP_WORKER_ROLE": "tools"}, timeout=60)
    assert proc.returncode == 2 and "must not hold provider keys" in proc.stderr
    proc = agentloop("worker", env={**env, "AGENTLOOP_WORKER_ROLE": "shell"}, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "agentloop: worker role 'shell' is not one of all, models, tools (--role or AGENTLOOP_WORKER_ROLE)"
    )


async def test_build_worker_for_tools_refuses_provider_keys(
    temporal_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    def queue() -> str:  # one client may not build two workers for one queue
        return f"q-{uuid.uuid4().hex[:8]}"

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-x")
    with pytest.raises(UserError, match="ANTHROPIC_API_KEY is set"):
        build_worker(temporal_client, task_queue=queue(), role="tools")
    def served(worker: Worker) -> tuple[str, list[str]]:
        activities = worker.config(active_config=True)["activities"]
        return worker.task_queue, sorted(fn.__name__ for fn in activities)

    q = queue()
    assert served(build_worker(temporal_client, task_queue=q, role="models")) == (
        q, ["call_model", "current_deployment_version", "eval_score", "execute_tool_here", "quota_ledger",
            "resolve_guardrails",
            "resolve_tools_here", "run_guardrail"])
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    q = queue()
    assert served(build_worker(temporal_client, task_queue=q, role="tools")) == (
        f"{q}-tools", ["execute_tool", "load_context", "resolve_tools", "run_tool_hooks"])
    # Role all: the run's queue (tool activities too, for runs from before the
    # tools queue); the plugin serves <q>-tools beside it (tests/server/runs/test_plugin.py).
    q = queue()
    assert served(build_worker(temporal_client, task_queue=q)) == (
        q, ["call_model", "current_deployment_version", "eval_score", "execute_tool", "execute_tool_here",
            "load_context", "quota_ledger",
            "resolve_guardrails", "resolve_tools", "resolve_tools_here", "run_guardrail", "run_tool_hooks"])


# What a command sees -----------------------------------------------------------------


def test_command_environment_is_an_allowlist(monkeypatch: pytest.MonkeyPatch) -> None:
    environ = {
        "PATH": "/usr/bin:/bin", "HOME": "/home/w", "LANG": "C.UTF-8", "LC_ALL": "C", "TERM": "xterm",
        "OPENAI_API_KEY": "sk-x", "DATABASE_URL": "postgres://x", "SENTRY_DSN": "https://x@sentry",
        "GITHUB_TOKEN": "ghp_x", "HARMLESS": "1", "PIP_INDEX_URL": "https://user:pw@pypi.internal",
    }
    settings = sandbox.SandboxSettings.from_env({})
    assert sandbox.command_env(settings, environ) == {
        "PATH": "/usr/bin:/bin", "HOME": "/home/w", "LANG": "C.UTF-8", "LC_ALL": "C", "TERM": "xterm",
    }
    settings = sandbox.SandboxSettings.from_env({"AGENTLOOP_SHELL_ENV": "HARMLESS, PIP_INDEX_URL"})
    assert set(sandbox.command_env(settings, environ)) == {"PATH", "HOME", "LANG", "LC_ALL", "TERM", "HARMLESS",
                                                           "PIP_INDEX_URL"}
    bwrap = sandbox.SandboxSettings.from_env({"AGENTLOOP_SHELL_SANDBOX": "bwrap"})
    assert sandbox.command_env(bwrap, environ)["HOME"] == "/tmp"
    assert sandbox.command_env(settings, {})["PATH"] == sandbox.DEFAULT_PATH


@pytest.mark.parametrize(("environ", "message"), [
    ({"AGENTLOOP_SHELL_SANDBOX": "docker"},
     "AGENTLOOP_SHELL_SANDBOX='docker' is not a sandbox mode; use one of namespace, bwrap, none "
     "(unset: namespace, falling back to none with a warning)"),
    ({"AGENTLOOP_SHELL_SANDBOX": "bwrap", "AGENTLOOP_SHELL_NETWORK": "maybe"},
     "AGENTLOOP_SHELL_NETWORK='maybe': use off (the default: loopback only), web (outbound TCP to ports 80 and "
     "443) or on (the worker's network)"),
    ({"AGENTLOOP_SHELL_ENV": "PATH,OPENAI_API_KEY"},
     "AGENTLOOP_SHELL_ENV names provider keys (OPENAI_API_KEY); commands never get those: remove them from "
     "AGENTLOOP_SHELL_ENV"),
    ({"AGENTLOOP_SHELL_ENV": "PATH,agentloop_encryption_keys"},
     "AGENTLOOP_SHELL_ENV names the payload encryption keys (agentloop_encryption_keys); commands never get "
     "those: remove them from AGENTLOOP_SHELL_ENV"),
])
def test_bad_sandbox_settings_are_refused_with_the_fix(environ: dict[str, str], message: str) -> None:
    with pytest.raises(UserError) as info:
        sandbox.SandboxSettings.from_env(environ)
    assert str(info.value) == message


async def test_bad_sandbox_setting_fails_the_call_and_the_worker(
    workspace: Path, temporal_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTLOOP_SHELL_SANDBOX", "chroot")
    with pytest.raises(ToolError) as info:
        await shell_command("true", ctx=ToolContext(workspace=workspace))
    assert str(info.value).startswith(
        "The worker's shell sandbox is misconfigured, so no command can run: AGENTLOOP_SHELL_SANDBOX='chroot'"
    )
    with pytest.raises(UserError, match="not a sandbox mode"):
        build_worker(temporal_client, task_queue=f"q-{uuid.uuid4().hex[:8]}")
    build_worker(temporal_client, task_queue=f"q-{uuid.uuid4().hex[:8]}", role="models")  # runs no shell


async def run_shell(workspace: Path, command: str, **kwargs: object) -> str:
    return await shell_command(command, ctx=ToolContext(workspace=workspace), **kwargs)


async def test_namespace_sandbox_sees_only_its_own_processes_and_has_no_privileges(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_namespaces()
    monkeypatch.setenv("AGENTLOOP_SHELL_SANDBOX", "namespace")
    out = await run_shell(workspace, "ls /proc | grep -E '^[0-9]+$' | sort -n; echo uid=$(id -u)")
    lines = out.splitlines()
    assert lines[0] == "exit code: 0"
    # The init (python), bash, ls, grep and sort: nothing of the host.
    pids = [int(line) for line in lines[1:-1]]
    assert pids[0] == 1 and max(pids) < 10 and len(pids) <= 6, out
    assert lines[-1] == f"uid={os.geteuid()}"
    out = await run_shell(workspace, "umount /proc; echo umount=$?; head -c1 /proc/kcore >/dev/null; echo kcore=$?; "
                                     "grep CapEff /proc/self/status")
    assert "umount=32" in out and "kcore=1" in out and "CapEff:\t0000000000000000" in out


async def test_bwrap_sandbox_confines_files_and_network(
    workspace: Path, tmp_path: Path, dev_server: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_bwrap()
    monkeypatch.setenv("AGENTLOOP_SHELL_SANDBOX", "bwrap")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret\n")
    (workspace / "in.txt").write_text("inside\n")
    home = Path.home()
    port = dev_server.address.rsplit(":", 1)[1]
    out = await run_shell(workspace, "; ".join([
        "cat in.txt", "echo made > new.txt && echo wrote", f"cat {outside}/secret.txt",
        f"ls {home}", "touch /usr/x", "ls /etc/shadow", "echo HOME=$HOME",
        f"(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo net=yes || echo net=no",
    ]))
    assert "inside\nwrote\n" in out
    assert (workspace / "new.txt").read_text() == "made\n"
    assert "top secret" not in out and f"{outside}/secret.txt: No such file or directory" in out
    assert f"{home}': No such file or directory" in out
    assert "/usr/x': Read-only file system" in out
    assert "/etc/shadow': No such file or directory" in out
    assert "HOME=/tmp" in out and "net=no" in out
    monkeypatch.setenv("AGENTLOOP_SHELL_NETWORK", "on")
    out = await run_shell(workspace, f"(exec 3<>/dev/tcp/127.0.0.1/{port}) && echo net=yes")
    assert "net=yes" in out


async def test_explicit_namespace_mode_that_cannot_work_fails_each_call(
    workspace: Path, fresh_probes: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A machine where unshare cannot create namespaces (here: a launcher that fails).
    monkeypatch.setattr(sandbox, "_namespace_candidates", lambda netns=True: [["/bin/false"]])
    monkeypatch.setenv("AGENTLOOP_SHELL_SANDBOX", "namespace")
    with pytest.raises(ToolError) as info:
        await run_shell(workspace, "true")
    assert str(info.value).startswith(
        "The worker's shell sandbox is misconfigured, so no command can run: AGENTLOOP_SHELL_SANDBOX=namespace, "
        "but unshare could not create the namespaces (exit code 1)"
    )


async def test_unset_mode_falls_back_to_none_with_one_warning(
    workspace: Path, fresh_probes: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(sandbox, "_namespace_candidates", lambda netns=True: [])
    monkeypatch.setattr(sandbox, "_warned", set())
    monkeypatch.delenv("AGENTLOOP_SHELL_SANDBOX", raising=False)
    ctx = ToolContext(workspace=workspace)
    with caplog.at_level(logging.WARNING, logger="agentloop.sandbox"):
        assert await shell_command("echo ok", ctx=ctx) == "exit code: 0\nok\n"
        await shell_command("true", ctx=ToolContext(workspace=workspace))
    assert ctx.metrics["sandbox"] == "none"
    (warning,) = [r.getMessage() for r in caplog.records]
    assert warning.startswith("shell commands run WITHOUT a sandbox: util-linux unshare and setpriv were not found. "
                              "They can read the environment of every process of this user")
    assert sandbox.describe().startswith("shell sandbox: none (fallback: namespaces unavailable); files: ")


# Files outside the workspace, in every mode ---------------------------------------------

#: The same cases in each mode: (name, command, what shows it got through).
#: ``{out}`` is a directory beside the workspace holding ``secret.txt``; the
#: workspace's ``setuid-cat`` is a setuid-root copy of cat.
OUTSIDE_CASES = (
    ("read", "cat {out}/secret.txt", "top secret"),
    ("write", "echo pwned > {out}/x; cat {out}/x", "pwned"),
    ("hard link", "ln {out}/secret.txt hard && cat hard", "top secret"),
    ("symlink", "ln -s {out}/secret.txt soft; cat soft", "top secret"),
    ("/proc/1/root", "cat /proc/1/root{out}/secret.txt", "top secret"),
    ("setuid helper", "./setuid-cat {out}/secret.txt", "top secret"),
)

#: What each case does, per mode, where the kernel has Landlock (Linux 5.13+,
#: as here): nothing gets out. ``namespace (no Landlock)`` is the fallback of
#: a kernel without it: the command has the worker's user's files.
EXPECTED_OUTSIDE = {
    "namespace": dict.fromkeys((c[0] for c in OUTSIDE_CASES), "denied"),
    "bwrap": dict.fromkeys((c[0] for c in OUTSIDE_CASES), "denied"),
    "none": dict.fromkeys((c[0] for c in OUTSIDE_CASES), "denied"),
    "namespace (no Landlock)": dict.fromkeys((c[0] for c in OUTSIDE_CASES), "got through"),
}


def outside_setup(workspace: Path) -> Path:
    """A secret beside the workspace and outside /tmp (a namespace's private
    /tmp would hide one under /tmp anyway), and a setuid-root cat in it."""
    out = ROOT / "tests" / "artifacts" / f"outside-{uuid.uuid4().hex[:8]}"
    out.mkdir(parents=True)
    (out / "secret.txt").write_text("top secret\n")
    helper = workspace / "setuid-cat"
    shutil.copy(shutil.which("cat") or "/bin/cat", helper)
    helper.chmod(0o4755)
    return out


@pytest.mark.parametrize("mode", ["namespace", "bwrap", "none", "namespace (no Landlock)"])
async def test_outside_the_workspace_in_every_mode(
    mode: str, workspace: Path, fresh_probes: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if mode == "namespace (no Landlock)":
        monkeypatch.setattr(sandbox, "landlock_support", lambda: "the kernel has no Landlock (test)")
        monkeypatch.setattr(sandbox, "_warned", set())
    else:
        assert isinstance(sandbox.landlock_support(), int), "Landlock is not available on this machine"
    use_mode(mode.split(" ")[0], monkeypatch)
    out = outside_setup(workspace)
    try:
        got = {}
        for name, command, leak in OUTSIDE_CASES:
            result = await run_shell(workspace, command.format(out=out))
            assert result.startswith("exit code: "), result
            got[name] = "got through" if leak in result.split("\n", 1)[1] else "denied"
        wrote = (out / "x").exists()
    finally:
        shutil.rmtree(out, ignore_errors=True)
    assert got == EXPECTED_OUTSIDE[mode]
    assert wrote == (mode == "namespace (no Landlock)")
    # Not vacuous: inside the workspace the same commands work.
    (workspace / "mine.txt").write_text("mine\n")
    result = await run_shell(workspace, "cat mine.txt && echo more > new.txt && ln mine.txt hard2 && "
                                        "ln -s mine.txt soft2 && cat soft2 && ./setuid-cat hard2 && "
                                        "echo t > ${TMPDIR:-/tmp}/t && "
                                        "cat ${TMPDIR:-/tmp}/t && ls ~ >/dev/null && echo home")
    assert result == "exit code: 0\nmine\nmine\nmine\nt\nhome\n", result


@pytest.mark.parametrize("mode", ["namespace", "bwrap", "none"])
async def test_read_paths_are_readable_and_runnable_but_not_writable(
    mode: str, workspace: Path, tmp_path: Path, fresh_probes: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AGENTLOOP_SHELL_READ_PATHS: a toolchain outside the system directories
    (a /opt, a pyenv) that commands may read and run, and still not write;
    here under /tmp, which the namespace mode hides behind its private /tmp
    (a read path is kept visible, as the workspace is)."""
    if mode != "bwrap":
        assert isinstance(sandbox.landlock_support(), int), "Landlock is not available on this machine"
    use_mode(mode, monkeypatch)
    tools = tmp_path / f"toolchain-{uuid.uuid4().hex[:8]}"
    (tools / "bin").mkdir(parents=True)
    program = tools / "bin" / "hello-tool"
    program.write_text("#!/bin/sh\necho hello from the toolchain\n")
    program.chmod(0o755)
    try:
        command = f"{program}; echo x > {tools}/written"
        before = await run_shell(workspace, command)
        assert "hello from the toolchain" not in before, before
        monkeypatch.setenv("AGENTLOOP_SHELL_READ_PATHS", str(tools))
        after = await run_shell(workspace, command)
        assert "hello from the toolchain" in after, after
        assert not (tools / "written").exists()
    finally:
        shutil.rmtree(tools, ignore_errors=True)


def test_read_paths_must_be_directories(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="'relative/bin' is not an absolute path to a directory"):
        sandbox.SandboxSettings.from_env({"AGENTLOOP_SHELL_READ_PATHS": f"{tmp_path}:relative/bin"})
    assert sandbox.SandboxSettings.from_env({"AGENTLOOP_SHELL_READ_PATHS": f"{tmp_path}:"}).read_paths == (
        str(tmp_path.resolve()),)


async def test_each_mode_says_how_its_files_are_confined(fresh_probes: None, monkeypatch: pytest.MonkeyPatch) -> None:
    abi = sandbox.landlock_support()
    assert isinstance(abi, int) and abi >= 1, abi
    lines = {}
    for mode in ("namespace", "none"):
        monkeypatch.setenv("AGENTLOOP_SHELL_SANDBOX", mode)
        lines[mode] = sandbox.describe()
    assert lines["namespace"] == (
        f"shell sandbox: namespace; files: confined by Landlock ABI {abi}: the workspace read-write, system "
        "directories read-only, a private /tmp, /run hidden; network: none (a loopback of its own); processes: "
        "own PID namespace and /proc, no capabilities, allowlisted environment")
    assert lines["none"] == (
        f"shell sandbox: none (set by AGENTLOOP_SHELL_SANDBOX); files: confined by Landlock ABI {abi}: the "
        f"workspace read-write, system directories read-only, a private TMPDIR; network: no TCP (Landlock ABI "
        f"{abi}; UDP is not Landlock's to restrict); processes: the worker's (no capabilities; the worker is "
        "non-dumpable), allowlisted environment")
    monkeypatch.setenv("AGENTLOOP_SHELL_NETWORK", "web")
    assert "; network: outbound TCP to ports 80 and 443 only (Landlock ABI " in sandbox.describe()
    monkeypatch.setenv("AGENTLOOP_SHELL_NETWORK", "on")
    assert "; network: the worker's, every local service reachable (AGENTLOOP_SHELL_NETWORK=on); " in sandbox.describe()
    monkeypatch.delenv("AGENTLOOP_SHELL_NETWORK")
    sandbox._namespace_launcher.cache_clear()
    monkeypatch.setattr(sandbox, "landlock_support", lambda: "the kernel has no Landlock (test)")
    monkeypatch.setenv("AGENTLOOP_SHELL_SANDBOX", "namespace")
    assert sandbox.describe() == ("shell sandbox: namespace; files: NOT confined: the kernel has no Landlock (test); "
                                  "network: none (a loopback of its own); processes: own PID namespace and /proc, "
                                  "no capabilities, allowlisted environment")
    monkeypatch.setenv("AGENTLOOP_SHELL_NETWORK", "web")
    with pytest.raises(UserError, match="AGENTLOOP_SHELL_NETWORK=web needs Landlock's network rules"):
        sandbox.describe()


@pytest.mark.parametrize("abi", [1, 2, 3, 4, 5, 6, 7])
def test_the_rights_handled_follow_the_landlock_abi(abi: int) -> None:
    from agentloop.activities.shell_sandbox import sandbox_init as init

    handled = init.handled_fs(abi)
    assert handled & init.FS_READ_FILE and handled & init.FS_MAKE_SYM
    assert bool(handled & init.FS_REFER) == (abi >= 2)
    assert bool(handled & init.FS_TRUNCATE) == (abi >= 3)
    assert bool(handled & init.FS_IOCTL_DEV) == (abi >= 5)
    assert handled < 1 << 16


# Nothing outlives the call (defect 7) -------------------------------------------------


ESCAPES = (
    "setsid sleep {0} & "                                  # a new session
    "nohup sleep {1} >/dev/null 2>&1 & "                   # immune to hangups
    "( (sleep {2} &) & ); "                                # double fork: re-parented away from bash
    "setsid bash -c 'sleep {3} & disown' >/dev/null 2>&1; "  # a daemon in its own session
    "echo started"
)


@pytest.fixture
def escape_tags() -> Iterator[list[str]]:
    """Four unique sleep arguments; survivors are killed at the end whatever happened."""
    tags = [unique_sleep() for _ in range(4)]
    yield tags
    for tag in tags:
        for pid in processes_with_argument(tag):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def use_mode(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if mode == "namespace":
        require_namespaces()
    elif mode == "bwrap":
        require_bwrap()
    monkeypatch.setenv("AGENTLOOP_SHELL_SANDBOX", mode)


async def survivors(tags: list[str]) -> dict[str, list[int]]:
    left = {}
    for tag in tags:
        pids = await wait_until_gone(tag, timeout=5)
        if pids:
            left[tag] = pids
    return left


@pytest.mark.parametrize("mode", ["namespace", "bwrap", "none"])
async def test_processes_started_by_a_command_that_ends_are_killed(
    mode: str, workspace: Path, escape_tags: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    use_mode(mode, monkeypatch)
    out = await run_shell(workspace, ESCAPES.format(*escape_tags))
    assert out == "exit code: 0\nstarted\n"
    assert await survivors(escape_tags) == {}


@pytest.mark.parametrize("mode", ["namespace", "bwrap", "none"])
async def test_processes_started_by_a_command_that_times_out_are_killed(
    mode: str, workspace: Path, escape_tags: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    use_mode(mode, monkeypatch)
    with pytest.raises(ToolError, match="timed out after 2s"):
        await run_shell(workspace, ESCAPES.format(*escape_tags) + "; sleep 600", timeout_seconds=2)
    assert await survivors(escape_tags) == {}


@pytest.mark.parametrize("mode", ["namespace", "bwrap", "none"])
async def test_processes_started_by_a_cancelled_command_are_killed(
    mode: str, workspace: Path, escape_tags: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    use_mode(mode, monkeypatch)
    task = asyncio.create_task(run_shell(workspace, ESCAPES.format(*escape_tags) + "; sleep 600",
                                         timeout_seconds=900))
    for tag in escape_tags:
        await wait_until_running(tag)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await survivors(escape_tags) == {}


async def test_cancelled_run_leaves_no_setsid_process(
    agent_client: AgentClient, worker, workspace: Path, escape_tags: list[str]
) -> None:
    require_namespaces()
    command = ESCAPES.format(*escape_tags) + "; sleep 600"
    model = script(calls(call("shell_command", {"command": command, "timeout_seconds": 900})), reply("x"))
    async with worker():
        handle = await agent_client.start(
            AgentSpec(model=model, tools=["shell_command"], default_permission="allow", tool_timeout_seconds=900),
            "escape",
        )
        for tag in escape_tags:
            await wait_until_running(tag)
        await handle.cancel()
        with pytest.raises(AgentRunFailed):
            await handle.result()
        # The run ends only once the tool has stopped: nothing is left now.
        assert {tag: processes_with_argument(tag) for tag in escape_tags} == {tag: [] for tag in escape_tags}


@pytest.mark.parametrize("mode", ["namespace", "bwrap", "none"])
async def test_a_worker_killed_mid_command_leaves_nothing_running(
    mode: str, tmp_path: Path, workspace: Path, dev_server: DevServer, agent_client: AgentClient,
    task_queue: str, escape_tags: list[str],
) -> None:
    """SIGKILL the worker while its command runs: the command and everything it
    started die with it (no timeout would ever end them otherwise)."""
    if mode == "namespace":
        require_namespaces()
    elif mode == "bwrap":
        require_bwrap()
    env = clean_env(tmp_path, TEMPORAL_ADDRESS=dev_server.address, AGENTLOOP_TASK_QUEUE=task_queue,
                    AGENTLOOP_SHELL_SANDBOX=mode, AGENTLOOP_WORKSPACE_ROOTS=str(tmp_path))
    log = (tmp_path / "worker.log").open("w")
    worker = subprocess.Popen([sys.executable, "-m", "agentloop.cli", "worker",
                               "--import", "tests.helpers.fixtures.security_fixture"],
                              cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    handle = None
    try:
        command = ESCAPES.format(*escape_tags) + "; sleep 600"
        handle = await agent_client.start(
            AgentSpec(model="scripted:run-the-input", tools=["shell_command"], default_permission="allow",
                      tool_timeout_seconds=900, workspace=str(workspace)),
            command,
        )
        for tag in escape_tags:
            await wait_until_running(tag)
        worker.kill()
        worker.wait()
        assert await survivors(escape_tags) == {}
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        log.close()
        if handle is not None:
            await handle.workflow_handle.terminate("test over")


# The tools queue ---------------------------------------------------------------------


async def test_tool_calls_go_to_the_runs_queue_when_its_worker_serves_the_tools_too(
    agent_client: AgentClient, worker, workspace: Path, task_queue: str
) -> None:
    (workspace / "a.txt").write_text("a")
    model = script(calls(call("read_file", {"file_path": "a.txt"})), reply("ok"))
    async with worker():
        handle = await agent_client.start(
            AgentSpec(model=model, tools=["read_file"], workspace=str(workspace)), "go")
        assert (await handle.result()).final_text == "ok"
    history = await handle.workflow_handle.fetch_history()
    # A worker of role all looked the tools up itself, in the run's first
    # workflow task (a local activity: no task, no trip through the tools
    # queue), and serves the tools on the run's queue: the call went there.
    assert local_activities(history) == [("resolve_tools_here", None)]
    lane = f"{task_queue}-llm-scripted"  # the scripted model's provider lane
    assert scheduled_queues(history) == [("call_model", lane), ("execute_tool", task_queue),
                                         ("call_model", lane)]
    markers = [e.marker_recorded_event_attributes for e in history.events
               if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED]
    patches = [json.loads(m.details["patch-data"].payloads[0].data)["id"] for m in markers if "patch-data" in m.details]
    # One marker for a new run, standing for its lanes, the tools looked up here and the features before it.
    assert patches == ["agentloop-lean-3"]


async def test_a_split_deployment_keeps_tool_calls_on_the_tools_queue_and_a_call_that_finds_no_tools_moves_there(
    temporal_client: Client, agent_client: AgentClient, registry, workspace: Path, task_queue: str
) -> None:
    from agentloop.activities.agent_activities import AgentActivities

    (workspace / "a.txt").write_text("a")
    tools = f"{task_queue}-tools"

    def spec(answer: str, parallel: int = 1) -> AgentSpec:
        step = calls(*[call("read_file", {"file_path": "a.txt"}) for _ in range(parallel)])
        return AgentSpec(model=script(step, reply(answer)), tools=["read_file"], workspace=str(workspace))

    models = build_worker(temporal_client, task_queue=task_queue, registry=registry, role="models")
    # Split: a tools worker answers resolve_tools without claiming the run's
    # queue, so the call stays on the tools queue, away from the keys.
    async with models, build_worker(temporal_client, task_queue=task_queue, registry=registry, role="tools"):
        handle = await agent_client.start(spec("split"), "go")
        split = await handle.result()
    assert split.final_text == "split"
    read = split.messages[-2].tool_results[0]
    assert not read.is_error and "a" in read.content
    history = await handle.workflow_handle.fetch_history()
    # The models worker refused to look the tools up (it holds none), at no
    # task of its own, and the tools queue answered.
    assert local_activities(history) == [("resolve_tools_here", "ToolsNotHere")]
    lane = f"{task_queue}-llm-scripted"  # the scripted model's provider lane
    assert scheduled_queues(history) == [
        ("resolve_tools", tools), ("call_model", lane), ("execute_tool", tools), ("call_model", lane)]
    # A worker that serves the tools on the run's queue too (as role all
    # does) answered resolve_tools, but only a models worker polls that
    # queue now (the deployment was split since): the two parallel calls
    # fail there at once, not retried, and run on the tools queue instead.
    acts = AgentActivities(registry, workspace=workspace, tools_beside_runs=True)
    beside = Worker(temporal_client, task_queue=tools, activities=[acts.resolve_tools, acts.execute_tool])
    models = build_worker(temporal_client, task_queue=task_queue, registry=registry, role="models")
    async with models, beside:
        handle = await agent_client.start(spec("moved", parallel=2), "go")
        result = await handle.result()
    assert result.final_text == "moved"
    assert [(r.content, r.is_error) for r in result.messages[-2].tool_results] == [(read.content, False)] * 2
    history = await handle.workflow_handle.fetch_history()
    scheduled = scheduled_queues(history)
    assert scheduled[:2] == [("resolve_tools", tools), ("call_model", lane)]
    assert sorted(scheduled[2:-1]) == [("execute_tool", task_queue)] * 2 + [("execute_tool", tools)] * 2
    assert scheduled[-1] == ("call_model", lane)
    failures = [e.activity_task_failed_event_attributes.failure for e in history.events
                if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED]
    assert [f.application_failure_info.type for f in failures] == ["NotFoundError"] * 2
    assert "execute_tool" in failures[0].message and "is not registered on this worker" in failures[0].message
    started = [e.activity_task_started_event_attributes.attempt for e in history.events
               if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED]
    assert started == [1] * 7  # nothing retried


async def test_a_run_that_looked_its_tools_up_on_a_worker_of_role_all_goes_on_after_the_deployment_is_split(
    temporal_client: Client, agent_client: AgentClient, worker, registry, workspace: Path, task_queue: str
) -> None:
    # The run looks its tools up on the worker of role all (a local
    # activity, in its first workflow task) and waits for an approval. The
    # deployment is split meanwhile: the models worker replays the run from
    # history, the lookup included, and the approved call, placed beside the
    # run by that lookup, finds no tools there and runs on the tools queue.
    model = script(calls(write("out.txt", "split")), reply("done"))
    async with worker():
        handle = await agent_client.start(
            AgentSpec(model=model, tools=["write_file"], workspace=str(workspace)), "go")
        await wait_state(handle, awaiting(), "the write to wait for approval")
    split = [build_worker(temporal_client, task_queue=task_queue, registry=registry, workspace=workspace, role=role)
             for role in ("models", "tools")]
    async with split[0], split[1]:
        await handle.approve("call_0_0")
        result = await handle.result()
    assert result.final_text == "done" and (workspace / "out.txt").read_text() == "split"
    history = await handle.workflow_handle.fetch_history()
    assert local_activities(history) == [("resolve_tools_here", None)]
    tools = f"{task_queue}-tools"
    lane = f"{task_queue}-llm-scripted"  # the scripted model's provider lane
    assert scheduled_queues(history) == [
        ("call_model", lane), ("execute_tool", task_queue), ("execute_tool", tools), ("call_model", lane)]
    failures = [e.activity_task_failed_event_attributes.failure.application_failure_info.type
                for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED]
    assert failures == ["NotFoundError"]
    assert task_failures(history) == []  # the replay on the models worker matched the history


async def test_a_worker_built_without_the_local_lookup_asks_the_tools_queue(
    temporal_client: Client, agent_client: AgentClient, registry, workspace: Path, task_queue: str
) -> None:
    # A workflow worker built by hand, without the plugin and so without
    # resolve_tools_here: the run makes no local activity and asks the
    # tools queue, as runs did before.
    from agentloop.activities.agent_activities import AgentActivities
    from agentloop.workers.plugin import workflow_runner
    from agentloop.workflows.agent_run import AgentRunWorkflow

    (workspace / "a.txt").write_text("a")
    acts = AgentActivities(registry, workspace=workspace)
    bare = Worker(temporal_client, task_queue=task_queue, workflows=[AgentRunWorkflow], activities=[acts.call_model],
                  workflow_runner=workflow_runner())
    # Without the plugin, the model calls' lane needs a worker of its own too (docs/many-tenants.md).
    lane = f"{task_queue}-llm-scripted"  # the scripted model's provider lane
    bare_lane = Worker(temporal_client, task_queue=lane, activities=[acts.call_model])
    async with bare, bare_lane, build_worker(temporal_client, task_queue=task_queue, registry=registry,
                                             workspace=workspace, role="tools"):
        handle = await agent_client.start(AgentSpec(model=script(calls(call("read_file", {"file_path": "a.txt"})),
                                                                 reply("read")),
                                                    tools=["read_file"], workspace=str(workspace)), "go")
        result = await handle.result()
    read = result.messages[-2].tool_results[0]
    assert result.final_text == "read" and not read.is_error and "a" in read.content
    history = await handle.workflow_handle.fetch_history()
    tools = f"{task_queue}-tools"
    assert local_activities(history) == []
    assert scheduled_queues(history) == [
        ("resolve_tools", tools), ("call_model", lane), ("execute_tool", tools), ("call_model", lane)]


async def test_a_run_replayed_after_the_local_lookup_keeps_its_events_and_their_times(
    agent_client: AgentClient, worker, workspace: Path
) -> None:
    # The lookup is a local activity inside the run's first workflow task,
    # and the step's first events come after it in that task: a replay (a
    # new worker, asked for the events) must rebuild them exactly, times
    # included.
    from agentloop.shared.runs.events import ApprovalRequested

    async def events_until_approval(handle) -> list:
        seen = []
        async for event in handle.events():
            seen.append(event)
            if isinstance(event, ApprovalRequested):
                return seen
        raise AssertionError("the run ended without asking for approval")

    model = script(calls(write("out.txt", "replayed")), reply("done"))
    async with worker():
        handle = await agent_client.start(
            AgentSpec(model=model, tools=["write_file"], workspace=str(workspace)), "go")
        live = await events_until_approval(handle)
    async with worker():  # holds no state of the run: it replays the history to answer
        replayed = await events_until_approval(handle)
        await handle.approve("call_0_0")
        assert (await handle.result()).final_text == "done"
    assert len(live) >= 3 and [e.model_dump() for e in replayed] == [e.model_dump() for e in live]
    history = await handle.workflow_handle.fetch_history()
    assert local_activities(history) == [("resolve_tools_here", None)] and task_failures(history) == []


# Not root --------------------------------------------------------------------------

NON_ROOT_PROBE = r'''
import asyncio, json, os, site, sys
site.addsitedir(os.environ["AGENTLOOP_TEST_SITE"])  # the venv's packages, agentloop's editable finder included
from pathlib import Path
from agentloop.activities.shell_sandbox import sandbox
from agentloop.activities.builtin_tools.shell_tool import shell_command
from agentloop.tools.tool_context import ToolContext
from agentloop.workers.worker import protect_process

async def main():
    if sys.argv[2] == "protect":
        assert protect_process()
    ws = Path(sys.argv[1])
    me = os.getpid()
    out = {"uid": os.geteuid(), "describe": sandbox.describe(), "worker_pid": me}
    for name, cmd in [("ppid", "cat /proc/$PPID/environ"), ("all", "cat /proc/*/environ"),
                      ("worker", f"cat /proc/{me}/environ; ps eww -p {me}")]:
        out[name] = await shell_command(cmd, ctx=ToolContext(workspace=ws))
    print(json.dumps(out))

asyncio.run(main())
'''


def non_root_python() -> list[str]:
    """How to run this checkout's Python code as a user other than root."""
    if os.geteuid() != 0:
        return [sys.executable]
    for python in (os.path.realpath(sys.executable), "/usr/bin/python3"):
        probe = subprocess.run(["runuser", "-u", "nobody", "--", python, "-c",
                                "import sys; print('%d.%d' % sys.version_info[:2])"],
                               capture_output=True, text=True)
        if probe.returncode == 0 and probe.stdout.strip() == "{}.{}".format(*sys.version_info[:2]):
            return ["runuser", "-u", "nobody", "--", python]
    pytest.fail("no Python this test can run as user nobody (runuser from util-linux, and a Python "
                f"{sys.version_info[0]}.{sys.version_info[1]} that nobody may execute, are needed)")


@pytest.mark.parametrize(("mode", "protect"), [("", "no"), ("none", "no"), ("none", "protect")])
def test_as_a_non_root_user(mode: str, protect: str) -> None:
    """A worker not running as root: the namespace sandbox works (as a user
    namespace); without a sandbox, the worker's environment is readable unless
    the worker made itself non-dumpable, as `agentloop run/dev/worker` do."""
    import sysconfig
    import tempfile

    token, secrets = canaries()
    ws = Path(tempfile.mkdtemp(prefix="agentloop-nonroot-", dir="/tmp"))
    ws.chmod(0o777)
    try:
        env = {"PATH": os.environ.get("PATH", sandbox.DEFAULT_PATH), "HOME": "/tmp", **secrets,
               "AGENTLOOP_TEST_SITE": sysconfig.get_paths()["purelib"], "AGENTLOOP_SHELL_SANDBOX": mode}
        proc = subprocess.run([*non_root_python(), "-c", NON_ROOT_PROBE, str(ws), protect], env=env, cwd="/tmp",
                              capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(ws, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["uid"] != 0
    if mode == "":
        assert out["describe"].startswith("shell sandbox: namespace")
    for name in ("ppid", "all", "worker"):
        assert out[name].startswith("exit code: "), out[name]
    assert token not in out["ppid"]  # the sandbox's first process: allowlisted environment only
    landlock = "files: confined by Landlock" in out["describe"]
    if mode == "none" and protect == "no" and not landlock:
        # The fallback's weakness, shown: a plain child reads its worker's environment...
        assert token in out["worker"] and token in out["all"]
    else:
        # ...which the sandbox, a non-dumpable worker, or Landlock (its
        # ptrace scope covers /proc/PID/environ) prevents.
        assert token not in out["worker"] and token not in out["all"], out
        if mode == "none" and protect == "no":
            assert f"/proc/{out['worker_pid']}/environ: Permission denied" in out["worker"], out["worker"]


# Without bubblewrap ------------------------------------------------------------------

#: A bwrap test that needs no server: it stops at require_bwrap when bubblewrap is absent.
BWRAP_TEST = "tests/process/workers/test_security.py::test_processes_started_by_a_command_that_ends_are_killed[bwrap]"


def run_bwrap_test_without_bwrap(tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    """Pytest on BWRAP_TEST in a subprocess whose PATH holds only this
    interpreter's directory, so ``bwrap`` is not found (as on a machine
    without bubblewrap)."""
    env = {k: v for k, v in os.environ.items() if k != "AGENTLOOP_REQUIRE_BWRAP"}
    env.update(PATH=str(Path(sys.executable).parent), **extra)
    return subprocess.run([sys.executable, "-m", "pytest", BWRAP_TEST, "-rsf", "-p", "no:cacheprovider",
                           "-o", "addopts="], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_bwrap_tests_skip_with_the_install_command_when_bubblewrap_is_absent(tmp_path: Path) -> None:
    proc = run_bwrap_test_without_bwrap(tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "1 skipped" in proc.stdout, proc.stdout[-3000:]
    assert "SKIPPED" in proc.stdout and "apt-get install -y bubblewrap" in proc.stdout, proc.stdout[-3000:]


def test_bwrap_tests_fail_when_ci_requires_bubblewrap(tmp_path: Path) -> None:
    proc = run_bwrap_test_without_bwrap(tmp_path, AGENTLOOP_REQUIRE_BWRAP="1")
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "1 failed" in proc.stdout, proc.stdout[-3000:]
    assert "apt-get install -y bubblewrap" in proc.stdout and "AGENTLOOP_REQUIRE_BWRAP=1" in proc.stdout, \
        proc.stdout[-3000:]


def test_ci_requires_bubblewrap() -> None:
    """.ci/run installs bubblewrap and turns a skipped bwrap test into a failure."""
    script = (ROOT / ".ci" / "run").read_text()
    assert "bubblewrap" in script
    assert "export AGENTLOOP_REQUIRE_BWRAP=1" in script


# The fleet is out of reach: network, sockets, root powers -----------------------------------

#: What a command tries, per case: (name, command, what shows it got through).
#: ``{grpc}``, ``{http}``, ``{serve}``, ``{codec}``: the ports of the Temporal
#: server's gRPC and HTTP APIs, of a token-less ``agentloop serve`` and of
#: ``agentloop codec-server``, all on the worker's loopback; ``{sock}``: a
#: path socket outside the workspace, in /run; the workspace holds a copy of
#: the ``temporal`` CLI.
REACH_CASES = (
    ("temporal gRPC", "(exec 3<>/dev/tcp/127.0.0.1/{grpc}) && echo reached", "reached"),
    ("temporal HTTP", "curl -sS -m 5 -o /dev/null http://127.0.0.1:{http}/api/v1/namespaces/default/workflows "
                      "&& echo reached", "reached"),
    ("agentloop serve", "curl -sS -m 5 -o /dev/null http://127.0.0.1:{serve}/v1/runs && echo reached", "reached"),
    ("codec server", "(exec 3<>/dev/tcp/127.0.0.1/{codec}) && echo reached", "reached"),
    ("worker metrics", "curl -sS -m 5 -o /dev/null http://127.0.0.1:{metrics}/metrics && echo reached", "reached"),
    ("temporal binary", "./temporal workflow list --address 127.0.0.1:{grpc} --limit 1 && echo reached", "reached"),
    ("path socket", "/usr/bin/python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{sock}'); "
                    "print('reached')\"", "reached"),
    ("AF_PACKET", "/usr/bin/python3 -c \"import socket; socket.socket(socket.AF_PACKET, socket.SOCK_RAW); "
                  "print('reached')\"", "reached"),
    ("host name", "hostname agentloop-pwned && echo reached", "reached"),
    ("capabilities", "grep CapEff /proc/self/status", "CapEff:\t0000000000000000"),
)

_DENIED = {**dict.fromkeys((c[0] for c in REACH_CASES), "denied"), "capabilities": "none"}
#: Per mode (the worker runs as root here). ``none`` keeps the worker's /run
#: (no mount namespace), so a socket there connects: only namespace and
#: bwrap hide it. ``namespace, network on`` is today's old default, kept
#: to show the cases can get through.
EXPECTED_REACH = {
    "namespace": _DENIED,
    "bwrap": _DENIED,
    "none": {**_DENIED, "path socket": "got through"},
    "namespace, network on": {**_DENIED, "temporal gRPC": "got through", "temporal HTTP": "got through",
                              "agentloop serve": "got through", "codec server": "got through",
                              "worker metrics": "got through", "temporal binary": "got through"},
}


@pytest.fixture(scope="module")
def temporal_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One copy of the ``temporal`` CLI, hard-linked into each test's workspace."""
    from agentloop.workers.devserver import find_temporal_binary

    copy = tmp_path_factory.mktemp("bin") / "temporal"
    shutil.copy(find_temporal_binary(), copy)
    return copy


async def start_listening(*argv: str, env: dict[str, str], said: str) -> tuple[subprocess.Popen[str], int]:
    """``agentloop ARGV --port PORT`` (a free one), and the port, once it says
    (on stderr) that it serves."""
    from agentloop.workers.devserver import free_port

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "agentloop.cli", *argv, "--port", str(port)], cwd=ROOT, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    lines = []
    while True:
        line = await asyncio.to_thread(proc.stderr.readline)
        assert line, f"agentloop {argv[0]} ended before serving: {''.join(lines)}"
        lines.append(line)
        if line.startswith(f"agentloop {said}: http://"):
            return proc, port


@pytest.fixture
async def fleet(tmp_path: Path, dev_server: DevServer, task_queue: str) -> Iterator[dict[str, object]]:
    """The services a run must not reach: the test server's gRPC and HTTP
    ports, a token-less ``agentloop serve``, a codec server, a worker's
    metrics endpoint, and a path socket in /run."""
    import socket as sockets

    from agentloop.workers.metrics import AgentMetrics, MetricsServer

    env = clean_env(tmp_path, TEMPORAL_ADDRESS=dev_server.address, AGENTLOOP_TASK_QUEUE=task_queue,
                    AGENTLOOP_ENCRYPTION_KEYS="k1:" + base64.b64encode(b"k" * 32).decode())
    serve, serve_port = await start_listening("serve", env=env, said="serve")
    codec, codec_port = await start_listening("codec-server", env=env, said="codec-server")
    sock_path = f"/run/agentloop-test-{uuid.uuid4().hex[:8]}.sock"
    listener = sockets.socket(sockets.AF_UNIX)
    listener.bind(sock_path)
    listener.listen(8)
    metrics = MetricsServer(AgentMetrics(), 0).start()
    try:
        yield {"grpc": dev_server.port, "http": dev_server.http_port, "serve": serve_port, "codec": codec_port,
               "metrics": metrics.port, "sock": sock_path, "serve_proc": serve}
    finally:
        metrics.stop()
        listener.close()
        os.unlink(sock_path)
        for proc in (serve, codec):
            proc.terminate()
            proc.wait(30)


@pytest.mark.parametrize("mode", list(EXPECTED_REACH))
async def test_the_fleet_is_out_of_reach_in_every_mode(
    mode: str, workspace: Path, fleet: dict[str, object], temporal_copy: Path, fresh_probes: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    use_mode(mode.split(",")[0], monkeypatch)
    monkeypatch.setenv("AGENTLOOP_SHELL_NETWORK", "on" if mode.endswith("network on") else "off")
    os.link(temporal_copy, workspace / "temporal")
    got = {}
    for name, command, sign in REACH_CASES:
        result = await run_shell(workspace, command.format(**fleet))
        assert result.startswith("exit code: "), result
        shown = result.split("\n", 1)[1]
        if name == "capabilities":
            got[name] = "none" if sign in shown else shown
        else:
            got[name] = "got through" if sign in shown.splitlines() else "denied"
    assert got == EXPECTED_REACH[mode]
    # Not vacuous: from the worker itself (outside the sandbox) every service answers.
    for port in ("grpc", "http", "serve", "codec", "metrics"):
        with socket.create_connection(("127.0.0.1", fleet[port]), timeout=5):
            pass
    with socket.socket(socket.AF_UNIX) as probe:
        probe.connect(fleet["sock"])


ROOT_PROBE = r'''
import asyncio, json, os, sys
from pathlib import Path
from agentloop.activities.shell_sandbox import sandbox
from agentloop.activities.builtin_tools.shell_tool import shell_command
from agentloop.tools.tool_context import ToolContext
from agentloop.workers.worker import protect_process

async def main():
    assert protect_process()
    ws, me = Path(sys.argv[1]), os.getpid()
    out = {"uid": os.geteuid(), "describe": sandbox.describe()}
    out["environ"] = await shell_command(f"cat /proc/{me}/environ; cat /proc/{me}/maps | head -1",
                                         ctx=ToolContext(workspace=ws))
    out["caps"] = await shell_command("grep -E 'Cap(Eff|Bnd|Prm|Amb)' /proc/self/status", ctx=ToolContext(workspace=ws))
    print(json.dumps(out))

asyncio.run(main())
'''


@pytest.mark.parametrize("mode", ["namespace", "bwrap", "none"])
def test_a_root_workers_commands_have_no_capabilities_and_cannot_read_it(mode: str, workspace: Path) -> None:
    """As root, in every mode: no capability in any set, and the worker's
    /proc/PID/environ and maps (the worker is non-dumpable) are closed."""
    if os.geteuid() != 0:
        pytest.skip("this test is about a worker running as root")
    if mode == "bwrap":
        require_bwrap()
    token, secrets = canaries()
    env = {"PATH": os.environ.get("PATH", sandbox.DEFAULT_PATH), "HOME": str(workspace.parent), **secrets,
           "AGENTLOOP_SHELL_SANDBOX": mode}
    proc = subprocess.run([sys.executable, "-c", ROOT_PROBE, str(workspace)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["uid"] == 0
    assert token not in out["environ"], out["environ"]
    assert "environ: Permission denied" in out["environ"] or "No such file" in out["environ"], out["environ"]
    assert "maps: Permission denied" in out["environ"] or "No such file" in out["environ"], out["environ"]
    for name in ("CapEff", "CapBnd", "CapPrm", "CapAmb"):
        assert f"{name}:\t0000000000000000" in out["caps"], out["caps"]


# Workspaces that would widen what a run reaches ------------------------------------------------


WORKSPACE_CASES = ("/", "a root", "a parent of the worker's directory", "the worker's home", "/etc")


@pytest.mark.parametrize("mode", ["namespace", "bwrap", "none"])
async def test_workspaces_that_widen_are_refused_in_every_mode(
    mode: str, tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from temporalio.testing import ActivityEnvironment

    from agentloop.activities.agent_activities import AgentActivities
    from agentloop.activities.builtin_tools import register_builtin_tools
    from agentloop.shared.definition.activity_io import ExecuteToolInput
    from agentloop.tools.registry import ToolRegistry

    use_mode(mode, monkeypatch)
    registry = ToolRegistry()
    register_builtin_tools(registry)
    given = {"/": "/", "a root": str(tmp_path), "a parent of the worker's directory": str(ROOT.parent),
             "the worker's home": str(Path.home()), "/etc": "/etc"}

    async def attempt(ws: str) -> str:
        # A worker per call: its ledger would answer a repeated call from memory.
        activities = AgentActivities(registry, workspace=workspace, workspace_roots=[tmp_path])
        result = await ActivityEnvironment().run(activities.execute_tool, ExecuteToolInput(
            run_id="r", step=0, call_id="c", tool_name="shell_command", arguments={"command": "echo ran"},
            workspace=ws))
        return result.content

    got = {case: await attempt(given[case]) for case in WORKSPACE_CASES}
    assert got["/"] == ("The workspace / is the root directory: a run's commands could read and write everything "
                        "in it; use a project directory inside it (AgentSpec.workspace).")
    assert got["a root"] == (
        f"The workspace {tmp_path} is one of the directories this worker allows (AGENTLOOP_WORKSPACE_ROOTS or the "
        f"worker's workspace: {tmp_path.resolve()}); a root holds the workspaces of many runs: use a directory "
        "inside it (AgentSpec.workspace).")
    assert got["a parent of the worker's directory"].startswith(
        f"The workspace {ROOT.parent} holds the worker's own files (its working directory, ")
    assert "home directory of the worker's user" in got["the worker's home"]
    assert got["/etc"].startswith("The workspace /etc is in /etc, a system directory")
    # Not vacuous: inside the root, and the worker's own workspace, the command runs.
    (tmp_path / "other").mkdir()
    for ws in (workspace, tmp_path / "other"):
        assert await attempt(str(ws)) == "exit code: 0\nran\n"


# The chain: a run that starts a wider run ----------------------------------------------------


async def test_a_run_cannot_start_a_wider_run_through_the_fleet(
    tmp_path: Path, workspace: Path, dev_server: DevServer, temporal_client: Client, task_queue: str,
    agent_client: AgentClient, fleet: dict[str, object], temporal_copy: Path, spawn_worker,
) -> None:
    """The escape the fault suite found: a run confined to its workspace
    reads the task queue, then starts a run with workspace "/" and the shell
    allowed, through the dev server's HTTP API, its gRPC port (a copied
    temporal CLI) and a token-less ``agentloop serve``. None of it connects,
    no run starts, nothing is written outside."""
    spawn_worker("tests.helpers.fixtures.security_fixture")
    os.link(temporal_copy, workspace / "temporal")
    # Outside /tmp, which the namespace mode replaces with a private one.
    outside = ROOT / "tests" / "artifacts" / f"escaped-{uuid.uuid4().hex[:8]}"
    outside.parent.mkdir(exist_ok=True)
    wide = {"model": "scripted:run-the-input", "tools": ["shell_command"], "workspace": "/",
            "default_permission": "allow"}
    escape_ids = {way: f"escape-{way}-{uuid.uuid4().hex[:8]}" for way in ("http", "grpc", "serve")}
    run_input = {"spec": wide, "messages": [{"role": "user", "parts": [{"type": "text", "text": f"touch {outside}"}]}]}
    payload = {"metadata": {"encoding": base64.b64encode(b"json/plain").decode()},
               "data": base64.b64encode(json.dumps(run_input).encode()).decode()}
    http_start = json.dumps({"workflowId": escape_ids["http"], "workflowType": {"name": "AgentRunWorkflow"},
                             "taskQueue": {"name": task_queue}, "input": {"payloads": [payload]}})
    (workspace / "start.json").write_text(http_start)
    (workspace / "serve.json").write_text(json.dumps({"spec": wide, "input": f"touch {outside}",
                                                      "run_id": escape_ids["serve"]}))
    http = f"http://127.0.0.1:{fleet['http']}/api/v1/namespaces/default"
    script = "; ".join([
        f"curl -sS -m 5 {http}/workflows && echo listed",
        f"curl -sS -m 5 -X POST -H 'Content-Type: application/json' --data @start.json "
        f"{http}/workflows/{escape_ids['http']} && echo started-http",
        f"./temporal workflow start --address 127.0.0.1:{fleet['grpc']} --task-queue {task_queue} "
        f"--type AgentRunWorkflow --workflow-id {escape_ids['grpc']} --input-file start.json && echo started-grpc",
        f"curl -sS -m 5 -X POST -H 'Content-Type: application/json' --data @serve.json "
        f"http://127.0.0.1:{fleet['serve']}/v1/runs && echo started-serve",
        f"touch {outside} && echo wrote-outside",
    ])
    handle = await agent_client.start(
        AgentSpec(model="scripted:run-the-input", tools=["shell_command"], default_permission="allow",
                  workspace=str(workspace)), script)
    await handle.result()
    events = [json.loads(e.model_dump_json()) async for e in agent_client.events(handle.run_id)]
    (output,) = [e["result"]["content"] for e in events if e["type"] == "agent.tool.execution.completed"]
    assert output.startswith("exit code: "), output
    for sign in ("listed", "started-http", "started-grpc", "started-serve", "wrote-outside"):
        assert sign not in output.splitlines(), output
    assert "Couldn't connect to server" in output or "Failed to connect" in output, output
    await asyncio.sleep(1)  # a run the command had started would show up at once
    for workflow_id in escape_ids.values():
        with pytest.raises(Exception, match="not found"):
            await temporal_client.get_workflow_handle(workflow_id).describe()
    assert not outside.exists()
    # The worker said so at start, on its own line (not the INFO log).
    said = spawn_worker.log.read_text().splitlines()
    assert any(line.startswith("agentloop worker: shell sandbox: namespace; files: confined by Landlock ABI ")
               and "; network: none (a loopback of its own); processes: own PID namespace" in line
               for line in said), said
