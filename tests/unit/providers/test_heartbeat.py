"""Heartbeats while work runs, and the per-step look-ups kept off the hot path.

``keep_heartbeating`` runs inside a real activity context (the SDK's
``ActivityEnvironment``, which hands every heartbeat to ``on_heartbeat``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
from datetime import timedelta

import pytest
from temporalio.testing import ActivityEnvironment

from agentloop.activities import agent_activities
from agentloop.activities.heartbeat import keep_heartbeating


def environment(beats: list[tuple[object, ...]]) -> ActivityEnvironment:
    """An activity context whose heartbeat timeout gives a 0.5 s interval."""
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, heartbeat_timeout=timedelta(seconds=1.5))
    env.on_heartbeat = lambda *details: beats.append(details)
    return env


async def test_a_block_shorter_than_the_interval_sends_no_heartbeat() -> None:
    beats: list[tuple[object, ...]] = []

    async def work() -> str:
        async with keep_heartbeating("details"):
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.8)  # a beat left scheduled would land here
        return "done"

    assert await environment(beats).run(work) == "done"
    assert beats == []


async def test_a_long_block_beats_every_interval_with_the_current_details() -> None:
    beats: list[tuple[object, ...]] = []
    progress = {"n": 0}

    async def work() -> int:
        async with keep_heartbeating(current=lambda: dict(progress)):
            for n in range(1, 13):
                progress["n"] = n
                await asyncio.sleep(0.1)
        during = len(beats)
        await asyncio.sleep(0.8)
        return during

    during = await environment(beats).run(work)
    # 1.2 s or more at one beat each 0.5 s: two beats at least, none after the block.
    assert during >= 2 and len(beats) == during, beats
    seen = [details[0]["n"] for details in beats]
    assert seen == sorted(seen) and seen[0] >= 1 and len(set(seen)) == len(seen)


async def test_beat_now_sends_the_first_details_before_the_block_runs() -> None:
    beats: list[tuple[object, ...]] = []

    async def work() -> int:
        async with keep_heartbeating("earlier usage", beat_now=True):
            return len(beats)

    assert await environment(beats).run(work) == 1
    assert beats == [("earlier usage",)]


async def test_a_heartbeat_that_fails_fails_the_block_and_stops_beating() -> None:
    calls = {"n": 0}

    def broken() -> object:
        calls["n"] += 1
        raise ValueError("details that do not serialise")

    async def work() -> None:
        async with keep_heartbeating(current=broken):
            await asyncio.sleep(1.2)

    with pytest.raises(ValueError, match="do not serialise"):
        await environment([]).run(work)
    assert calls["n"] == 1


async def test_the_blocks_own_error_wins_over_a_failed_beat() -> None:
    def broken() -> object:
        raise ValueError("details that do not serialise")

    async def work() -> None:
        async with keep_heartbeating(current=broken):
            await asyncio.sleep(0.7)  # one failed beat at 0.5 s
            raise KeyError("the block's own error")

    with pytest.raises(KeyError, match="own error"):
        await environment([]).run(work)


async def test_an_open_block_holds_a_few_objects_for_the_collector() -> None:
    """Every LLM step and tool call holds one while it runs: what it holds
    is walked by each garbage collection meanwhile (README "Performance")."""

    def progress() -> object:
        return None

    async def work() -> float:
        gc.collect()
        gc.disable()
        try:
            before = len(gc.get_objects())
            blocks = [keep_heartbeating(current=progress) for _ in range(50)]
            for block in blocks:
                await block.__aenter__()
            held = (len(gc.get_objects()) - before) / len(blocks)
            for block in blocks:
                await block.__aexit__(None, None, None)
            return held
        finally:
            gc.enable()

    held = await environment([]).run(work)
    # The block, its timer, the timer's context and callback (a generator-based one held 18).
    assert held <= 5, held


async def test_a_local_activity_does_not_heartbeat() -> None:
    beats: list[tuple[object, ...]] = []
    env = environment(beats)
    env.info = dataclasses.replace(env.info, is_local=True)

    async def work() -> str:
        async with keep_heartbeating("details", beat_now=True):
            await asyncio.sleep(1.2)
        return "done"

    assert await env.run(work) == "done"
    assert beats == []


class Streaming:
    async def complete(self, request: object, on_delta: object = None) -> None: ...


class Plain:
    async def complete(self, request: object) -> None: ...


class CallableComplete:
    """A model whose ``complete`` is an unhashable callable object."""

    def __init__(self, streams: bool) -> None:
        self.complete = self.Streaming() if streams else self.Plain()

    class Streaming:
        __hash__ = None

        def __call__(self, request: object, on_delta: object = None) -> None: ...

    class Plain:
        __hash__ = None

        def __call__(self, request: object) -> None: ...


def test_whether_a_model_streams_is_read_from_its_signature_once_per_function() -> None:
    agent_activities._takes_on_delta.cache_clear()
    assert agent_activities._streams(Streaming()) is True
    assert agent_activities._streams(Plain()) is False
    for _ in range(5):  # new instances, same functions: no signature read again
        assert agent_activities._streams(Streaming()) is True
        assert agent_activities._streams(Plain()) is False
    info = agent_activities._takes_on_delta.cache_info()
    assert (info.misses, info.hits) == (2, 10)


def test_an_unhashable_complete_is_still_read_right() -> None:
    assert agent_activities._streams(CallableComplete(streams=True)) is True
    assert agent_activities._streams(CallableComplete(streams=False)) is False
