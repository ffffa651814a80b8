"""`agentloop watch` and `--jsonl`: CLI subprocesses against the session's
dev server (runs started by an in-process worker with scripted models) and
`agentloop run` on its own embedded server; and the renderers, plain and
rich, on constructed events."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import sys
import threading
from collections.abc import Iterator
from datetime import datetime, timezone
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from agentloop import AgentClient, AgentRunFailed, AgentSpec
from agentloop.activity_io import StreamDelta
from agentloop.approvals import PendingApproval
from agentloop.devserver import DevServer
from agentloop.events import (
    EVENT_ADAPTER,
    TERMINAL_EVENT_TYPES,
    ApprovalRequested,
    ApprovalResolved,
    MessageCompleted,
    MessageCreated,
    MessageDelta,
    MessageReset,
    RunCompleted,
    RunCreated,
    RunFailed,
    RunStatusChanged,
    StepCreated,
    ToolCallCompletedByLLM,
    ToolExecutionCompleted,
    ToolExecutionStarted,
)
from agentloop.messages import Message, ToolCallPart, ToolResultPart
from agentloop.render import JsonlRenderer, PlainRenderer, RichRenderer
from agentloop.report import Usage
from agentloop.testing import call, calls, reply
from tests import test_cli
from tests.helpers.provider_servers import (
    OpenAIServer,
    ScriptedResponse,
    openai_completion,
    openai_completion_chunks,
    openai_error_body,
    openai_models,
    openai_stream,
    sse_event,
)
from tests.test_cli import ROOT, clean_env
from tests.test_cli_ops import agentloop, read_until, script, wait_status, write_script


@pytest.fixture
def env(tmp_path: Path, dev_server: DevServer, task_queue: str) -> dict[str, str]:
    return clean_env(tmp_path, TEMPORAL_ADDRESS=dev_server.address, AGENTLOOP_TASK_QUEUE=task_queue)


def parse_jsonl(stdout: str) -> list[Any]:
    """Every line is one event, exactly as the stream has it."""
    events = []
    for line in stdout.splitlines():
        data = json.loads(line)
        event = EVENT_ADAPTER.validate_python(data)
        assert event.model_dump(mode="json") == data
        events.append(event)
    return events


# `agentloop watch` ------------------------------------------------------------------


async def test_watch_jsonl_replays_a_finished_run(
    agent_client: AgentClient, worker, workspace: Path, env: dict[str, str]
) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    model = script(calls(call("read_file", {"file_path": "a.txt"}), text="Reading."), reply("It says alpha."))
    async with worker():
        handle = await agent_client.start(AgentSpec(model=model, tools=["read_file"]), "read a.txt")
        await handle.result()
        proc = await agentloop("watch", handle.run_id, "--jsonl", env=env)
        streamed = [e async for e in handle.events()]
    assert proc.code == 0, proc.err
    events = parse_jsonl(proc.out)
    assert [e.seq for e in events] == list(range(len(events)))
    assert [e.model_dump() for e in events] == [e.model_dump() for e in streamed]
    assert events[-1].type == "thread.run.completed" and events[-1].final_text == "It says alpha."
    assert sum(e.type in TERMINAL_EVENT_TYPES for e in events) == 1
    assert f"watching run {handle.run_id} (completed) from offset 0" in proc.err


async def test_watch_from_an_offset(agent_client: AgentClient, worker, env: dict[str, str]) -> None:
    model = script(calls(call("list_dir", {"path": "."})), reply("done"))
    async with worker():
        handle = await agent_client.start(AgentSpec(model=model, tools=["list_dir"]), "look")
        await handle.result()
        whole = [e async for e in handle.events()]
        k = 5
        tail, plain, past_end, negative = await asyncio.gather(
            agentloop("watch", handle.run_id, "--from", str(k), "--jsonl", env=env),
            agentloop("watch", handle.run_id, "--from", str(k), env=env),
            agentloop("watch", handle.run_id, "--from", str(len(whole) + 10), env=env),
            agentloop("watch", handle.run_id, "--from", "-1", env=env),
        )
    assert tail.code == 0, tail.err
    assert [e.model_dump() for e in parse_jsonl(tail.out)] == [e.model_dump() for e in whole[k:]]
    # Plain lines from the middle: no step counts (not seen), but the tokens and the answer.
    assert plain.code == 0, plain.err
    assert "[step 1] tool result list_dir (ok)" in plain.out and plain.out.endswith("\ndone\n")
    assert re.search(r"\[\d+ in / \d+ out tokens\]", plain.err) and "steps" not in plain.err
    assert past_end.code == 0 and past_end.out == ""
    assert f"run {handle.run_id} has ended (completed); no more events" in past_end.err
    assert negative.code == 2 and "--from -1" in negative.err


async def test_watch_follows_a_run_waiting_for_approval_until_it_ends(
    agent_client: AgentClient, worker, workspace: Path, env: dict[str, str]
) -> None:
    async with worker():
        handle = await agent_client.start(AgentSpec(model=write_script(), tools=["write_file"]), "write it")
        await wait_status(handle, "awaiting_approval")
        watch = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentloop.cli", "watch", handle.run_id, cwd=ROOT, env=env,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        try:
            assert watch.stdout is not None
            shown = await read_until(watch.stdout, "  deny:    ")
            assert watch.stderr is not None
            assert f"watching run {handle.run_id} (awaiting_approval)" in (await watch.stderr.readline()).decode()
            assert '[step 1] tool call write_file {"file_path": "out.txt", "content": "hello\\n"}' in shown
            assert ('[step 1] approval needed: write_file {"file_path": "out.txt", "content": "hello\\n"} '
                    "(call call_0_0)") in shown
            assert f"  approve: agentloop approve {handle.run_id} call_0_0" in shown
            await handle.approve("call_0_0", by="tester")
            out, err = await asyncio.wait_for(watch.communicate(), 60)
        finally:
            if watch.returncode is None:
                watch.kill()
                await watch.wait()
        result = await handle.result()
    assert watch.returncode == 0, err.decode()
    text = shown + out.decode()
    assert "[step 1] call_0_0 approved by tester" in text
    assert "[step 1] tool result write_file (ok): Wrote 6 bytes to out.txt" in text
    assert text.endswith(f"\n{result.final_text}\n")
    assert "[2 steps, 1 tool call, " in err.decode()
    assert (workspace / "out.txt").read_text() == "hello\n"


async def test_watch_a_failed_run_exits_1_and_an_unknown_run_too(
    agent_client: AgentClient, worker, env: dict[str, str]
) -> None:
    async with worker():
        handle = await agent_client.start(AgentSpec(model="scripted:no-such-script"), "x")
        with pytest.raises(AgentRunFailed):
            await handle.result()
        failed = await agentloop("watch", handle.run_id, env=env)
        failed_jsonl = await agentloop("watch", handle.run_id, "--jsonl", env=env)
    unknown = await agentloop("watch", "no-such-run", env=env)
    assert failed.code == 1
    assert f"run {handle.run_id} failed (error): LLM step 1 failed: no scripted model named" in failed.err
    assert failed_jsonl.code == 1 and parse_jsonl(failed_jsonl.out)[-1].type == "thread.run.failed"
    assert unknown.code == 1
    assert unknown.err == ("agentloop: no run 'no-such-run' in namespace 'default'; "
                           "`agentloop list` shows the runs there\n")


async def read_pty(master: int) -> str:
    """All a pty's output until the process on its other side closes it."""
    loop = asyncio.get_running_loop()
    chunks = []
    while True:
        try:
            chunk = await loop.run_in_executor(None, os.read, master, 4096)
        except OSError:  # EIO: the other side closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode()


