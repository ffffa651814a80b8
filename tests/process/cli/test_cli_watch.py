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
from pathlib import Path
from typing import Any

import pytest

from agentloop import AgentClient, AgentRunFailed, AgentSpec
from agentloop.shared.runs.events import EVENT_ADAPTER, TERMINAL_EVENT_TYPES
from agentloop.testing import call, calls, reply, script
from tests.helpers.cli import agentloop, agentloop_async, clean_env, plain_text, read_until, write_script
from tests.helpers.paths import ROOT
from tests.helpers.runs import wait_status
from tests.helpers.servers.provider_servers import (
    OpenAIServer,
    ScriptedResponse,
    openai_completion,
    openai_completion_chunks,
    openai_error_body,
    openai_models,
    openai_stream,
    sse_event,
)


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
        proc = await agentloop_async("watch", handle.run_id, "--jsonl", env=env)
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
            agentloop_async("watch", handle.run_id, "--from", str(k), "--jsonl", env=env),
            agentloop_async("watch", handle.run_id, "--from", str(k), env=env),
            agentloop_async("watch", handle.run_id, "--from", str(len(whole) + 10), env=env),
            agentloop_async("watch", handle.run_id, "--from", "-1", env=env),
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
        failed = await agentloop_async("watch", handle.run_id, env=env)
        failed_jsonl = await agentloop_async("watch", handle.run_id, "--jsonl", env=env)
    unknown = await agentloop_async("watch", "no-such-run", env=env)
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
    # A rich view, escapes stripped; the note says why the attempt failed.
    assert "\x1b[" not in shown and "(retrying step 1, attempt 2: " in shown
    before, after = shown.split("(retrying step 1, attempt 2: ")
    assert text not in before and after.count(text) == 1
    assert "✓ completed · 1 step, 0 tool calls" in after


@pytest.mark.parametrize("sealed", [{}, {"AGENTLOOP_ENCRYPTION_KEYS": "k1:" + "A" * 43 + "="}],
                         ids=["plain", "encrypted"])
async def test_run_says_why_an_llm_attempt_is_retried(workspace: Path, env: dict[str, str],
                                                      sealed: dict[str, str]) -> None:
    # Encrypted, the failure's message is sealed on the server (docs/security.md): the CLI opens it.
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
            env={**env, **sealed, "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": server.base_url},
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
    proc = agentloop(
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




async def test_watch_of_a_finished_run_says_why_an_llm_attempt_was_retried(
    agent_client: AgentClient, worker, workspace: Path, env: dict[str, str]
) -> None:
    # The second attempt answers at once: the reason must travel with the run's events,
    # not be looked up while the attempt is still running.
    chunks = openai_completion_chunks(openai_completion(content="Recovered."), pieces=2)
    with OpenAIServer() as server:
        server.enqueue(
            ScriptedResponse(status=503, json_body=openai_error_body("The engine is currently overloaded",
                                                                     type="server_error")),
            openai_stream(chunks),
        )
        async with worker(models=openai_models(server)):
            handle = await agent_client.start(
                AgentSpec(model="openai:gpt-test", heartbeat_timeout_seconds=5), "answer"
            )
            assert (await handle.result()).status == "completed"
            watch = await agentloop_async("watch", handle.run_id, env=env)
    assert watch.code == 0, watch.err
    (line,) = [line for line in watch.out.splitlines() if "retrying" in line]
    assert line.startswith("[step 1] the LLM call failed (")
    assert "503" in line and "The engine is currently overloaded" in line
    assert line.endswith("); retrying (attempt 2)")
