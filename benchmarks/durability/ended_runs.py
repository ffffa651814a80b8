"""What the transcripts of ended runs cost a worker's garbage collector.

A worker keeps the transcripts of the runs it served in its cache
(``activities/transcripts.py``) until the cache's bounds push them out: it
is not told when a run ends. A run whose last LLM step answered without
calling a tool is parked there as JSON bytes. This fills one cache with
``--runs`` transcripts of ``--steps`` tool steps each (a user message, then
per step an assistant message calling a tool and the tool's result, then
the final answer), first as live copies (what every ended run was held as
before parking, and what a run in flight is held as: the baseline), then
parked, and reports for each:

* the objects the garbage collector tracks, over an empty cache;
* the time of a full collection (``gc.collect()``, median of ``--repeat``),
  and of one over an empty cache (the floor);
* the cache's bytes as it counts them (JSON).

And what parking costs: per run, the record of its last answer with and
without parking (serialising the transcript), and turning a parked run back
into objects (a run that goes on after all).

Usage::

    python -m benchmarks.durability.ended_runs [--runs 1000,10000,50000] [--steps 3] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
from typing import Any

from agentloop.activities.transcripts import TranscriptCache
from agentloop.shared.base.messages import Message, ToolCallPart, ToolResultPart
from agentloop.shared.definition.activity_io import ToolDefinition, TranscriptSeed
from agentloop.shared.runs.transcripts import EMPTY_HASH, TranscriptRef, context_hash, transcript_hashes

SYSTEM_PROMPT = "You are a careful assistant. Use the tools when they help."
TOOLS = [
    ToolDefinition(
        name="read_file", description="Read a file in the workspace",
        parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    ),
    ToolDefinition(
        name="grep_files", description="Search files for a pattern",
        parameters={"type": "object", "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}},
                    "required": ["pattern"]},
    ),
]


def transcript(run: int, steps: int) -> list[Message]:
    """A run's messages before its last answer."""
    messages = [Message.user(f"Run {run}: what does the config say about retries?")]
    for step in range(steps):
        call_id = f"call-{run}-{step}"
        messages.append(Message.assistant(f"Looking at step {step}.", [
            ToolCallPart(id=call_id, name="read_file", arguments={"path": f"config/{step}.toml"}),
        ]))
        messages.append(Message(role="tool", content=[
            ToolResultPart(id=call_id, name="read_file", content=f"[retry]\nattempts = {step + 3}\nbackoff = 2.0\n"),
        ]))
    return messages


def answer(run: int, steps: int) -> Message:
    """A run's last answer: no tool call."""
    return Message.assistant(f"Run {run}: {steps + 2} attempts, backing off by 2.0.")


def reference(messages: list[Message]) -> TranscriptRef:
    """What a step of a run with these messages names."""
    hashes = transcript_hashes(messages)
    return TranscriptRef(message_count=len(messages), transcript_hash=hashes[-1] if hashes else EMPTY_HASH,
                         context_hash=context_hash(SYSTEM_PROMPT, TOOLS))


async def no_query(*_: object) -> Any:
    """Every step here is served from the cache: a query would be a bug."""
    raise AssertionError("the cache asked the run for its transcript")


async def fill(cache: TranscriptCache, runs: int, steps: int) -> None:
    """``runs`` runs resolved once each (first steps carrying their
    transcript by value, as lean runs do)."""
    for run in range(runs):
        messages = transcript(run, steps)
        seed = TranscriptSeed(system_prompt=SYSTEM_PROMPT, tools=TOOLS, messages=messages)
        await cache.resolve(f"run-{run}", reference(messages), no_query, no_query, seed=seed)


