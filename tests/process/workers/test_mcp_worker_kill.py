"""A worker SIGKILLed during an MCP call: its stdio MCP server dies with it
(no orphan finishes the call), and the retry on another worker carries the
same idempotency key in the request's ``_meta``, so a server that honours
it does the side effect once."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import uuid
from pathlib import Path

import pytest

from agentloop import AgentClient, AgentSpec
from tests.helpers.paths import ROOT
from tests.helpers.polling import eventually
from tests.helpers.processes import process_gone, processes_with_argument


async def test_a_killed_worker_takes_its_mcp_server_with_it_and_the_retry_carries_the_same_key(
        agent_client: AgentClient, spawn_worker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = tmp_path / "orders.jsonl"
    marker = f"mcp-kill-{uuid.uuid4().hex}"  # finds this test's server processes, and only them
    servers = tmp_path / "mcp.json"
    servers.write_text(json.dumps({"db": {
        "command": sys.executable, "args": ["-m", "tests.helpers.servers.mcp_server", "stdio", marker],
        "cwd": str(ROOT),
        "env": {"AGENTLOOP_TEST_TABLE": str(table)}}}))
    monkeypatch.setenv("AGENTLOOP_MCP_SERVERS", str(servers))
    first = spawn_worker("tests.helpers.fixtures.mcp_fixture")
    spec = AgentSpec(model="scripted:mcp_insert", mcp_servers=["db"], default_permission="allow",
                     heartbeat_timeout_seconds=2)
    handle = await agent_client.start(spec, "insert order 17")
    log = Path(f"{table}.log")
    await eventually(lambda: log.exists() and log.read_text().strip(),
                     f"the insert to start (worker log: {spawn_worker.log})", timeout=60)
    (entry,) = [json.loads(line) for line in log.read_text().splitlines()]
    server = entry["pid"]
    assert server in processes_with_argument(marker)

    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    # The server and its guard die with the worker (signalled at once), and
    # before the insert is released: no orphan can finish the call.
    await eventually(lambda: process_gone(server) and processes_with_argument(marker) == [],
                     f"the MCP server (pid {server}) and its guard to die with their worker", timeout=30)
    assert len(log.read_text().splitlines()) == 1  # the killed attempt is the only one so far

    Path(f"{table}.release").touch()
    spawn_worker("tests.helpers.fixtures.mcp_fixture")
    result = await asyncio.wait_for(handle.result(), timeout=90)
    assert result.status == "completed" and result.final_text == "done"
    (answer,) = [r for m in result.messages for r in m.tool_results]
    assert answer.content == "inserted order-17" and not answer.is_error
    rows = [json.loads(line) for line in table.read_text().splitlines()]
    attempts = [json.loads(line) for line in log.read_text().splitlines()]
    # One row: the killed attempt never committed, and the retry (a new
    # server process) carried the same idempotency key in _meta.
    assert len(rows) == 1 and rows[0]["row"] == "order-17"
    assert len(attempts) == 2 and attempts[0]["pid"] != attempts[1]["pid"]
    assert attempts[0]["key"] == attempts[1]["key"] == rows[0]["key"]
    assert attempts[0]["key"].startswith(handle.run_id + "/")
