"""Running the ``agentloop`` command as a subprocess, as a user would.

Importing this module (``--import tests.helpers.cli``) also registers the
scripted models ``cli-ops-write`` and ``cli-ops-write-two`` in that process.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentloop.testing import call, calls, register_scripted_model, script
from agentloop.workers.devserver import DevServer, find_temporal_binary
from tests.helpers.agents import echo_results
from tests.helpers.paths import ROOT


def clean_env(tmp_path: Path, *, drop: tuple[str, ...] = (), **extra: str) -> dict[str, str]:
    """This process's environment without Temporal and provider settings (and
    without variables starting with any of ``drop``), with its own
    AGENTLOOP_HOME and the checkout on PYTHONPATH; ``extra`` on top."""
    prefixes = ("TEMPORAL_", "OPENAI_", "ANTHROPIC_", *drop)
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env["AGENTLOOP_HOME"] = str(tmp_path / "home")
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


def agentloop(
    *args: str, env: dict[str, str], cwd: Path = ROOT, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """``agentloop ARGS`` to its end (blocks: use :func:`agentloop_async` where the test's worker runs)."""
    return subprocess.run([sys.executable, "-m", "agentloop.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


@dataclass
class Proc:
    code: int
    out: str
    err: str


async def agentloop_async(*args: str, env: dict[str, str], stdin: str | None = None) -> Proc:
    """``agentloop ARGS`` without blocking the event loop (the test's worker runs on it)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentloop.cli", *args, cwd=ROOT, env=env,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode() if stdin is not None else None), 60)
    assert proc.returncode is not None
    return Proc(proc.returncode, out.decode(), err.decode())


async def start_run(
    instruction: str, model: str, workspace: Path, env: dict[str, str], *extra: str, stdin: Any = None
) -> asyncio.subprocess.Process:
    """``agentloop run`` as a subprocess that imports this module's scripted models."""
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentloop.cli", "run", instruction, "--model", model,
        "--workspace", str(workspace), "--import", "tests.helpers.cli", *extra,
        cwd=ROOT, env=env, stdin=asyncio.subprocess.DEVNULL if stdin is None else stdin,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )


async def read_until(stream: asyncio.StreamReader, text: str, timeout: float = 30.0) -> str:
    """Read a subprocess's output until ``text`` appears (prompts end without a newline)."""
    seen = b""
    deadline = time.monotonic() + timeout
    while text.encode() not in seen:
        chunk = await asyncio.wait_for(stream.read(4096), max(0.1, deadline - time.monotonic()))
        if not chunk:
            raise AssertionError(f"output ended before {text!r}:\n{seen.decode()}")
        seen += chunk
    return seen.decode()


def temporal(server: DevServer, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the plain ``temporal`` CLI against ``server`` (blocks)."""
    return subprocess.run(
        [find_temporal_binary(), *args, "--address", server.address],
        capture_output=True, text=True, timeout=60,
    )


async def run_temporal(server: DevServer, *args: str) -> subprocess.CompletedProcess[str]:
    """:func:`temporal` off the event loop's thread."""
    return await asyncio.to_thread(temporal, server, *args)


def write_script(path: str = "out.txt") -> str:
    """A scripted model that writes ``path`` once, then repeats the result."""
    return script(calls(call("write_file", {"file_path": path, "content": "hello\n"})), echo_results)


register_scripted_model("cli-ops-write", [
    calls(call("write_file", {"file_path": "out.txt", "content": "hello\n"})),
    echo_results,
])
register_scripted_model("cli-ops-write-two", [
    calls(call("write_file", {"file_path": "a.txt", "content": "a\n"}),
          call("write_file", {"file_path": "b.txt", "content": "b\n"})),
    echo_results,
])

#: A model with no step to play: its first LLM step fails.
register_scripted_model("cli-no-steps", [])


def plain_text(ansi: str) -> str:
    """Terminal output without its escape sequences, with plain newlines."""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", ansi).replace("\r\n", "\n")