def plain_text(ansi: str) -> str:
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", ansi).replace("\r\n", "\n")


async def test_watch_on_a_terminal_shows_a_retried_answer_once(
    agent_client: AgentClient, worker, env: dict[str, str]
) -> None:
    text = "The answer is forty-two, as computed."
    chunks = openai_completion_chunks(openai_completion(content=text), pieces=6)
    with OpenAIServer() as server:
        # The first attempt streams part of the answer, then the connection drops.
        server.enqueue(openai_stream(chunks[:4], break_stream=True), openai_stream(chunks))
        async with worker(models=openai_models(server)):
            handle = await agent_client.start(
                AgentSpec(model="openai:gpt-test", heartbeat_timeout_seconds=5), "what is the answer?"
            )
            await handle.result()
            master, slave = pty.openpty()
            watch = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "agentloop.cli", "watch", handle.run_id, cwd=ROOT,
                env={**env, "COLUMNS": "100"}, stdin=asyncio.subprocess.DEVNULL, stdout=slave,
                stderr=asyncio.subprocess.PIPE,
            )
            os.close(slave)
            try:
                shown = plain_text(await asyncio.wait_for(read_pty(master), 60))
                await asyncio.wait_for(watch.wait(), 60)
            finally:
                if watch.returncode is None:
                    watch.kill()
                    await watch.wait()
                os.close(master)
    assert watch.returncode == 0
    assert "\x1b[" not in shown and "(retrying step 1, attempt 2)" in shown  # a rich view, escapes stripped
    before, after = shown.split("(retrying step 1, attempt 2)")
    assert text not in before and after.count(text) == 1
    assert "✓ completed · 1 step, 0 tool calls" in after


