"""Scheduled agents on the real dev server, with schedules every second or
two: runs start and carry ``AgentSchedule`` and a run id from the firing
time, the overlap policy holds while a deliberately slow scripted model
answers, pause and unpause, a schedule that feeds a thread (its third firing
sees the first two exchanges), and a bad cron expression is a sentence.

Temporal's time-skipping test server does not implement schedules (its
``CreateSchedule`` is unimplemented), so these run on the dev server in real
time, with intervals of a second or two; nothing asserts a duration.
"""

from __future__ import annotations

import asyncio
import re
import uuid

import pytest

from agentloop import AgentClient
from agentloop.shared.base.errors import UserError
from agentloop.shared.definition.activity_io import ModelRequest
from agentloop.shared.runs.search_attributes import AGENT_SCHEDULE, AGENT_TENANT, AGENT_THREAD
from agentloop.testing import reply, script_every_step
from tests.helpers.agents import recording, spec, user_texts
from tests.helpers.polling import eventually


def name() -> str:
    return f"sched-{uuid.uuid4().hex[:8]}"


async def test_firings_start_runs_that_carry_the_schedule(agent_client: AgentClient, worker) -> None:
    schedule, model = name(), script_every_step(lambda r: reply("digest sent"))
    async with worker():
        created = await agent_client.schedules.create(schedule, spec(model, name="digest", priority=2),
                                                      "send the digest", every="1s", tenant="acme")
        assert created.when == ["every 0:00:01"] and created.overlap == "skip"
        try:
            runs = await eventually(lambda: _runs(agent_client, schedule, at_least=2), "two firings' runs", 60)
        finally:
            await agent_client.schedules.delete(schedule)
        for run in runs:
            assert re.fullmatch(rf"{schedule}-\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ", run.id), run.id
            assert run.typed_search_attributes.get(AGENT_SCHEDULE) == schedule
            assert run.typed_search_attributes.get(AGENT_TENANT) == "acme"
        result = await agent_client.get_handle(runs[0].id).result()
        history = await agent_client.temporal.get_workflow_handle(runs[0].id).fetch_history()
    priority = history.events[0].workflow_execution_started_event_attributes.priority
    assert (priority.priority_key, priority.fairness_key) == (2, "acme")
    assert result.final_text == "digest sent"


async def _runs(client: AgentClient, schedule: str, *, at_least: int) -> list | None:
    found = [w async for w in client.temporal.list_workflows(f'AgentSchedule="{schedule}"')]
    return found if len(found) >= at_least else None


async def test_the_overlap_policy_holds_while_a_slow_model_answers(agent_client: AgentClient, worker) -> None:
    release = asyncio.Event()
    started: list[str] = []

    async def slow(request: ModelRequest):
        started.append(request.messages[-1].text)
        await release.wait()  # deliberately slow: it answers when the test says so
        return reply("done")

    schedule = name()
    async with worker():
        await agent_client.schedules.create(schedule, spec(script_every_step(slow)), "triage the night's tickets",
                                            every="1s", overlap="skip")
        try:
            described = await eventually(lambda: _skipped(agent_client, schedule, 2), "two firings skipped", 60)
            assert len(described.running) == 1  # the first run still answers; the others were skipped
            assert len(started) == 1
        finally:
            await agent_client.schedules.delete(schedule)
            release.set()
    assert described.fired == 1


async def _skipped(client: AgentClient, schedule: str, count: int):
    described = await client.schedules.describe(schedule)
    return described if described.skipped_overlap >= count else None


async def test_pause_and_unpause(agent_client: AgentClient, worker) -> None:
    schedule, model = name(), script_every_step(lambda r: reply("ok"))
    async with worker():
        await agent_client.schedules.create(schedule, spec(model), "check", every="1s", paused=True,
                                            note="created paused")
        try:
            described = await agent_client.schedules.describe(schedule)
            assert described.paused and described.note == "created paused" and described.fired == 0
            await agent_client.schedules.trigger(schedule)  # a trigger fires even while paused
            await eventually(lambda: _runs(agent_client, schedule, at_least=1), "the triggered run", 30)
            await agent_client.schedules.unpause(schedule)
            await eventually(lambda: _fired(agent_client, schedule, 3), "firings after unpause", 60)
            await agent_client.schedules.pause(schedule, "enough")
            paused = await agent_client.schedules.describe(schedule)
            assert paused.paused and paused.note == "enough"
            listed = await eventually(lambda: _listed(agent_client, schedule), "the schedule in the list", 30)
            assert listed.paused
        finally:
            await agent_client.schedules.delete(schedule)
        with pytest.raises(UserError, match=f"no schedule named {schedule}"):
            await agent_client.schedules.describe(schedule)


async def _fired(client: AgentClient, schedule: str, count: int):
    described = await client.schedules.describe(schedule)
    return described if described.fired >= count else None


async def _listed(client: AgentClient, schedule: str):
    return next((s for s in await client.schedules.list() if s.name == schedule and s.paused), None)


async def test_a_schedule_that_feeds_a_thread_remembers_earlier_firings(agent_client: AgentClient, worker) -> None:
    model, seen = recording(lambda r: reply(f"digest {len(user_texts(r))}"))
    schedule, thread = name(), f"thread-{uuid.uuid4().hex[:8]}"
    async with worker():
        await agent_client.schedules.create(schedule, spec(model), "what is new since last time?", every="2s",
                                            thread_id=thread, tenant="acme")
        try:
            await eventually(lambda: len(seen) >= 3 or None, "the third firing's answer", 90)
        finally:
            await agent_client.schedules.delete(schedule)
        described = await agent_client.temporal.get_workflow_handle(thread).describe()
        history = await agent_client.temporal.get_workflow_handle(thread).fetch_history()
    assert history.events[0].workflow_execution_started_event_attributes.priority.fairness_key == "acme"
    assert described.typed_search_attributes.get(AGENT_TENANT) == "acme"
    third = seen[2]
    assert [m.role for m in third.messages] == ["user", "assistant", "user", "assistant", "user"]
    assert [m.text for m in third.messages if m.role == "assistant"] == ["digest 1", "digest 2"]
    assert described.typed_search_attributes.get(AGENT_THREAD) == thread
    assert described.typed_search_attributes.get(AGENT_SCHEDULE) == schedule


async def test_a_bad_cron_expression_is_a_sentence(agent_client: AgentClient) -> None:
    with pytest.raises(UserError) as refused:
        await agent_client.schedules.create(name(), spec("scripted:demo"), "x", cron="every morning")
    message = str(refused.value)
    assert "the cron expression 'every morning' is not valid" in message and "\n" not in message
    with pytest.raises(UserError, match="not a duration"):
        await agent_client.schedules.create(name(), spec("scripted:demo"), "x", every="soon")
