"""How a thread's Temporal history grows with its number of messages.

Runs, on one local dev server, threads of 10, 50 and 200 messages (user and
assistant in turns: 5, 25 and 100 turns) with a scripted model; each user
message is ~300 characters and each answer ~600. A thread is one workflow
that stays open between turns (README "Conversations"). For each thread it
prints the history's size (bytes of its events as the server stores them,
every Temporal run of the thread summed: ``AgentThread="<id>"`` finds them),
its event count, the bytes of the thread's messages, their ratio, and the
growth per message between sizes (linear growth keeps it flat).

The last column is COMPUTED, not measured: what the inputs alone would weigh
if each message started a new run carrying the conversation so far by value
(turn k's run gets the 2k-1 messages before its answer), from the same
conversation's message sizes. It grows with the square of the messages.

Usage::

    python -m benchmarks.durability.thread_growth [--messages 10 50 200]
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid

from agentloop import AgentClient, AgentSpec
from agentloop.shared.runs.search_attributes import AGENT_THREAD
from agentloop.testing import register_scripted_model, reply
from agentloop.tools.registry import ToolRegistry
from agentloop.workers.devserver import DevServer
from agentloop.workers.worker import build_worker, connect

QUESTION = ("Here is the next thing I would like you to look at in the report: the totals for the quarter, "
            "how they compare with last year, and whether anything stands out that we should explain. ") * 2
ANSWER = ("The quarter's totals are within the expected range; compared with last year revenue is up and "
          "costs are flat, so the margin improved. Two items stand out: a one-off refund in the second "
          "month and a larger marketing spend, both explained in the notes. ") * 2


def _answer(request):
    turn = sum(1 for m in request.messages if m.role == "user")
    return reply(f"Turn {turn}. " + ANSWER[:590])


async def _thread(agents: AgentClient, client, model: str, messages: int) -> tuple:
    thread_id = f"growth-{messages}-{uuid.uuid4().hex[:6]}"
    spec = AgentSpec(model=model)
    started = time.perf_counter()
    handle = await agents.start(spec, f"Turn 1. {QUESTION[:290]}", thread_id=thread_id)
    await handle.result()
    for turn in range(2, messages // 2 + 1):
        await (await agents.send(thread_id, f"Turn {turn}. {QUESTION[:290]}")).result()
    seconds = time.perf_counter() - started
    conversation = await handle.messages()
    history_bytes = events = runs = 0
    async for execution in client.list_workflows(f'{AGENT_THREAD.name}="{thread_id}"'):
        history = await client.get_workflow_handle(thread_id, run_id=execution.run_id).fetch_history()
        history_bytes += sum(e.ByteSize() for e in history.events)
        events += len(history.events)
        runs += 1
    sizes = [len(m.model_dump_json()) for m in conversation]
    # Computed: a run per message, by value: turn k's run starts with the 2k-1 messages before its answer.
    by_value = sum(sum(sizes[: 2 * k + 1]) for k in range(len(sizes) // 2))
    await handle.cancel()
    return messages, len(conversation), runs, events, history_bytes, sum(sizes), by_value, seconds


async def main(message_counts: list[int]) -> None:
    with DevServer() as server:
        await server.wait_ready()
        client = await connect(server.address)
        queue = f"thread-growth-{uuid.uuid4().hex[:8]}"
        agents = AgentClient(client, task_queue=queue)
        name = f"thread-growth-{uuid.uuid4().hex[:6]}"
        register_scripted_model(name, _answer)
        rows = []
        async with build_worker(client, task_queue=queue, registry=ToolRegistry()):
            for count in message_counts:
                rows.append(await _thread(agents, client, f"scripted:{name}", count))
    print(f"{'messages':>8} {'runs':>4} {'events':>6} {'history B':>10} {'messages B':>10} {'ratio':>5} "
          f"{'B/message':>9} {'by value B (computed)':>21} {'seconds':>7}")
    previous = None
    for _wanted, got, runs, events, history_bytes, message_bytes, by_value, seconds in rows:
        per_message = (f"{(history_bytes - previous[1]) / (got - previous[0]):9,.0f}" if previous else f"{'':>9}")
        print(f"{got:>8} {runs:>4} {events:>6} {history_bytes:>10,} {message_bytes:>10,} "
              f"{history_bytes / message_bytes:>5.1f} {per_message} {by_value:>21,} {seconds:>7.1f}")
        previous = (got, history_bytes)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, nargs="+", default=[10, 50, 200])
    asyncio.run(main(parser.parse_args().messages))
