"""The official AG-UI client (``HttpAgent`` of ``@ag-ui/client``, in Node)
against ``POST /v1/ag-ui/{agent}`` of a real server on the session's dev
server: text, a tool call with its result, and an approval; every event
passes the client's schema enforcement and sequence verification.

``tests/agui_client`` holds the Node project (``package-lock.json``);
``.ci/run`` installs it with ``npm ci``. Without its ``node_modules`` (or
without Node) these tests skip with the command to run, and fail when
``AGENTLOOP_REQUIRE_AGUI_CLIENT=1`` (``.ci/run`` sets it). Nothing is
downloaded at test time.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import uuid
from functools import partial
from pathlib import Path
from typing import Any

from agentloop.server import ServerSettings
from agentloop.testing import call, calls, reply, script
from tests.helpers import agents
from tests.helpers.agents import echo_results, write
from tests.helpers.http_api import serve
from tests.helpers.optional import missing
from tests.helpers.paths import ROOT

CLIENT_DIR = ROOT / "tests" / "agui_client"
REQUIRE = "AGENTLOOP_REQUIRE_AGUI_CLIENT"

#: Writes ask for approval; reads do not.
spec = partial(agents.spec, default_permission="auto", tools=["read_file", "write_file"])


def require_client() -> str:
    """The ``node`` command; skip (or fail with ``AGENTLOOP_REQUIRE_AGUI_CLIENT=1``)
    without Node or the installed client."""
    node = shutil.which("node")
    reason = None
    if node is None:
        reason = "Node is not installed, so the AG-UI client test cannot run: apt-get install -y nodejs npm"
    elif not (CLIENT_DIR / "node_modules" / "@ag-ui" / "client").is_dir():
        reason = "the AG-UI client is not installed: npm ci --prefix tests/agui_client"
    if reason is not None:
        missing(reason, REQUIRE, "this test")
    assert node is not None
    return node


def writer_model() -> str:
    """Step 1: some text and a read (allowed); step 2: a write (asks for
    approval); step 3: the tools' results. Streamed in small pieces."""
    return script(
        calls(call("read_file", {"file_path": "notes.txt"}), text="Let me read the notes first."),
        calls(write("out.txt", "hello from the agent")),
        echo_results,
        delta_seconds=0.005,
    )


