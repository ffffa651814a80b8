"""Scripts that use AgentClient exit cleanly: no ``Fatal Python error:
PyGILState_Release`` (exit 134) or segfault (139) at interpreter exit
(temporalio/sdk-python#300; see agentloop/teardown.py).

A short start-and-wait script, as README's "From backend code" shows it, runs
30 times in fresh interpreters against the session's dev server and a worker
in this process; every run must exit 0. Without the exit hook about one run
in ten crashed on these machines, so 30 clean runs are not luck."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from agentloop.workers.devserver import DevServer

RUNS = 30
#: Scripts run this many at a time (the machines have 2 cores).
PARALLEL = 3

SCRIPT = '''
import asyncio
import os

from agentloop import AgentClient, AgentSpec


async def main() -> None:
    client = await AgentClient.connect(os.environ["TEMPORAL_ADDRESS"], task_queue=os.environ["QUEUE"])
    spec = AgentSpec(model="scripted:demo", tools=["list_dir", "read_file"], workspace=os.environ["WORKSPACE"])
    handle = await client.start(spec, "Look around")
    result = await handle.result()
    print(result.final_text)


asyncio.run(main())
'''


async def run_script(script: Path, env: dict[str, str]) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script), env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await proc.communicate()
    return proc.returncode or 0, output.decode(errors="replace")


async def test_a_client_script_exits_0_every_time(
    dev_server: DevServer, worker, task_queue: str, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "notes.txt").write_text("hello\n")
    script = tmp_path / "start_and_wait.py"
    script.write_text(SCRIPT)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "TEMPORAL_ADDRESS": dev_server.address,
        "QUEUE": task_queue,
        "WORKSPACE": str(workspace),
    }
    results: list[tuple[int, str]] = []
    async with worker():
        for first in range(0, RUNS, PARALLEL):
            batch = range(first, min(first + PARALLEL, RUNS))
            results += await asyncio.gather(*(run_script(script, env) for _ in batch))
    crashed = [(code, output[-400:]) for code, output in results if code != 0]
    assert crashed == [], f"{len(crashed)} of {RUNS} runs did not exit 0: {crashed[:3]}"
    assert all("scripted demo model" in output for _, output in results)
