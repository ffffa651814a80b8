"""`agentloop chat`: the pure parts (typed lines, the recap, the view of a
thread's events) and the command itself, driven through a real pty and
through piped stdin, on its embedded server with scripted models.

The scripts registered at import are for `agentloop chat --import
tests.process.cli.test_chat` subprocesses (the chat's own worker runs the LLM steps)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pty
import re
import signal
import sys
import time
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from agentloop import AgentClient, AgentSpec
from agentloop.shared.definition.activity_io import ModelRequest, ModelResponse
from agentloop.shared.runs.search_attributes import AGENT_FORKED_FROM
from agentloop.testing import call, calls, register_scripted_model, reply
from agentloop.workers.devserver import DevServer, free_port
from tests.helpers.cli import agentloop_async, clean_env, read_until
from tests.helpers.paths import ROOT
from tests.helpers.polling import eventually

# The scripted agent of the chats below ------------------------------------------------------


async def chat_agent(request: ModelRequest) -> ModelResponse:
    """Answers from what it was sent: every user message of the thread (so
    a test sees what the model saw), the tool results and steering since its
    last step; "write ..." asks to write a file (an approval), "hold ..."
    waits until the test releases it (files in $CHAT_TEST_DIR)."""
    messages = request.messages
    users = [m.text for m in messages if m.role == "user" and m.text]
    last_assistant = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    since = messages[last_assistant + 1:]
    results = [r for m in since if m.role == "tool" for r in m.tool_results]
    if results and not users[-1].startswith("what"):  # "what ...": a new turn after a stopped one
        steered = [m.text for m in since if m.role == "user"]
        return reply(f"wrote it ({results[0].content}); steered: {' / '.join(steered) or 'no'}")
    if users[-1].startswith("write"):
        return calls(call("write_file", {"file_path": "note.txt", "content": "hi\n"}), text="I will write note.txt.")
    if users[-1].startswith("hold"):
        folder = Path(os.environ["CHAT_TEST_DIR"])
        (folder / "holding").touch()
        while not (folder / "release").exists():
            await asyncio.sleep(0.05)
    return reply(f"echo {len(users)}: {users[-1]} | heard: {' / '.join(users)}")


register_scripted_model("chat-test", chat_agent, delta_seconds=0.01)


# Typed lines ----------------------------------------------------------------------------


# The view of a thread's events ------------------------------------------------------------


# The command, on a terminal --------------------------------------------------------------------


class Terminal:
    """A pty the chat runs on: what it shows, and what is typed into it."""

    def __init__(self) -> None:
        self.master, self.slave = pty.openpty()
        self.seen = ""
        self.mark = 0
        self._data = asyncio.Queue()
        asyncio.get_running_loop().add_reader(self.master, self._readable)

    def _readable(self) -> None:
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # EIO: the other side closed
            chunk = b""
        if not chunk:
            asyncio.get_running_loop().remove_reader(self.master)
        self._data.put_nowait(chunk)

    async def expect(self, text: str | re.Pattern[str], timeout: float = 60.0) -> str:
        """Wait until ``text`` shows after the last expectation; return what showed up to its end."""
        deadline = time.monotonic() + timeout
        while True:
            rest = self.seen[self.mark:]
            found = re.search(text, rest) if isinstance(text, re.Pattern) else None
            index = found.end() if found else (rest.find(text) + len(text) if isinstance(text, str)
                                                and text in rest else -1)
            if index >= 0:
                self.mark += index
                return rest[:index]
            try:
                chunk = await asyncio.wait_for(self._data.get(), max(0.1, deadline - time.monotonic()))
            except TimeoutError:
                raise AssertionError(f"timed out waiting for {text!r}; the terminal shows:\n{rest}") from None
            if not chunk:
                raise AssertionError(f"the chat closed the terminal before {text!r}; it shows:\n{rest}")
            self.seen += chunk.decode(errors="replace").replace("\r\n", "\n")

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def close(self) -> None:
        with contextlib.suppress(ValueError, OSError):
            asyncio.get_running_loop().remove_reader(self.master)
        for fd in (self.master, self.slave):
            with contextlib.suppress(OSError):
                os.close(fd)


async def start_chat(terminal: Terminal, env: dict[str, str], *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentloop.cli", "chat", "--import", "tests.process.cli.test_chat", *args,
        cwd=ROOT, env=env, stdin=terminal.slave, stdout=terminal.slave, stderr=terminal.slave,
    )


async def ended(proc: asyncio.subprocess.Process) -> int:
    try:
        return await asyncio.wait_for(proc.wait(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_a_chat_on_a_terminal_then_resumed(tmp_path: Path, workspace: Path) -> None:
    env = clean_env(tmp_path, CHAT_TEST_DIR=str(tmp_path))
    thread = f"chat-{uuid.uuid4().hex[:8]}"
    terminal = Terminal()
    chat = await start_chat(terminal, env, "--thread", thread, "--model", "scripted:chat-test",
                            "--workspace", str(workspace), "--tool", "write_file")
    try:
        await terminal.expect(f"thread {thread} (new) · scripted:chat-test · workspace {workspace}")
        await terminal.expect("you> ")
        # Two messages, each answer streamed, each turn summed up.
        terminal.type("hello\n")
        shown = await terminal.expect("you> ")
        assert "agent> echo 1: hello | heard: hello\n[turn 1 completed · step 1 · " in shown
        # An approval asked inline; a command typed at its prompt is a command (steering the busy turn).
        terminal.type("write the note\n")
        shown = await terminal.expect('approve write_file {"file_path": "note.txt", "content": "hi\\n"}? '
                                      "[y]es/[n]o/[s]kip: ")
        assert 'agent> I will write note.txt.\n  → write_file {"file_path": "note.txt"' in shown
        terminal.type("/steer use the v2 API\n")
        await terminal.expect("(steering sent: the agent reads it before its next step)")
        await terminal.expect("[y]es/[n]o/[s]kip: ")
        terminal.type("y\n")
        shown = await terminal.expect("you> ")
        assert "  call_1_0 approved by chat\n  ✓ write_file: Wrote 3 bytes to note.txt\n" in shown
        assert "  (steering read before step 3: use the v2 API)\n" in shown
        assert "agent> wrote it (" in shown and "steered: use the v2 API" in shown
        assert "[turn 2 completed · steps 2-3 · " in shown
        assert (workspace / "note.txt").read_text() == "hi\n"
        # A message typed while the agent works waits for its turn (enqueue).
        terminal.type("hold on\n")
        await eventually((tmp_path / "holding").exists, "the holding file", 60)
        terminal.type("and another\n")
        await terminal.expect("(queued: turn 4 answers it after turn 3)")
        (tmp_path / "release").touch()
        shown = await terminal.expect("[turn 4 completed")
        assert shown.index("[turn 3 completed") < shown.index("agent> echo 5: and another")
        await terminal.expect("you> ")
        # Export and fork.
        exported = tmp_path / "thread.json"
        terminal.type(f"/export {exported}\n")
        await terminal.expect(f"exported thread {thread} (")
        await terminal.expect("you> ")
        snapshot = json.loads(exported.read_text())
        assert snapshot["format"] == "agentloop.snapshot" and snapshot["thread_id"] == thread
        # The steps the summaries name are the ones /fork takes: 1 + 2 + 1 + 1, the last one ending the export.
        assert re.search(r"\[turn 4 completed · step 5 · ", terminal.seen), terminal.seen
        assert max(int(step) for step in snapshot["step_ends"]) == 5
        assert snapshot["step_ends"]["5"] == len(snapshot["messages"])
        assert [m["role"] for m in snapshot["messages"]][:2] == ["user", "assistant"]
        terminal.type("/fork 1\n")
        forked = re.search(r"forked thread \S+ at step 1: new run (\S+)\n", await terminal.expect("you> "))
        assert forked, terminal.seen[-500:]
        assert f"  `agentloop watch {forked.group(1)}` follows it" in terminal.seen
        address = (tmp_path / "home" / "server.address").read_text().strip()
        description = await (await Client.connect(address)).get_workflow_handle(forked.group(1)).describe()
        assert description.typed_search_attributes.get(AGENT_FORKED_FROM) == thread
        # /stop ends the turn under way (here, one waiting for an approval); the thread stays.
        terminal.type("write the note again\n")
        await terminal.expect("[y]es/[n]o/[s]kip: ")
        terminal.type("/stop\n")
        await terminal.expect("(stopping turn 5 after its current step)")
        shown = await terminal.expect("you> ")
        assert "  call_5_0 not run (the run was stopped)" in shown
        assert "[turn 5 stopped (stopped from agentloop chat) · step 6 · " in shown
        # Ctrl-D leaves; the thread stays.
        terminal.type("\x04")
        await terminal.expect(f"left thread {thread}; it stays: `agentloop chat --thread {thread}` continues it")
        assert await ended(chat) == 0
    finally:
        if chat.returncode is None:
            chat.kill()
            await chat.wait()
        terminal.close()

    # Resumed: a recap, and the model sees every earlier message.
    terminal = Terminal()
    chat = await start_chat(terminal, env, "--thread", thread)
    try:
        shown = await terminal.expect("you> ")
        assert f"thread {thread} · scripted:chat-test · " in shown
        assert "  you: and another\n  agent: echo 5: and another" in shown
        assert "  you: write the note again\n  agent: I will write note.txt. (called write_file)\n" in shown
        terminal.type("what did I say?\n")
        shown = await terminal.expect("[turn 6 completed · step 7 · ")
        assert ("agent> echo 7: what did I say? | heard: hello / write the note / use the v2 API / hold on / "
                "and another / write the note again / what did I say?") in shown
        await terminal.expect("you> ")
        # Ctrl-C leaves too.
        chat.send_signal(signal.SIGINT)
        await terminal.expect(f"left thread {thread}; it stays")
        assert await ended(chat) == 130
    finally:
        if chat.returncode is None:
            chat.kill()
            await chat.wait()
        terminal.close()


# The command, scripted ----------------------------------------------------------------------------


async def test_a_scripted_chat_reads_its_lines_in_turn(tmp_path: Path, workspace: Path) -> None:
    env = clean_env(tmp_path, CHAT_TEST_DIR=str(tmp_path))
    script = "hi\n/frobnicate\n/stop\nwrite the note\nn\nnot now\nsecond\n"
    proc = await agentloop_async("chat", "--model", "scripted:chat-test", "--workspace", str(workspace),
                           "--tool", "write_file", "--import", "tests.process.cli.test_chat", env=env, stdin=script)
    assert proc.code == 0, proc.err
    thread = thread_of(proc.err)
    denied = ("The call to 'write_file' was denied: not now. It did not run. Do not retry it as is; choose another "
              "way or explain what you need.")
    lines = proc.out.splitlines()
    assert [re.sub(r" · \d+ in / \d+ out tokens\]$", "]", line) for line in lines] == [
        "you> hi",
        "agent> echo 1: hi | heard: hi",
        "[turn 1 completed · step 1]",
        "you> /frobnicate",
        ("unknown command /frobnicate; /help lists the commands (start a line with // to send a message that "
         "begins with /)"),
        "you> /stop",
        ("no turn is running, so there is nothing to stop; /quit leaves the chat (the thread stays), "
         f"`agentloop cancel {thread}` ends the thread"),
        "you> write the note",
        "agent> I will write note.txt.",
        '  → write_file {"file_path": "note.txt", "content": "hi\\n"}',
        ('  approval needed: write_file {"file_path": "note.txt", "content": "hi\\n"} '
         "('write_file' can change things; approval required)"),
        'approve write_file {"file_path": "note.txt", "content": "hi\\n"}? [y]es/[n]o/[s]kip: n',
        "  reason, told to the agent (Enter for none): not now",
        "  call_1_0 denied by chat: not now",
        f"  ✗ write_file (not run): {denied}",
        f"agent> wrote it ({denied}); steered: no",
        "[turn 2 completed · steps 2-3]",
        "you> second",
        "agent> echo 3: second | heard: hi / write the note / second",
        "[turn 3 completed · step 4]",
    ]
    assert not (workspace / "note.txt").exists()
    assert proc.err.splitlines() == [
        f"thread {thread} (new) · scripted:chat-test · workspace {workspace}",
        "type a message; /help lists the commands; the end of the input leaves",
        f"left thread {thread}; it stays: `agentloop chat --thread {thread}` continues it",
    ]


def thread_of(stderr: str) -> str:
    found = re.search(r"thread (thread-[0-9a-f]{12}) \(new\)", stderr)
    assert found, stderr
    return found.group(1)


# Errors, in sentences -------------------------------------------------------------------------------


async def test_an_unreachable_server_is_a_sentence(tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    proc = await agentloop_async("chat", "--model", "scripted:demo", env=clean_env(tmp_path, TEMPORAL_ADDRESS=address),
                           stdin="hello\n")
    assert proc.code == 2, proc.err
    assert proc.err.startswith(f"agentloop: cannot connect to Temporal at {address} (from TEMPORAL_ADDRESS;")


async def test_a_new_chat_needs_a_model(tmp_path: Path) -> None:
    proc = await agentloop_async("chat", env=clean_env(tmp_path), stdin="hello\n")
    assert proc.code == 2
    assert proc.err.startswith("agentloop: choose a model: --model openai:gpt-4.1-mini")


async def test_chat_on_an_ended_thread_or_a_plain_run_says_so(
    agent_client: AgentClient, worker, tmp_path: Path, dev_server: DevServer, task_queue: str
) -> None:
    env = clean_env(tmp_path, TEMPORAL_ADDRESS=dev_server.address, AGENTLOOP_TASK_QUEUE=task_queue)
    thread = f"ended-{uuid.uuid4().hex[:8]}"
    async with worker():
        handle = await agent_client.send(thread, "hello", AgentSpec(model="scripted:chat-test"))
        await handle.result()
        await handle.cancel()
        plain = await agent_client.run(AgentSpec(model="scripted:chat-test"), "just once")
        on_ended = await agentloop_async("chat", "--thread", thread, env=env, stdin="more\n")
        on_plain = await agentloop_async("chat", "--thread", plain.run_id, env=env, stdin="more\n")
    assert on_ended.code == 1, on_ended.err
    assert on_ended.err.startswith(f"agentloop: thread {thread} has ended (cancelled); it takes no more messages.")
    assert on_plain.code == 1, on_plain.err
    assert on_plain.err == (f"agentloop: run {plain.run_id} is not a thread, so it takes no messages; "
                            "`agentloop chat` starts a new thread (or `--thread NEW_ID` names it)\n")


@pytest.mark.parametrize("end", ["cancel", "terminate"])
async def test_a_thread_that_ends_while_chatting_ends_the_chat(
    agent_client: AgentClient, worker, tmp_path: Path, workspace: Path, dev_server: DevServer, task_queue: str,
    end: str,
) -> None:
    env = clean_env(tmp_path, TEMPORAL_ADDRESS=dev_server.address, AGENTLOOP_TASK_QUEUE=task_queue)
    thread = f"cut-{uuid.uuid4().hex[:8]}"
    async with worker():
        chat = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentloop.cli", "chat", "--thread", thread, "--model", "scripted:chat-test",
            "--workspace", str(workspace), cwd=ROOT, env=env, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        try:
            assert chat.stdin is not None and chat.stdout is not None
            chat.stdin.write(b"hello\n")  # and the input stays open
            await chat.stdin.drain()
            await read_until(chat.stdout, "[turn 1 completed")
            # e.g. `agentloop cancel` or `temporal workflow terminate` in another terminal
            if end == "cancel":
                await agent_client.get_handle(thread).cancel()
                shown = await read_until(chat.stdout, "starts a new thread)\n")
            else:
                await agent_client.get_handle(thread).workflow_handle.terminate("by hand")
                shown = await read_until(chat.stdout, "shows it\n")
            code = await ended(chat)
            assert chat.stderr is not None
            err = (await chat.stderr.read()).decode()
        finally:
            if chat.returncode is None:
                chat.kill()
                await chat.wait()
    if end == "cancel":
        assert f"thread {thread} has ended: cancelled; it takes no more messages (`agentloop chat` starts a new " \
               "thread)\n" in shown
    else:
        assert (f"thread {thread} has ended without a word (terminated?); `agentloop show {thread}` shows it\n"
                in shown)
    assert "left thread" not in err  # it does not stay
    assert code == 1


async def test_a_message_refused_while_busy_is_a_sentence_and_the_chat_goes_on(
    agent_client: AgentClient, worker, tmp_path: Path, workspace: Path, dev_server: DevServer, task_queue: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CHAT_TEST_DIR", str(tmp_path))  # the model runs in this process's worker
    env = clean_env(tmp_path, TEMPORAL_ADDRESS=dev_server.address, AGENTLOOP_TASK_QUEUE=task_queue)
    thread = f"busy-{uuid.uuid4().hex[:8]}"
    terminal = Terminal()
    async with worker():
        chat = await start_chat(terminal, env, "--thread", thread, "--model", "scripted:chat-test",
                                "--workspace", str(workspace), "--strategy", "reject")
        try:
            await terminal.expect("you> ")
            terminal.type("hold it\n")
            await eventually((tmp_path / "holding").exists, "the holding file", 60)
            terminal.type("are you there?\n")
            await terminal.expect("are you there?\n")  # the terminal's echo
            refused = await terminal.expect("\n")
            (tmp_path / "release").touch()
            shown = await terminal.expect("you> ")
            terminal.type("/quit\n")
            await terminal.expect(f"left thread {thread}; it stays")
            code = await ended(chat)
            messages = await agent_client.get_handle(thread).messages()
        finally:
            if chat.returncode is None:
                chat.kill()
                await chat.wait()
            terminal.close()
    assert refused.startswith(f"thread {thread} is busy (turn 1 is under way) and rejects messages"), refused
    assert "agent> echo 1: hold it | heard: hold it\n[turn 1 completed" in shown
    assert code == 0
    assert [m.text for m in messages if m.role == "user"] == ["hold it"]
