"""How a run's Temporal history grows with its number of steps.

Runs, on one local dev server, runs of 5, 20, 50 and 200 steps with a
scripted model whose every step writes ~400 characters of text and calls a
tool that answers ~1,500 characters (so each step adds ~2 KB of messages).
For each run it prints the history's size (bytes of its events, as the
server stores them, over all its Temporal runs when it continued as new)
and event count, the bytes of the run's messages, and
their ratio; then the growth per step between sizes (linear growth keeps it
flat). With ``--deltas`` the runs also stream their deltas (each published
batch is a signal in history); without, they do not. The scripted model
then pauses ``--delta-seconds`` (0.05) before each of an answer's chunks,
as a provider streaming slowly would, so that an answer spans several
batch windows: one that comes whole publishes no deltas at all (its
completed message carries it).

The last column is for comparison: what the LLM steps' inputs alone would
weigh if each carried the transcript so far, as they did before the
transcript was passed by reference (quadratic in the number of steps).

Usage::

    python -m benchmarks.durability.history_growth [--steps 5 20 50 200] [--deltas [--delta-seconds 0.05]]
                                        [--continue-every STEPS]
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from dataclasses import dataclass

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory

from agentloop import AgentClient, AgentSpec
from agentloop.testing import call, calls, register_scripted_model, reply
from agentloop.tools.registry import ToolRegistry
from agentloop.workers.devserver import DevServer
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


async def chain_histories(client: Client, workflow_id: str) -> list[WorkflowHistory]:
    """The histories of every Temporal run of a run, first to last: a run
    that continued as new has one per hand-over (README "Continue-as-new"),
    each started with the previous one's id."""
    histories = [await client.get_workflow_handle(workflow_id).fetch_history()]
    while previous := histories[0].events[0].workflow_execution_started_event_attributes.continued_execution_run_id:
        histories.insert(0, await client.get_workflow_handle(workflow_id, run_id=previous).fetch_history())
    return histories


@dataclass(frozen=True)
class Row:
    """One run's history: ``steps`` asked for, ``taken`` run."""

    steps: int
    taken: int
    runs: int
    events: int
    signals: int
    history_bytes: int
    message_bytes: int
    by_value_bytes: int
    seconds: float


async def measure(step_counts: list[int], deltas: bool, delta_seconds: float = 0.05,
                  continue_every: int | None = None) -> list[Row]:
    """One run of each of ``step_counts`` steps, on a dev server of its own
    (``continue_every``: ``AgentSpec.continue_as_new_every_steps``)."""
    registry = ToolRegistry()

    @registry.tool
    def report(section: int) -> str:
        """A report section of about 1,500 characters."""
        return (f"Section {section}: " + "all figures within range; " * 60)[:1500]

    rows = []
    with DevServer() as server:
        await server.wait_ready()
        client = await connect(server.address)
        queue = f"growth-{uuid.uuid4().hex[:8]}"
        agents = AgentClient(client, task_queue=queue)
        async with build_worker(client, task_queue=queue, registry=registry):
            for steps in step_counts:
                name = f"growth{steps}-{uuid.uuid4().hex[:6]}"
                register_scripted_model(name, _script(steps), delta_seconds=delta_seconds if deltas else 0.0)
                spec = AgentSpec(model=f"scripted:{name}", tools=["report"], max_steps=steps + 1,
                                 default_permission="allow", stream_deltas=deltas,
                                 continue_as_new_every_steps=continue_every)
                started = time.perf_counter()
                handle = await agents.start(spec, "Check every section of the report.")
                result = await handle.result()
                seconds = time.perf_counter() - started
                histories = await chain_histories(client, handle.workflow_handle.id)
                events = [e for history in histories for e in history.events]
                messages = await handle.messages()
                # What the LLM inputs alone would weigh if each carried the transcript so far.
                by_value = sum(
                    sum(len(m.model_dump_json()) for m in messages[: 1 + 2 * i])
                    for i in range(result.report.step_count)
                )
                signals = sum(1 for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)
                rows.append(Row(steps, result.report.step_count, len(histories), len(events), signals,
                                sum(e.ByteSize() for e in events),
                                sum(len(m.model_dump_json()) for m in messages), by_value, seconds))
    return rows


async def main(step_counts: list[int], deltas: bool, delta_seconds: float = 0.05,
               continue_every: int | None = None) -> None:
    rows = await measure(step_counts, deltas, delta_seconds, continue_every)
    print(f"history growth, scripted model, deltas "
          f"{f'on (a chunk every {delta_seconds:g} s)' if deltas else 'off'}")
    print(f"{'steps':>6} {'runs':>5} {'events':>7} {'signals':>8} {'history KB':>11} {'messages KB':>12} {'ratio':>6} "
          f"{'KB/step':>8} {'by-value LLM inputs KB':>23} {'s':>6}")
    previous: Row | None = None
    for row in rows:
        per_step = ""
        if previous is not None:
            per_step = f"{(row.history_bytes - previous.history_bytes) / 1024 / (row.taken - previous.taken):.2f}"
        print(f"{row.taken:>6} {row.runs:>5} {row.events:>7} {row.signals:>8} {row.history_bytes / 1024:>11.1f} "
              f"{row.message_bytes / 1024:>12.1f} {row.history_bytes / row.message_bytes:>6.2f} {per_step:>8} "
              f"{row.by_value_bytes / 1024:>23.1f} {row.seconds:>6.1f}")
        previous = row


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[5, 20, 50, 200])
    parser.add_argument("--deltas", action="store_true", help="stream deltas (signals in history)")
    parser.add_argument("--delta-seconds", type=float, default=0.05,
                        help="with --deltas, the model's pause before each chunk of an answer (default 0.05)")
    parser.add_argument("--continue-every", type=int, default=None, metavar="STEPS",
                        help="continue each run as new every STEPS steps (AgentSpec.continue_as_new_every_steps)")
    args = parser.parse_args()
    if args.delta_seconds < 0:
        parser.error(f"--delta-seconds must be 0 or more, not {args.delta_seconds:g}")
    if args.continue_every is not None and args.continue_every < 1:
        parser.error(f"--continue-every must be 1 or more, not {args.continue_every}")
    asyncio.run(main(args.steps, args.deltas, args.delta_seconds, args.continue_every))
