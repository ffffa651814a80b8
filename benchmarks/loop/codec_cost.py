"""What payload encryption costs a step: agentloop plain against agentloop
with every payload sealed (AES-256-GCM, ``EncryptionCodec``), in one run.

On one local dev server (fast polling: transfer/timer MaxPollRPS=1000), in
one process, two clients and workers on queues of their own: one with
pydantic's data converter, one with the same and the codec. Each repetition
runs one N-step run on each (a scripted LLM step asking for one ``echo``
call with a 200-character text, then "done"; deltas streamed, the default),
the order alternating. Prints medians of wall ms a step and this process's
CPU ms a step (client and worker both live here), the ratios encrypted /
plain, and the codec's own time a step (inside ``encode`` and ``decode``,
both sides), with the payloads and bytes it sealed and opened. Usage::

    python -m benchmarks.loop.codec_cost [--steps 25] [--reps 7]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid
from collections.abc import Sequence

from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from agentloop import AgentClient, AgentSpec
from agentloop.shared.base.encryption import EncryptionCodec, with_codec
from agentloop.testing import call, calls, register_scripted_model, reply
from agentloop.tools.registry import ToolRegistry
from agentloop.workers.devserver import DevServer
from agentloop.workers.worker import build_worker, connect

TEXT = ("The quick brown fox jumps over the lazy dog. " * 5)[:200]


class TimedCodec(EncryptionCodec):
    """An ``EncryptionCodec`` that adds up the time spent in it."""

    seconds = 0.0
    payloads = 0
    sealed_bytes = 0

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        started = time.perf_counter()
        done = await super().encode(payloads)
        self.seconds += time.perf_counter() - started
        self.payloads += len(done)
        self.sealed_bytes += sum(p.ByteSize() for p in done)
        return done

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        started = time.perf_counter()
        done = await super().decode(payloads)
        self.seconds += time.perf_counter() - started
        self.payloads += len(payloads)
        return done


async def one_run(agents: AgentClient, spec: AgentSpec, steps: int) -> tuple[float, float]:
    """Wall ms and CPU ms a step of one run."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = await agents.run(spec, "go")
    if result.final_text != "done":
        raise RuntimeError(f"a run answered {result.final_text!r}, not 'done'")
    return (time.perf_counter() - wall) * 1000 / steps, (time.process_time() - cpu) * 1000 / steps


async def main(steps: int, reps: int) -> None:
    registry = ToolRegistry()

    @registry.tool
    async def echo(text: str) -> str:
        """Return the text."""
        return text

    register_scripted_model("bench-codec", [calls(call("echo", {"text": TEXT})) for _ in range(steps)]
                            + [reply("done")])
    spec = AgentSpec(model="scripted:bench-codec", tools=["echo"], max_steps=steps + 2, default_permission="allow")
    codec = TimedCodec([("bench", os.urandom(32))])
    with DevServer() as server:
        await server.wait_ready()
        plain_client = await connect(server.address)
        sealed_client = await Client.connect(server.address,
                                             data_converter=with_codec(pydantic_data_converter, codec))
        queue = f"codec-{uuid.uuid4().hex[:6]}"
        systems = {"plain": AgentClient(plain_client, task_queue=queue + "-plain"),
                   "encrypted": AgentClient(sealed_client, task_queue=queue + "-sealed")}
        wall: dict[str, list[float]] = {name: [] for name in systems}
        cpu: dict[str, list[float]] = {name: [] for name in systems}
        async with build_worker(plain_client, task_queue=queue + "-plain", registry=registry), \
                build_worker(sealed_client, task_queue=queue + "-sealed", registry=registry):
            for agents in systems.values():  # warm up
                await agents.run(spec, "go")
            codec.seconds, codec.payloads, codec.sealed_bytes = 0.0, 0, 0
            for rep in range(reps):
                order = list(systems) if rep % 2 == 0 else list(reversed(systems))
                for name in order:
                    wall_ms, cpu_ms = await one_run(systems[name], spec, steps)
                    wall[name].append(wall_ms)
                    cpu[name].append(cpu_ms)
    median = {name: (statistics.median(wall[name]), statistics.median(cpu[name])) for name in systems}
    print(f"dev server: fast polling (transfer/timer MaxPollRPS=1000); runs of {steps} tool steps, "
          f"medians of {reps} repetitions, plain and encrypted alternating; client and worker in this process")
    print(f"{'':<11}{'wall ms/step':>14}{'CPU ms/step':>13}")
    for name, (wall_ms, cpu_ms) in median.items():
        print(f"{name:<11}{wall_ms:>14.1f}{cpu_ms:>13.2f}")
    (plain_wall, plain_cpu), (sealed_wall, sealed_cpu) = median["plain"], median["encrypted"]
    print(f"{'ratio':<11}{sealed_wall / plain_wall:>13.2f}x{sealed_cpu / plain_cpu:>12.2f}x  (encrypted / plain)")
    runs = reps * steps
    print(f"the codec itself: {codec.seconds * 1000 / runs:.3f} ms a step ({codec.payloads / runs:.1f} payloads "
          f"sealed or opened, {codec.sealed_bytes / 1024 / runs:.1f} KiB sealed)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=25, help="tool steps a run")
    parser.add_argument("--reps", type=int, default=7, help="repetitions (medians are printed)")
    args = parser.parse_args()
    for flag, value in (("--steps", args.steps), ("--reps", args.reps)):
        if value < 1:
            parser.error(f"{flag} must be at least 1, not {value}")
    asyncio.run(main(args.steps, args.reps))
