"""What the shell sandbox and the worker roles cost.

Three measurements, each against its floor in the same run:

* per command: ``shell_command`` running ``true`` in each sandbox mode that
  works here, against ``none`` without Landlock measured in the same run
  (the floor: a plain ``bash -c`` plus the init): what each mode's
  confinement adds per command (``namespace`` and ``none`` with Landlock
  where the kernel has it, ``bwrap``);
* the network: ``namespace`` mode (with Landlock) with
  ``AGENTLOOP_SHELL_NETWORK=on`` (the worker's network, the default before
  commands got a network namespace) against ``off`` (a network namespace
  of its own with its loopback brought up, the default now) and ``web``
  (the worker's network under Landlock's TCP rules), in alternating rounds;
* the first command's one-off probe of the namespace sandbox;
* a tools worker subprocess (``agentloop worker --role tools``, what an
  embedded setup with a key-free tools process would start) against an
  in-process role ``all`` worker: time from starting the workers to the end
  of a one-tool-call run, on one local dev server.

Usage::

    python -m benchmarks.tools.sandbox_cost [--commands 20] [--repeat 3] [--rounds 5]

``agentloop run --model scripted:demo`` end to end is measured from the shell
(see README, Security).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from agentloop import AgentClient, AgentSpec
from agentloop.activities.builtin_tools.shell_tool import shell_command
from agentloop.activities.shell_sandbox import sandbox
from agentloop.testing import call, calls, register_scripted_model, reply
from agentloop.tools.registry import ToolRegistry
from agentloop.tools.tool_context import ToolContext
from agentloop.workers.devserver import DevServer
from agentloop.workers.worker import build_worker, connect

ROOT = Path(__file__).resolve().parents[2]


async def plain_bash(n: int, ws: Path) -> float:
    """The floor: ``bash -c true`` as a plain child (what the tool did before the sandbox)."""
    started = time.perf_counter()
    for _ in range(n):
        proc = await asyncio.create_subprocess_exec("bash", "-c", "true", cwd=ws, start_new_session=True,
                                                    stdout=asyncio.subprocess.PIPE, stderr=subprocess.STDOUT)
        await proc.communicate()
    return (time.perf_counter() - started) * 1000 / n


async def per_command(mode: str, n: int, ws: Path, *, landlock: bool = True,
                      network: str = "off") -> tuple[float, str] | None:
    """Mean ms per ``shell_command('true')`` in ``mode``, and how its files were confined."""
    os.environ["AGENTLOOP_SHELL_SANDBOX"] = mode
    os.environ["AGENTLOOP_SHELL_NETWORK"] = network
    for probe in (sandbox._namespace_launcher, sandbox._none_launcher, sandbox.landlock_support):
        probe.cache_clear()
    saved = sandbox.landlock_support
    if not landlock:
        sandbox.landlock_support = lambda: "left out (the floor)"
    try:
        try:
            launcher = sandbox.resolve_launcher(sandbox.SandboxSettings.from_env())
        except Exception as exc:  # a mode this machine cannot do
            print(f"  {mode:9s} unavailable: {exc}")
            return None
        files = (f"Landlock ABI {launcher.landlock}" if launcher.landlock else
                 "own filesystem" if launcher.mode == "bwrap" else "files not confined")
        await shell_command("true", ctx=ToolContext(workspace=ws))  # warm
        started = time.perf_counter()
        for _ in range(n):
            await shell_command("true", ctx=ToolContext(workspace=ws))
        return (time.perf_counter() - started) * 1000 / n, files
    finally:
        sandbox.landlock_support = saved
        for probe in (sandbox._namespace_launcher, sandbox._none_launcher):
            probe.cache_clear()


async def worker_startup(server: DevServer, split: bool, ws: Path) -> float:
    """ms from starting the worker(s) to the end of a run with one shell call."""
    client = await connect(server.address)
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    name = f"bench-{uuid.uuid4().hex[:6]}"
    register_scripted_model(name, [calls(call("shell_command", {"command": "true"})), reply("done")])
    spec = AgentSpec(model=f"scripted:{name}", tools=["shell_command"], default_permission="allow",
                     workspace=str(ws))
    registry = ToolRegistry()
    from agentloop.activities.builtin_tools import register_builtin_tools

    register_builtin_tools(registry)
    started = time.perf_counter()
    proc = None
    if split:
        env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
        env.update(TEMPORAL_ADDRESS=server.address, AGENTLOOP_TASK_QUEUE=queue,
                   AGENTLOOP_WORKSPACE_ROOTS=str(ws.parent))
        proc = subprocess.Popen([sys.executable, "-m", "agentloop.cli", "worker", "--role", "tools"],
                                cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        role = "models" if split else "all"
        async with build_worker(client, task_queue=queue, registry=registry, role=role):
            result = await AgentClient(client, task_queue=queue).run(spec, "go")
            assert result.final_text == "done", result
            return (time.perf_counter() - started) * 1000
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait()


async def network_cost(commands: int, rounds: int, ws: Path) -> None:
    """Namespace mode with Landlock: network on, off and web, alternating."""
    times: dict[str, list[float]] = {"on": [], "off": [], "web": []}
    for _ in range(rounds):
        for network in times:
            measured = await per_command("namespace", commands, ws, network=network)
            if measured is None:
                return
            times[network].append(measured[0])
    on = statistics.median(times["on"])
    print(f"network, namespace mode with Landlock: median of {rounds} rounds of {commands} commands:")
    print(f"  {'on: the worker network (before)':40s} {on:6.1f} ms")
    for network, what in (("off", "own network namespace (now)"), ("web", "Landlock TCP rules, ports 80 443")):
        ms = statistics.median(times[network])
        print(f"  {network + ': ' + what:40s} {ms:6.1f} ms  ({ms - on:+.1f} ms)")


async def main(commands: int, repeat: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        saved = os.environ.get("AGENTLOOP_SHELL_SANDBOX")
        sandbox._namespace_launcher.cache_clear()
        started = time.perf_counter()
        sandbox._namespace_launcher()
        print(f"namespace probe (once per worker): {(time.perf_counter() - started) * 1000:.1f} ms")
        print(f"shell_command 'true', mean of {commands}; added cost against sandbox none without Landlock:")
        bash = await plain_bash(commands, ws)
        print(f"  plain bash -c, no tool              {bash:6.1f} ms")
        base = await per_command("none", commands, ws, landlock=False)
        assert base is not None
        floor = base[0]
        print(f"  none, files not confined (floor)    {floor:6.1f} ms")
        for mode, landlock in (("none", True), ("namespace", False), ("namespace", True), ("bwrap", True)):
            measured = await per_command(mode, commands, ws, landlock=landlock)
            if measured is not None and (landlock or mode == "namespace"):
                ms, files = measured
                print(f"  {mode + ', ' + files:35s} {ms:6.1f} ms  ({ms - floor:+.1f} ms, x{ms / floor:.2f})")
        await network_cost(commands, rounds, ws)
        os.environ.pop("AGENTLOOP_SHELL_NETWORK", None)
        if saved is None:
            os.environ.pop("AGENTLOOP_SHELL_SANDBOX", None)
        else:
            os.environ["AGENTLOOP_SHELL_SANDBOX"] = saved
        with DevServer() as server:
            await server.wait_ready()
            in_process, split = [], []
            for _ in range(repeat):
                in_process.append(await worker_startup(server, False, ws))
                split.append(await worker_startup(server, True, ws))
            a, b = statistics.median(in_process), statistics.median(split)
            print(f"workers started -> one-tool run done (median of {repeat}):")
            print(f"  role all, in process:                 {a:7.0f} ms")
            print(f"  models in process + tools subprocess: {b:7.0f} ms  ({b - a:+.0f} ms)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commands", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds of the network comparison")
    args = parser.parse_args()
    asyncio.run(main(args.commands, args.repeat, args.rounds))
