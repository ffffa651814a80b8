"""The CPU of the Temporal server and of this process (worker and gateway)
while runs held in their LLM step are followed by one gateway reader
(``RunHub``) each, polling against waiting, and while nobody follows them:
for ``benchmarks.streaming.first_token --follow``."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from agentloop import AgentClient, AgentSpec
from agentloop.server.streams.hub import RunHub


def cpu_of(pid: int | None) -> float:
    if pid is None:
        return float("nan")
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def cpu_window(server_pid: int | None, seconds: float) -> tuple[float, float]:
    s0, p0 = cpu_of(server_pid), time.process_time()
    await asyncio.sleep(seconds)
    return cpu_of(server_pid) - s0, time.process_time() - p0


async def follow_cpu(agents: AgentClient, server_pid: int | None, runs: int, seconds: float,
                     release: asyncio.Event) -> dict[str, tuple[float, float]]:
    handles = [await agents.start(AgentSpec(model=HELD, stream_deltas=False), "go") for _ in range(runs)]
    out: dict[str, tuple[float, float]] = {}
    for label, wait in (("30 followed, polling", False), ("30 followed, waiting", True)):
        hub = RunHub(agents, wait=wait)
        readers = [asyncio.create_task(_drain(hub, h.run_id)) for h in handles]
        await asyncio.sleep(1.0)  # caught up
        out[label.replace("30", str(runs))] = await cpu_window(server_pid, seconds)
        for r in readers:
            r.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        await hub.close()
    await asyncio.sleep(1.0)
    out["idle (nobody follows)"] = await cpu_window(server_pid, seconds)
    release.set()
    for h in handles:
        await h.result()
    return out


async def _drain(hub: RunHub, run_id: str) -> None:
    async for _ in hub.subscribe(run_id):
        pass


HELD = "scripted:bench-first-token-held"
