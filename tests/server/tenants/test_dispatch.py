"""The server dispatches a backlog by priority and shares it between tenants,
on a dev server of its own with fairness on (as every server agentloop
starts) and one partition per task queue: Temporal orders tasks within a
partition, and a queue's four default partitions are polled in no order, so
only one partition makes the order a test can check exact."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from temporalio.client import Client

from agentloop import AgentClient
from agentloop.testing import reply, script
from agentloop.workers.devserver import DevServer
from agentloop.workers.worker import connect
from tests.helpers.agents import spec

ONE_PARTITION = {"matching.numTaskqueueReadPartitions": "1", "matching.numTaskqueueWritePartitions": "1"}


@pytest.fixture(scope="module")
def dev_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    data = tmp_path_factory.mktemp("temporal-one-partition")
    server = DevServer(db_file=data / "temporal.db", log_file=data / "server.log",
                       dynamic_config=ONE_PARTITION).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
async def temporal_client(dev_server: DevServer) -> Client:
    await dev_server.wait_ready()
    return await connect(dev_server.address)


async def finish_order(client: Client, run_ids: list[str]) -> list[str]:
    """``run_ids`` in the order their workflows closed."""
    closed = {run_id: (await client.get_workflow_handle(run_id).describe()).close_time for run_id in run_ids}
    return sorted(run_ids, key=lambda run_id: closed[run_id])


async def start_backlog(agent_client: AgentClient, runs: list[tuple[str, int | None, str | None]]) -> None:
    """Start ``(run id, priority, tenant)`` runs of one scripted step each, in
    order, with no worker polling: they wait in the queue's backlog."""
    for run_id, priority, tenant in runs:
        await agent_client.start(spec(script(reply(run_id)), priority=priority), "go", run_id=run_id, tenant=tenant)


async def test_priority_orders_a_backlog(agent_client: AgentClient, worker, temporal_client: Client,
                                         task_queue: str) -> None:
    low = [(f"{task_queue}-low-{i}", 5, None) for i in range(6)]
    await start_backlog(agent_client, [*low, (f"{task_queue}-urgent", 1, None)])
    async with worker(max_concurrent_workflow_tasks=1, max_concurrent_activities=1):
        for run_id, *_ in low:
            await agent_client.get_handle(run_id).result()
        await agent_client.get_handle(f"{task_queue}-urgent").result()
    order = await finish_order(temporal_client, [run_id for run_id, *_ in low] + [f"{task_queue}-urgent"])
    # In arrival order the urgent run, started last, would finish last (index 6). A run is several
    # tasks (workflow tasks, its model call on its lane's queue), so a low run whose task was
    # dispatched while the urgent run's model call ran may end first: ahead of most of the backlog.
    assert order.index(f"{task_queue}-urgent") <= 2, order


async def test_fairness_shares_the_queue_between_tenants(agent_client: AgentClient, worker,
                                                         temporal_client: Client, task_queue: str) -> None:
    many = [(f"{task_queue}-a-{i}", None, "tenant-a") for i in range(12)]
    few = [(f"{task_queue}-b-{i}", None, "tenant-b") for i in range(3)]
    await start_backlog(agent_client, [*many, *few])
    ids = [run_id for run_id, *_ in many + few]
    async with worker(max_concurrent_workflow_tasks=1, max_concurrent_activities=1):
        for run_id in ids:
            await agent_client.get_handle(run_id).result()
    order = await finish_order(temporal_client, ids)
    places = [order.index(run_id) for run_id, *_ in few]
    # B's runs are not served after A's backlog: each of them finished before
    # the last of A's, and on average in the first half.
    assert max(places) < len(ids) - 1 and sum(places) / len(places) < len(ids) / 2, order