def full_collection_ms(repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        gc.collect()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def tracked() -> int:
    gc.collect()
    return len(gc.get_objects())


async def measure(runs: int, steps: int, repeat: int) -> dict[str, float]:
    floor_objects, floor_ms = tracked(), full_collection_ms(repeat)
    cache = TranscriptCache()
    await fill(cache, runs, steps)
    live_objects, live_ms, live_bytes = tracked() - floor_objects, full_collection_ms(repeat), cache.size
    answers = [answer(run, steps) for run in range(runs)]
    started = time.perf_counter()
    for run, last in enumerate(answers):
        cache.record_response(f"run-{run}", last)
    park_us = (time.perf_counter() - started) * 1e6 / runs
    del answers, last
    assert cache.stats.parked == runs
    parked_objects, parked_ms, parked_bytes = tracked() - floor_objects, full_collection_ms(repeat), cache.size
    return {
        "runs": runs, "floor_ms": floor_ms,
        "live_objects": live_objects, "live_ms": live_ms, "live_bytes": live_bytes,
        "parked_objects": parked_objects, "parked_ms": parked_ms, "parked_bytes": parked_bytes,
        "park_us": park_us,
    }


async def record_costs(steps: int, n: int = 2000) -> tuple[float, float, float]:
    """Microseconds a run: recording a last answer that calls a tool (no
    parking), one that does not (parking), and a parked run's next step
    (turning it back into objects, answer predicted)."""
    calling = Message.assistant("one more look", [ToolCallPart(id="x", name="read_file", arguments={"path": "a"})])
    costs = []
    for final in (False, True):
        cache = TranscriptCache()
        await fill(cache, n, steps)
        answers = [answer(run, steps) if final else calling for run in range(n)]
        started = time.perf_counter()
        for run, last in enumerate(answers):
            cache.record_response(f"run-{run}", last)
        costs.append((time.perf_counter() - started) * 1e6 / n)
    refs = [reference([*transcript(run, steps), answer(run, steps)]) for run in range(n)]
    started = time.perf_counter()
    for run, ref in enumerate(refs):
        await cache.resolve(f"run-{run}", ref, no_query, no_query)
    costs.append((time.perf_counter() - started) * 1e6 / n)
    assert cache.stats.unparked == n and cache.stats.predicted == n
    return costs[0], costs[1], costs[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", default="1000,10000,50000", help="comma-separated numbers of ended runs held")
    parser.add_argument("--steps", type=int, default=3, help="tool steps a run")
    parser.add_argument("--repeat", type=int, default=5, help="full collections timed, median")
    args = parser.parse_args()
    try:
        counts = [int(n) for n in args.runs.split(",")]
    except ValueError:
        parser.error(f"--runs takes numbers separated by commas, e.g. 1000,10000; got {args.runs!r}")
    if any(n < 1 for n in counts) or args.steps < 0 or args.repeat < 1:
        parser.error("--runs must be at least 1, --steps at least 0, --repeat at least 1")
    print(f"ended runs held by one worker's transcript cache: {args.steps} tool steps a run "
          f"({2 * args.steps + 2} messages with the last answer); full collections, median of {args.repeat}")
    print(f"{'runs':>7} {'floor ms':>9} {'live objects':>13} {'live ms':>8} {'live MB':>8} "
          f"{'parked objects':>15} {'parked ms':>10} {'parked MB':>10} {'ms parked/live':>15} {'park us/run':>12}")
    for runs in counts:
        row = asyncio.run(measure(runs, args.steps, args.repeat))
        print(f"{runs:>7} {row['floor_ms']:>9.1f} {row['live_objects']:>13,.0f} {row['live_ms']:>8.1f} "
              f"{row['live_bytes'] / 1e6:>8.1f} {row['parked_objects']:>15,.0f} {row['parked_ms']:>10.1f} "
              f"{row['parked_bytes'] / 1e6:>10.1f} {row['parked_ms'] / row['live_ms']:>14.2f}x "
              f"{row['park_us']:>12.1f}")
    calling, final, unpark = asyncio.run(record_costs(args.steps))
    print(f"recording a run's answer: {calling:.1f} us calling a tool (kept live), {final:.1f} us with no call "
          f"(parked); a parked run's next step: {unpark:.1f} us")


if __name__ == "__main__":
    main()