async def test_run_says_why_an_llm_attempt_is_retried(workspace: Path, env: dict[str, str]) -> None:
    release = threading.Event()

    def held_answer() -> Iterator[bytes]:
        release.wait(60)  # the second attempt answers once the test saw the retry line
        for chunk in openai_completion_chunks(openai_completion(content="Recovered."), pieces=2):
            yield sse_event(chunk)
        yield sse_event("[DONE]")

    with OpenAIServer() as server:
        server.enqueue(
            ScriptedResponse(status=503, json_body=openai_error_body("The engine is currently overloaded",
                                                                     type="server_error")),
            ScriptedResponse(body_chunks=held_answer(), chunk_interval=0.001),
        )
        run = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentloop.cli", "run", "answer", "--model", "openai:gpt-test",
            "--workspace", str(workspace), "--tool", "read_file", "--local-worker", cwd=ROOT,
            env={**env, "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": server.base_url},
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        try:
            assert run.stdout is not None
            shown = await read_until(run.stdout, "retrying (attempt 2)\n")
            release.set()
            out, err = await asyncio.wait_for(run.communicate(), 60)
        finally:
            release.set()
            if run.returncode is None:
                run.kill()
                await run.wait()
    assert run.returncode == 0, err.decode()
    (line,) = [line for line in shown.splitlines() if "retrying" in line]
    assert line.startswith("[step 1] the LLM call failed (")
    assert "503" in line and "The engine is currently overloaded" in line  # the provider's error, mapped
    assert line.endswith("); retrying (attempt 2)")
    assert out.decode().endswith("Recovered.\n")


# `--jsonl` on `agentloop run` ------------------------------------------------------


