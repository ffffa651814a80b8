"""MCP servers as tool sources, against real MCP servers (tests/helpers/servers/mcp_server.py)
over both transports: stdio (a subprocess per connection) and streamable
HTTP (a server process on a free local port), on the real dev server.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Replayer

from agentloop import AgentClient, AgentRunFailed, AgentSpec
from agentloop.activities.tool_sources.mcp_tools import McpServers
from agentloop.testing import call, calls, reply, script
from agentloop.workers.devserver import free_port
from agentloop.workers.plugin import AgentLoopPlugin
from tests.helpers.paths import ROOT
from tests.helpers.polling import eventually
from tests.helpers.processes import processes_with_argument, wait_until_gone, wait_until_running

TOKEN = "tok-7f3a9c-not-in-history"


def stdio_server() -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-m", "tests.helpers.servers.mcp_server", "stdio"], "cwd": str(ROOT),
            "env": {"AGENTLOOP_TEST_SECRET": "${MCP_TEST_TOKEN}", "AGENTLOOP_TEST_EXPECTED": TOKEN}}


class HttpServer:
    """``python -m tests.helpers.servers.mcp_server http PORT``, started and stopped by a test."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process: subprocess.Popen[bytes] | None = None

    async def start(self) -> None:
        self.process = subprocess.Popen(  # noqa: ASYNC220 - started once, not awaited
            [sys.executable, "-m", "tests.helpers.servers.mcp_server", "http", str(self.port)], cwd=ROOT,
            env={**os.environ, "AGENTLOOP_TEST_EXPECTED": TOKEN},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(300):
            if self.process.poll() is not None:
                raise RuntimeError("the MCP test server exited")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            await asyncio.sleep(0.1)
        raise RuntimeError("the MCP test server did not listen")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


@pytest.fixture
async def http_server() -> AsyncIterator[HttpServer]:
    server = HttpServer()
    await server.start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def token(monkeypatch: pytest.MonkeyPatch) -> None:
    """The credential lives in the worker's environment only."""
    monkeypatch.setenv("MCP_TEST_TOKEN", TOKEN)


def results_of(result: Any) -> dict[str, tuple[str, bool]]:
    return {r.name: (r.content, r.is_error) for m in result.messages for r in m.tool_results}


async def history_text(client: Client, run_id: str) -> str:
    """The run's history with its payloads decoded (they are base64 in JSON)."""
    history = json.loads((await client.get_workflow_handle(run_id).fetch_history()).to_json())
    texts: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "metadata" in node and isinstance(node.get("data"), str):
                texts.append(base64.b64decode(node["data"]).decode(errors="replace"))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(history)
    return "\n".join(texts)


EVERY_KIND = calls(
    call("notes__add", {"a": 2, "b": 40}),
    call("notes__fail", {"message": "disk full"}),
    call("notes__rpc_error"),
    call("notes__who_am_i"),
)


def check_every_kind(results: dict[str, tuple[str, bool]]) -> None:
    assert results["notes__add"] == ("42", False)
    assert results["notes__fail"][1] and "disk full" in results["notes__fail"][0]
    assert results["notes__rpc_error"] == ("MCP server 'notes' answered with error -32001: the quota is exhausted",
                                           True)
    assert results["notes__who_am_i"] == ("authorized", False)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_mcp_tools_over_each_transport(transport: str, worker: Any, agent_client: AgentClient,
                                             temporal_client: Client) -> None:
    http = HttpServer()
    if transport == "stdio":
        server: dict[str, Any] = stdio_server()
    else:
        await http.start()
        server = {"url": http.url, "headers": {"Authorization": "Bearer ${MCP_TEST_TOKEN}"}}
    spec = AgentSpec(model=script(EVERY_KIND, reply("done")), mcp_servers=["notes"], default_permission="allow")
    try:
        async with worker(mcp_servers={"notes": server}):
            handle = await agent_client.start(spec, "use the tools")
            result = await handle.result()
    finally:
        http.stop()
    assert result.status == "completed" and result.final_text == "done"
    check_every_kind(results_of(result))
    history = await history_text(temporal_client, handle.run_id)
    # The listing is in history (names as the model sees them, the server's
    # read-only hint kept); the credential is not.
    assert '"notes__add"' in history and '"notes__who_am_i"' in history
    assert TOKEN not in history and "MCP_TEST_TOKEN" not in history


async def test_listing_is_recorded_and_replays_with_the_server_stopped(
        worker: Any, agent_client: AgentClient, temporal_client: Client, http_server: HttpServer) -> None:
    spec = AgentSpec(model=script(calls(call("notes__add", {"a": 1, "b": 2})), reply("3")),
                     mcp_servers=["notes"], default_permission="allow")
    async with worker(mcp_servers={"notes": {"url": http_server.url}}):
        handle = await agent_client.start(spec, "add")
        assert (await handle.result()).final_text == "3"
    history = await temporal_client.get_workflow_handle(handle.run_id).fetch_history()
    # Listed once per run, by the worker in the run's first workflow task (a
    # local activity): the listing is in the marker's result.
    markers = [e.marker_recorded_event_attributes for e in history.events
               if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
               and e.marker_recorded_event_attributes.marker_name == "core_local_activity"]
    assert len(markers) == 1 and "notes__add" in markers[0].details["result"].payloads[0].data.decode()
    assert not [e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
                and e.activity_task_scheduled_event_attributes.activity_type.name == "resolve_tools"]
    http_server.stop()
    replayer = Replayer(workflows=[], plugins=[AgentLoopPlugin()])
    replay = await replayer.replay_workflow(history)
    assert replay.replay_failure is None


async def test_a_server_down_at_listing_fails_the_run_with_a_sentence(worker: Any, agent_client: AgentClient) -> None:
    closed = f"http://127.0.0.1:{free_port()}/mcp"
    spec = AgentSpec(model=script(reply("never")), mcp_servers=["search"])
    async with worker(mcp_servers={"search": {"url": closed, "timeout_seconds": 5}}):
        with pytest.raises(AgentRunFailed) as failed:
            await agent_client.run(spec, "search")
    assert failed.value.reason == "error"
    error = failed.value.result.error
    assert error.startswith("cannot list the tools of MCP server 'search': MCP server 'search' (streamable HTTP) "
                            "is unreachable: ConnectError"), error
    assert "start it (or fix its settings on the worker) and run again" in error
    assert "Traceback" not in error


async def test_a_server_the_worker_does_not_know_fails_the_run_with_a_sentence(
        worker: Any, agent_client: AgentClient) -> None:
    spec = AgentSpec(model=script(reply("never")), mcp_servers=["nowhere"])
    async with worker(mcp_servers={"notes": stdio_server()}):
        with pytest.raises(AgentRunFailed) as failed:
            await agent_client.run(spec, "go")
    assert failed.value.result.error == (
        "cannot list the tools of MCP server 'nowhere': the MCP server 'nowhere' is not configured on the worker "
        "(configured: notes); add it to the file AGENTLOOP_MCP_SERVERS names, or to AgentLoopPlugin(mcp_servers=...)")


async def test_a_server_down_at_call_time_is_retried_then_an_error_result(
        worker: Any, agent_client: AgentClient, temporal_client: Client, http_server: HttpServer) -> None:
    # The call waits for approval (the tool is not read-only); the server
    # goes down meanwhile; the call is retried, then the model hears.
    spec = AgentSpec(model=script(calls(call("notes__count")), reply("noted")), mcp_servers=["notes"],
                     tool_max_attempts=2, max_consecutive_failed_tool_steps=2)
    async with worker(mcp_servers={"notes": {"url": http_server.url, "timeout_seconds": 5}}):
        handle = await agent_client.start(spec, "count")
        for _ in range(300):
            pending = await handle.pending()
            if pending.approvals:
                break
            await asyncio.sleep(0.1)
        http_server.stop()
        await handle.approve(pending.approvals[0].call_id)
        result = await handle.result()
    assert result.final_text == "noted"
    content, is_error = results_of(result)["notes__count"]
    assert is_error
    assert content.startswith("Tool 'notes__count' could not complete: MCP server 'notes' (streamable HTTP) is "
                              "unreachable: ConnectError"), content
    history = await temporal_client.get_workflow_handle(handle.run_id).fetch_history()
    attempts = [e.activity_task_started_event_attributes.attempt for e in history.events
                if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED]
    assert max(attempts) == 2




def attempts_of(history: Any) -> list[int]:
    return [e.activity_task_started_event_attributes.attempt for e in history.events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED]


async def test_a_call_has_its_tools_timeout_not_the_servers_connect_timeout(
        worker: Any, agent_client: AgentClient, http_server: HttpServer) -> None:
    # The server's timeout_seconds (1 s) bounds connecting and listing; the
    # 3 s call has its tool's own limit, and a call over its limit is told
    # which limit fired and where to raise it.
    spec = AgentSpec(model=script(calls(call("notes__slow", {"seconds": 3})),
                                  calls(call("notes__slow", {"seconds": 60})), reply("done")),
                     mcp_servers=["notes"], default_permission="allow",
                     tool_timeouts={"notes__slow": 8}, max_consecutive_failed_tool_steps=2)
    servers = {"notes": {"url": http_server.url, "timeout_seconds": 1}}
    async with worker(mcp_servers=servers):
        result = await agent_client.run(spec, "slow")
    first, second = [r for m in result.messages for r in m.tool_results]
    assert (first.content, first.is_error) == ("slept 3s", False)
    assert second.is_error
    assert second.content.startswith("Tool 'notes__slow' timed out after 8s, its own limit, and was stopped"), \
        second.content
    assert "AgentSpec.tool_timeouts['notes__slow']" in second.content


async def test_a_stdio_server_that_exits_during_a_call_fails_the_attempt_and_is_retried(
        worker: Any, agent_client: AgentClient, temporal_client: Client) -> None:
    spec = AgentSpec(model=script(calls(call("notes__exit_now", {"code": 5})), reply("noted")),
                     mcp_servers=["notes"], default_permission="allow", tool_max_attempts=2,
                     max_consecutive_failed_tool_steps=2)
    async with worker(mcp_servers={"notes": stdio_server()}):
        handle = await agent_client.start(spec, "exit")
        result = await handle.result()
    content, is_error = results_of(result)["notes__exit_now"]
    assert is_error
    assert content == ("Tool 'notes__exit_now' could not complete: MCP server 'notes' (stdio) exited with code 5 "
                       "during the call; the last lines of its stderr: exiting with code 5 on purpose"), content
    history = await temporal_client.get_workflow_handle(handle.run_id).fetch_history()
    assert max(attempts_of(history)) == 2  # Temporal retried it, on a new server process


async def test_a_server_that_crashes_at_start_is_reported_with_its_exit_code_and_stderr(
        worker: Any, agent_client: AgentClient) -> None:
    crashing = {**stdio_server(), "args": ["-m", "tests.helpers.servers.mcp_server", "crash"]}
    spec = AgentSpec(model=script(reply("never")), mcp_servers=["db"])
    async with worker(mcp_servers={"db": crashing}):
        with pytest.raises(AgentRunFailed) as failed:
            await agent_client.run(spec, "go")
    assert failed.value.result.error == (
        "cannot list the tools of MCP server 'db': MCP server 'db' (stdio) exited with code 3 before it answered; "
        "the last lines of its stderr: loading the configuration | FATAL: no database at /nowhere/db.sqlite; "
        "start it (or fix its settings on the worker) and run again")


async def test_a_missing_command_is_named(worker: Any, agent_client: AgentClient) -> None:
    spec = AgentSpec(model=script(reply("never")), mcp_servers=["db"])
    async with worker(mcp_servers={"db": {"command": "no-such-mcp-server-xyz"}}):
        with pytest.raises(AgentRunFailed) as failed:
            await agent_client.run(spec, "go")
    assert failed.value.result.error.startswith(
        "cannot list the tools of MCP server 'db': the MCP server 'db' cannot be started: the command "
        "'no-such-mcp-server-xyz' is not found on the worker"), failed.value.result.error


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_the_idempotency_key_reaches_the_server_in_meta(
        transport: str, worker: Any, agent_client: AgentClient, http_server: HttpServer) -> None:
    server = stdio_server() if transport == "stdio" else {"url": http_server.url}
    spec = AgentSpec(model=script(calls(call("notes__idempotency_key")), reply("ok")), mcp_servers=["notes"],
                     default_permission="allow")
    async with worker(mcp_servers={"notes": server}):
        handle = await agent_client.start(spec, "key")
        result = await handle.result()
    key, is_error = results_of(result)["notes__idempotency_key"]
    workflow_id, run_id, activity_id = key.split("/")
    assert not is_error and workflow_id == handle.run_id and activity_id.isdigit()
    assert run_id == (await handle.workflow_handle.describe()).run_id


async def test_calls_share_one_session_and_a_dead_server_is_started_again_on_the_next_call(
        worker: Any, agent_client: AgentClient, temporal_client: Client) -> None:
    marker = f"session-{uuid.uuid4().hex}"
    server = {**stdio_server(), "args": [*stdio_server()["args"], marker]}
    # Each call waits for approval (the tools are not read-only), so the
    # test can kill the server between the second call and the third.
    spec = AgentSpec(model=script(calls(call("notes__count")), calls(call("notes__count")),
                                  calls(call("notes__pid")), reply("done")), mcp_servers=["notes"])
    async with worker(mcp_servers={"notes": server}):
        handle = await agent_client.start(spec, "count")
        for _ in range(3):
            (waiting,) = await eventually(lambda: _approvals(handle), "a call waiting for approval", timeout=60)
            if waiting.tool_name == "notes__pid":
                (running,) = [pid for pid in processes_with_argument(marker) if not is_guard(pid)]
                os.kill(running, signal.SIGKILL)
                assert await wait_until_gone(marker) == []  # the server, then its guard
            await handle.approve(waiting.call_id)
            await eventually(lambda: _no_approvals(handle), "the approval taken", timeout=60)
        result = await handle.result()
    answers = [r.content for m in result.messages for r in m.tool_results]
    # One server process answered both counts (started once, at the listing).
    assert answers[:2] == ["1", "2"]
    # The killed one was replaced on the next call, within its first attempt.
    assert int(answers[2]) != running
    history = await temporal_client.get_workflow_handle(handle.run_id).fetch_history()
    assert set(attempts_of(history)) == {1}  # no call needed a second attempt


async def _approvals(handle: Any) -> list[Any]:
    return list((await handle.pending()).approvals)


async def _no_approvals(handle: Any) -> bool:
    return not await _approvals(handle)


def is_guard(pid: int) -> bool:
    return b"mcp_guard.py" in Path(f"/proc/{pid}/cmdline").read_bytes()


async def test_sessions_close_after_their_idle_timeout() -> None:
    marker = f"idle-{uuid.uuid4().hex}"
    servers = McpServers({"notes": {**stdio_server(), "args": [*stdio_server()["args"], marker],
                                    "idle_timeout_seconds": 0.2},
                          "fresh": {**stdio_server(), "idle_timeout_seconds": 0}})
    try:
        assert await servers.call("notes__add", {"a": 1, "b": 2}) == ("3", False)
        assert await wait_until_running(marker)
        assert await wait_until_gone(marker) == []  # closed after 0.2 s without a call
        assert await servers.call("notes__add", {"a": 2, "b": 2}) == ("4", False)  # opened again
        # idle_timeout_seconds 0: a server process per call, so the count starts over.
        assert [await servers.call("fresh__count", {}) for _ in range(2)] == [("1", False), ("1", False)]
    finally:
        await servers.aclose()
    assert await wait_until_gone(marker) == []
