"""benchmarks/loop/lanes_cost on the session's dev server, at two runs a burst:
each system's model calls go where it says (the floor's to a queue of its
own, agentloop's to its lane or, with ``lane=""``, to the run's queue, where
the worker starts them eagerly), the live variant posts to its gateway,
every system is measured, and the table gives the floor's ratios as 1.00x."""

from __future__ import annotations

import os
import re
import uuid

import pytest
from temporalio.api.enums.v1 import EventType

from agentloop.shared.base.contracts import LIVE_URL_ENV
from agentloop.shared.definition.lanes import lane_queue
from agentloop.workers.devserver import DevServer
from benchmarks.loop import lanes_cost
from benchmarks.loop.peers import mock_llm, running


async def test_lanes_cost_puts_each_systems_model_calls_where_it_says_and_measures_them(
    dev_server: DevServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):  # set by agentloop's connect; restored after the test
        monkeypatch.setenv(key, "unset")
    systems = [lanes_cost.floor_system(), lanes_cost.floor_on_queue_system(), lanes_cost.agentloop_system(),
               lanes_cost.agentloop_no_lane_system(), lanes_cost.agentloop_variant("one-lane"),
               lanes_cost.agentloop_live_system()]
    with mock_llm() as mock_url:
        async with running(systems, dev_server.address, mock_url, []) as live:
            queues = {}
            for system, client, queue in live:
                handle = await system.start(client, queue, 1, f"lanes-cost-{uuid.uuid4().hex[:8]}")
                await handle.result()
                history = await handle.fetch_history()
                scheduled = [e.activity_task_scheduled_event_attributes for e in history.events
                             if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]
                models = {a.task_queue.name for a in scheduled if "model" in a.activity_type.name}
                queues[system.name] = (queue, models)
        got = await lanes_cost.measure(systems, dev_server, mock_url, reps=1, concurrency=2, burst_steps=1)
        senders = lanes_cost.live_senders()

    def model_queues(name: str, where: str) -> bool:
        queue, models = queues[name]
        return models == {where.format(queue=queue)}

    assert model_queues("floor", "{queue}")
    assert model_queues("floor, model on its own queue", "{queue}" + lanes_cost.FLOOR_LANE)
    assert model_queues('agentloop, lane=""', "{queue}")
    assert model_queues("agentloop", lane_queue("{queue}", "openai"))
    assert model_queues("agentloop, one-lane", lane_queue("{queue}", "openai"))
    assert model_queues(lanes_cost.LIVE_SYSTEM, lane_queue("{queue}", "openai"))
    # The live variant's bursts posted their answers' deltas to its gateway, which follows none of the runs;
    # the other systems' bursts ran without it in the environment.
    # (Other tests on this event loop may have senders of their own.)
    ours = [sender for sender in senders if sender.url.startswith(lanes_cost.LIVE_ENV[LIVE_URL_ENV])]
    assert [sender.posts > 0 and sender.dropped == 0 for sender in ours] == [True]
    assert not set(lanes_cost.LIVE_ENV) & set(os.environ)
    assert sorted(got) == sorted(system.name for system in systems)
    assert all(len(b.rate) == 1 and b.rate[0] > 0 and b.server_ms[0] > 0 and b.worker_ms[0] > 0
               for b in got.values())
    header, *rows = lanes_cost.table(got)
    assert header.split()[:4] == ["system", "runs/s", "x", "floor"]
    assert re.fullmatch(r"floor +\d+\.\d\d +1\.00x +1\.00x +\d+ +1\.00x +\d+ +1\.00x", rows[0]), rows[0]
    assert len(rows) == len(systems)
