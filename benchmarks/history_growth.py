"""How a run's Temporal history grows with its number of steps.

Runs, on one local dev server, runs of 5, 20, 50 and 200 steps with a
scripted model whose every step writes ~400 characters of text and calls a
tool that answers ~1,500 characters (so each step adds ~2 KB of messages).
For each run it prints the history's size (bytes of its events, as the
server stores them) and event count, the bytes of the run's messages, and
their ratio; then the growth per step between sizes (linear growth keeps it
flat). With ``--deltas`` the runs also stream their deltas (each published
batch is a signal in history); without, they do not.

The last column is for comparison: what the LLM steps' inputs alone would
weigh if each carried the transcript so far, as they did before the
transcript was passed by reference (quadratic in the number of steps).

Usage::

    python -m benchmarks.history_growth [--steps 5 20 50 200] [--deltas]
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid

from agentloop import AgentClient, AgentSpec, ToolRegistry
from agentloop.devserver import DevServer
from agentloop.testing import call, calls, register_scripted_model, reply
from agentloop.workers.worker import build_worker, connect

TEXT = ("The next part of the plan is to check the output of the report tool and compare it with "
        "what we found before, then decide whether another pass is needed. ") * 3


def _script(steps: int):
    def step(request):
        done = sum(1 for m in request.messages if m.role == "assistant")
        if done >= steps - 1:
            return reply("All checks passed. " + TEXT[:200])
        return calls(call("report", {"section": done}), text=TEXT[:400])

    return step


async def main(step_counts: list[int], deltas: bool) -> None:
    registry = ToolRegistry()

    @registry.tool
    def report(section: int) -> str:
        """A report section of about 1,500 characters."""
        return (f"Section {section}: " + "all figures within range; " * 60)[:1500]

    with DevServer() as server:
        await server.wait_ready()
        client = await connect(server.address)
        queue = f"growth-{uuid.uuid4().hex[:8]}"
        agents = AgentClient(client, task_queue=queue)
        rows = []
        async with build_worker(client, task_queue=queue, registry=registry):
            for steps in step_counts:
                name = f"growth{steps}"
                register_scripted_model(name, _script(steps))
                spec = AgentSpec(model=f"scripted:{name}", tools=["report"], max_steps=steps + 1,
                                 default_permission="allow", stream_deltas=deltas)
                started = time.perf_counter()
                handle = await agents.start(spec, "Check every section of the report.")
                result = await handle.result()
                seconds = time.perf_counter() - started
                history = await handle.workflow_handle.fetch_history()
                history_bytes = sum(e.ByteSize() for e in history.events)
                messages = await handle.messages()
                message_bytes = sum(len(m.model_dump_json()) for m in messages)
                # What the LLM inputs alone would weigh if each carried the transcript so far.
                by_value = sum(
                    sum(len(m.model_dump_json()) for m in messages[: 1 + 2 * i]) for i in range(result.report.step_count)
                )
                rows.append((steps, result.report.step_count, len(history.events), history_bytes, message_bytes,
                             by_value, seconds))

    print(f"history growth, scripted model, deltas {'on' if deltas else 'off'}")
    print(f"{'steps':>6} {'events':>7} {'history KB':>11} {'messages KB':>12} {'ratio':>6} "
          f"{'KB/step':>8} {'by-value LLM inputs KB':>23} {'s':>6}")
    previous = None
    for steps, taken, events, history_bytes, message_bytes, by_value, seconds in rows:
        per_step = ""
        if previous is not None:
            per_step = f"{(history_bytes - previous[1]) / 1024 / (taken - previous[0]):.2f}"
        print(f"{taken:>6} {events:>7} {history_bytes / 1024:>11.1f} {message_bytes / 1024:>12.1f} "
              f"{history_bytes / message_bytes:>6.2f} {per_step:>8} {by_value / 1024:>23.1f} {seconds:>6.1f}")
        previous = (taken, history_bytes)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[5, 20, 50, 200])
    parser.add_argument("--deltas", action="store_true", help="stream deltas (signals in history)")
    args = parser.parse_args()
    asyncio.run(main(args.steps, args.deltas))