def test_run_jsonl_on_the_embedded_server(tmp_path: Path, workspace: Path) -> None:
    (workspace / "hello.txt").write_text("hello from the workspace\n")
    proc = test_cli.agentloop(
        "run", "Summarise this workspace", "--model", "scripted:demo", "--workspace", str(workspace),
        "--jsonl", env=clean_env(tmp_path), cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    events = parse_jsonl(proc.stdout)
    assert [e.seq for e in events] == list(range(len(events)))
    assert events[0].type == "agent.run.created" and events[-1].type == "thread.run.completed"
    assert 'its first line is: "hello from the workspace"' in events[-1].final_text
    assert [e.call.name for e in events if e.type == "thread.run.step.tool_call.completed_by_llm"] == [
        "list_dir", "read_file"]
    assert proc.stderr.startswith(f"run {events[0].run_id} · scripted:demo · workspace ")
    assert "[3 steps, 2 tool calls, " in proc.stderr


# The renderers -------------------------------------------------------------------------

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
RUN = "run-render"


def ev(event_type: Any, **fields: Any) -> Any:
    return event_type(run_id=RUN, time=T0, **fields)


def sample_events() -> list[Any]:
    """A run in two steps: a write that waits for approval, then an answer
    whose first LLM attempt broke mid-stream and was retried."""
    write = ToolCallPart(id="call_0_0", name="write_file", arguments={"file_path": "out.txt", "content": "hi"})
    approval = PendingApproval(call_id="call_0_0", tool_name="write_file", arguments=write.arguments, step=1,
                               asked_at=T0, reason="'write_file' can change things; approval required")
    m0, m1 = f"{RUN}:msg:0", f"{RUN}:msg:1"
    answer = "All written: out.txt holds hi."
    events = [
        ev(RunCreated, agent_name="agent", model="scripted:x", input=[Message.user("write it")]),
        ev(RunStatusChanged, status="running"),
        ev(StepCreated),
        ev(MessageCreated, message_id=m0),
        ev(MessageDelta, message_id=m0, delta=StreamDelta(kind="text", text="Writing the file.")),
        ev(MessageCompleted, message_id=m0, message=Message.assistant("Writing the file.", [write]),
           usage=Usage(input_tokens=12, output_tokens=7, requests=1)),
        ev(ToolCallCompletedByLLM, call=write),
        ev(ApprovalRequested, approval=approval),
        ev(RunStatusChanged, status="awaiting_approval", previous="running"),
        ev(ToolExecutionStarted, call=write),
        ev(ApprovalResolved, call_id="call_0_0", decision="approve", by="alice"),
        ev(RunStatusChanged, status="running", previous="awaiting_approval"),
        ev(ToolExecutionCompleted,
           result=ToolResultPart(id="call_0_0", name="write_file", content="Wrote 2 bytes to out.txt")),
        ev(StepCreated, step=1),
        ev(MessageCreated, step=1, message_id=m1),
        ev(MessageDelta, step=1, message_id=m1, delta=StreamDelta(kind="text", text="All wri")),
        ev(MessageReset, step=1, message_id=m1, attempt=2),
        ev(MessageDelta, step=1, message_id=m1, attempt=2,
           delta=StreamDelta(kind="text", text="All written: ")),
        ev(MessageDelta, step=1, message_id=m1, attempt=2,
           delta=StreamDelta(kind="text", text="out.txt holds hi.")),
        ev(MessageCompleted, step=1, message_id=m1, message=Message.assistant(answer),
           usage=Usage(input_tokens=30, output_tokens=9, requests=1)),
        ev(RunStatusChanged, step=1, status="completed", previous="running"),
        ev(RunCompleted, step=1, final_text=answer, usage=Usage(input_tokens=42, output_tokens=16, requests=2)),
    ]
    for seq, event in enumerate(events):
        event.seq = seq
    return events


def test_plain_renderer_lines() -> None:
    out, err = StringIO(), StringIO()
    renderer = PlainRenderer(out, err)
    for event in sample_events():
        renderer.render(event)
    assert out.getvalue().splitlines() == [
        "[step 1] assistant: Writing the file.",
        '[step 1] tool call write_file {"file_path": "out.txt", "content": "hi"}',
        '[step 1] approval needed: write_file {"file_path": "out.txt", "content": "hi"} (call call_0_0)',
        "  why: 'write_file' can change things; approval required",
        f"  approve: agentloop approve {RUN} call_0_0",
        f"  deny:    agentloop approve {RUN} call_0_0 --deny --reason '...'",
        "[step 1] call_0_0 approved by alice",
        "[step 1] tool result write_file (ok): Wrote 2 bytes to out.txt",
        "[step 2] the LLM call failed; retrying (attempt 2)",
        "",
        "All written: out.txt holds hi.",  # once, whole, at the end
    ]
    assert err.getvalue() == "\n[2 steps, 1 tool call, 42 in / 16 out tokens]\n"
    assert renderer.pending == {}


def test_plain_renderer_endings() -> None:
    stopped = RunCompleted(run_id=RUN, time=T0, status="stopped", reason="stopped", final_text="partial")
    failed = RunFailed(run_id=RUN, time=T0, reason="max_steps", error="the run took 3 steps")
    for event, stop_reason, expected_err, expected_out in [
        (stopped, "stopped: enough", f"\nrun {RUN} stopped on request (stopped: enough)\n", "\npartial\n"),
        (failed, None, f"\nrun {RUN} failed (max_steps): the run took 3 steps\n", ""),
    ]:
        out, err = StringIO(), StringIO()
        PlainRenderer(out, err).render(event, stop_reason=stop_reason)
        assert err.getvalue().startswith(expected_err) and out.getvalue() == expected_out


def test_jsonl_renderer_writes_exactly_the_events() -> None:
    out, err = StringIO(), StringIO()
    renderer = JsonlRenderer(out, err)
    events = sample_events()
    for event in events:
        renderer.render(event)
    assert [json.loads(line) for line in out.getvalue().splitlines()] == [e.model_dump(mode="json") for e in events]
    assert err.getvalue() == "\n[2 steps, 1 tool call, 42 in / 16 out tokens]\n"


def test_rich_renderer_streams_text_and_highlights_approvals() -> None:
    buffer = StringIO()
    renderer = RichRenderer(Console(file=buffer, force_terminal=True, width=100))
    events = sample_events()
    for event in events[:9]:  # up to the wait for approval
        renderer.render(event)
    waiting = plain_text(buffer.getvalue())
    assert "\x1b[" in buffer.getvalue()  # styled
    assert ' approval needed  write_file {"file_path": "out.txt", "content": "hi"}  (call call_0_0)\n' in waiting
    assert f"approve: agentloop approve {RUN} call_0_0\n" in waiting
    assert "status: running → awaiting_approval" in waiting
    assert "→ write_file" in waiting and "12 in / 7 out tokens" in waiting
    for event in events[9:]:
        renderer.render(event)
    shown = plain_text(buffer.getvalue())
    assert "call_0_0 approved by alice" in shown and "✓ write_file  Wrote 2 bytes to out.txt" in shown
    # The broken attempt's text stays above the note; the answer shows once, below it.
    before, after = shown.split("(retrying step 2, attempt 2)")
    assert before.rstrip().endswith("All wri")
    assert after.count("All written: out.txt holds hi.") == 1
    assert "✓ completed · 2 steps, 1 tool call, 42 in / 16 out tokens" in after


def test_rich_renderer_shows_what_was_not_streamed() -> None:
    buffer = StringIO()
    renderer = RichRenderer(Console(file=buffer, force_terminal=True, width=100))
    # Watching from past the answer's deltas: the message and the final text still show, once.
    for event in sample_events()[19:]:
        renderer.render(event)
    shown = plain_text(buffer.getvalue())
    assert shown.count("All written: out.txt holds hi.") == 1
    assert "✓ completed · 42 in / 16 out tokens" in shown


def test_renderers_show_a_compaction() -> None:
    compacted = EVENT_ADAPTER.validate_python({
        "type": "agent.context.compacted", "run_id": RUN, "time": T0.isoformat(), "step": 4, "kind": "prune",
        "tokens_before": 150000, "tokens_after": 90000, "messages_affected": 7,
    })
    out = StringIO()
    PlainRenderer(out, StringIO()).render(compacted)
    assert out.getvalue() == ("[step 5] context compacted: pruned old tool outputs (7), "
                              "about 150000 → 90000 input tokens\n")
    buffer = StringIO()
    RichRenderer(Console(file=buffer, force_terminal=True, width=100)).render(compacted)
    assert "context compacted: pruned old tool outputs (7)" in plain_text(buffer.getvalue())