async def run_client(node: str, url: str, thread_id: str, message: str, resume: str, *,
                     on_waiting: Any = None) -> tuple[int, list[dict[str, Any]], str]:
    """Run ``run.mjs``; its exit status, its JSON lines, its stderr. On a
    ``waiting`` line, awaits ``on_waiting(line)`` and then tells it to go on."""
    proc = await asyncio.create_subprocess_exec(
        node, str(CLIENT_DIR / "run.mjs"), url, thread_id, message, resume, cwd=CLIENT_DIR,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stdout is not None and proc.stdin is not None and proc.stderr is not None
    lines: list[dict[str, Any]] = []
    try:
        while raw := await proc.stdout.readline():
            line = json.loads(raw)
            lines.append(line)
            if line["kind"] == "waiting":
                await on_waiting(line)
                proc.stdin.write(b"go\n")
                await proc.stdin.drain()
        stderr = (await proc.stderr.read()).decode()
        return await proc.wait(), lines, stderr
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def check_accepted(status: int, lines: list[dict[str, Any]], stderr: str) -> list[dict[str, Any]]:
    """The client accepted every event: no error, no warning (nothing
    stripped or dropped), a clean exit. The events it saw."""
    problems = [line for line in lines if line["kind"] in ("error", "warning")]
    assert not problems, f"the AG-UI client objected: {problems}\n{stderr}"
    assert status == 0, f"run.mjs exited {status}: {lines[-3:]}\n{stderr}"
    return [line for line in lines if line["kind"] == "event"]


def types(events: list[dict[str, Any]], run: int | None = None) -> list[str]:
    return [e["event"]["type"] for e in events if run is None or e["run"] == run]


async def test_text_a_tool_call_and_an_approval_answered_through_the_json_api(
        agent_client, worker, workspace: Path) -> None:
    node = require_client()
    (workspace / "notes.txt").write_text("the notes")
    settings = ServerSettings(agents={"writer": spec(model=writer_model())})
    thread_id = f"agui-{uuid.uuid4().hex[:10]}"
    async with worker(), serve(agent_client, settings) as served:
        http = served.http
        decided: list[Any] = []

        async def approve(line: dict[str, Any]) -> None:
            [interrupt] = line["interrupts"]
            run_id = interrupt["metadata"]["agentloop"]["runId"]
            answer = await http.post(f"/v1/runs/{run_id}/approvals",
                                     json={"call_id": interrupt["id"], "decision": "approve"})
            assert answer.status_code == 200, answer.text
            decided.append(interrupt)

        status, lines, stderr = await run_client(node, f"{served.url}/v1/ag-ui/writer", thread_id, "write the note",
                                                 "answered", on_waiting=approve)
    events = check_accepted(status, lines, stderr)
    first, second = types(events, 1), types(events, 2)
    assert first[0] == "RUN_STARTED" and first[-1] == "RUN_FINISHED"
    for kind in ("TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "STEP_STARTED",
                 "STEP_FINISHED", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT", "CUSTOM"):
        assert kind in first, f"no {kind} in the first run: {first}"
    finished = [line for line in lines if line["kind"] == "finished"]
    assert [f["outcome"] for f in finished] == ["interrupt", "success"]
    [interrupt] = finished[0]["interrupts"]
    assert interrupt["reason"] == "tool_approval" and decided == [interrupt]
    calls_started = [e["event"] for e in events if e["event"]["type"] == "TOOL_CALL_START"]
    assert [c["toolCallName"] for c in calls_started] == ["read_file", "write_file"]
    assert interrupt["toolCallId"] == calls_started[1]["toolCallId"]
    assert second[0] == "RUN_STARTED" and second[-1] == "RUN_FINISHED" and "TOOL_CALL_RESULT" in second
    resolved = [e["event"] for e in events if e["run"] == 2 and e["event"]["type"] == "CUSTOM"]
    assert resolved[0]["name"] == "agentloop.tool.approval.resolved" and resolved[0]["value"]["by"] == "local"
    results = [e["event"]["content"] for e in events if e["event"]["type"] == "TOOL_CALL_RESULT"]
    assert "the notes" in results[0] and "out.txt" in results[1]
    assert finished[1]["result"].startswith("write_file:")  # the last step repeats the write's result
    assert (workspace / "out.txt").read_text() == "hello from the agent"
    # the client's own conversation: the user's message, the assistant's, the tools' results
    [done] = [line for line in lines if line["kind"] == "done"]
    roles = [m["role"] for m in done["messages"]]
    assert roles[0] == "user" and roles.count("tool") == 2 and roles[-1] == "assistant"
    assert done["pendingInterrupts"] == []


async def test_an_approval_answered_with_agui_resume(agent_client, worker, workspace: Path) -> None:
    node = require_client()
    (workspace / "notes.txt").write_text("more notes")
    model = script(calls(write("out.txt", "resumed")), reply("written"), delta_seconds=0.005)
    settings = ServerSettings(agents={"writer": spec(model=model)})
    thread_id = f"agui-{uuid.uuid4().hex[:10]}"
    async with worker(), serve(agent_client, settings) as served:
        status, lines, stderr = await run_client(node, f"{served.url}/v1/ag-ui/writer", thread_id, "write it",
                                                 "approve")
    events = check_accepted(status, lines, stderr)
    assert [f["outcome"] for f in lines if f["kind"] == "finished"] == ["interrupt", "success"]
    assert types(events, 2)[-1] == "RUN_FINISHED"
    assert (workspace / "out.txt").read_text() == "resumed"
    texts = "".join(e["event"]["delta"] for e in events if e["event"]["type"] == "TEXT_MESSAGE_CONTENT")
    assert texts == "written"
    resolved = [e["event"]["value"] for e in events if e["event"]["type"] == "CUSTOM" and e["run"] == 2]
    assert resolved[0]["decision"] == "approve" and resolved[0]["by"] == "local"  # the caller's name
