"""``agentloop chat``: an interactive conversation on a thread.

Each line typed is a message to the thread (:meth:`AgentClient.send`); the
thread's event stream is followed for as long as the chat lasts, so answers
stream in as they are written, tool calls and their results show up as they
happen, and an approval is asked inline (y/n/s, and a reason for a denial).
Lines that start with ``/`` are commands (:func:`parse_line`, :data:`HELP`).

A thread outlives its chat: leaving (``/quit``, Ctrl-D, Ctrl-C, the end of
piped input) leaves the thread open, and ``agentloop chat --thread ID``
continues it later, with a short recap of its last messages.

On a terminal, lines are acted on as they are typed: a message sent while
the agent works is handled by the thread's double-texting strategy
(``enqueue`` unless ``--strategy`` or the spec says otherwise). From a pipe
or a file (scripted use), each line waits until the agent is done with the
previous one or asks for an approval, so a script reads top to bottom.
"""


from __future__ import annotations

import argparse
import asyncio
import contextlib
import shlex
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from temporalio.service import RPCError, RPCStatusCode

from agentloop.cli.common import (
    CommandFailed,
    existing_workspace,
    say,
    stdin_is_terminal,
    temporal_status,
)
from agentloop.cli.embedded import command_config, describe_rpc_error, session
from agentloop.cli.options import agent_options, imports, permission_options, run_id
from agentloop.cli.runs.chat_lines import HELP, ChatCommand, LineReader, exit_line, parse_line, recap_lines
from agentloop.cli.runs.chat_view import ApprovalAsker, ChatView
from agentloop.cli.spec_file import spec_of_run
from agentloop.shared.base.errors import AgentLoopError, UserError

if TYPE_CHECKING:
    from agentloop.client.agent_client import AgentClient
    from agentloop.client.handle import AgentRunHandle

# The command ---------------------------------------------------------------------------------


def new_thread_id() -> str:
    return f"thread-{uuid.uuid4().hex[:12]}"


async def cmd_chat(args: argparse.Namespace) -> int:
    from agentloop.client.agent_client import AgentClient

    thread_id = args.thread or new_thread_id()
    # A new thread needs an agent: say what is missing before starting anything.
    spec = None if args.thread else spec_of_run(args)
    config, dev = command_config(args.imports)
    embedded = config.address is None
    workspace = spec.workspace if spec is not None else existing_workspace(args.workspace)
    interactive = stdin_is_terminal()
    async with session(config, with_worker=embedded or args.local_worker, workspace=workspace,
                       command="chat") as s:
        if dev is not None:
            say(f"using the Temporal server of {dev.describe()} at {s.config.address}")
        client = AgentClient(s.client, task_queue=s.config.task_queue)
        chat = Chat(client, thread_id, args, spec=spec, interactive=interactive, embedded=embedded)
        return await chat.run()


class Chat:
    """One ``agentloop chat`` session on a thread."""

    def __init__(self, client: AgentClient, thread_id: str, args: argparse.Namespace, *, spec: Any,
                 interactive: bool, embedded: bool) -> None:
        self.client = client
        self.thread_id = thread_id
        self.args = args
        self.spec = spec
        self.interactive = interactive
        self.embedded = embedded
        self.tenant: str | None = getattr(args, "tenant", None)
        self.handle: AgentRunHandle = client.get_handle(thread_id)
        self.view = ChatView(thread_id, sys.stdout, interactive=interactive)
        self.asker = ApprovalAsker(self.view, self.handle.decide)
        self.exists = False
        self.follower: asyncio.Task[None] | None = None
        self.waiting_for_turn = 0  # scripted input: the turn whose end the next line waits for
        self.lost: str | None = None  # why the thread's events stopped coming, if they did
        self.gone = False  # the thread closed without a terminal event

    # Starting
    async def open(self) -> None:
        """Find the thread; a thread that exists is resumed with a recap."""
        try:
            description = await self.handle.workflow_handle.describe()
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND or "namespace" in err.message.lower():
                raise
            if self.spec is None:  # --thread ID for a thread that does not exist yet: start it
                self.spec = spec_of_run(self.args)
            say(f"thread {self.thread_id} (new) · {self.spec.model} · workspace {self.spec.workspace}")
            return
        from temporalio.client import WorkflowExecutionStatus

        from agentloop.shared.runs.search_attributes import AGENT_MODEL, AGENT_THREAD

        run = shlex.quote(self.thread_id)
        if not description.typed_search_attributes.get(AGENT_THREAD):
            raise CommandFailed(f"run {self.thread_id} is not a thread, so it takes no messages; "
                                "`agentloop chat` starts a new thread (or `--thread NEW_ID` names it)")
        if description.status != WorkflowExecutionStatus.RUNNING:
            raise CommandFailed(
                f"thread {self.thread_id} has ended ({temporal_status(description)}); it takes no more messages. "
                f"`agentloop show {run}` shows how it ended; `agentloop chat` starts a new thread")
        # The stream's end first: what happens from then on is followed, and the queries below see it all.
        offset = await self.handle.workflow_handle.query("__temporal_workflow_stream_offset", result_type=int)
        state, messages, pending = await self.handle.state(), await self.handle.messages(), await self.handle.pending()
        self.exists = True
        if self.args.model or self.args.spec:
            say(f"thread {self.thread_id} exists: it keeps its own agent; --spec, --model and the other agent "
                "options apply to new threads only")
        model = description.typed_search_attributes.get(AGENT_MODEL) or state.model or "?"
        say(f"thread {self.thread_id} · {model} · {len(messages)} messages so far")
        for line in recap_lines(messages):
            self.view.line(line)
        self.view.turn = self.view.ended_turn = state.turn
        if state.busy:
            self.view.ended_turn = state.turn - 1
            self.view._turn_started(state.turn)
            self.view.line(f"(turn {state.turn} is under way; what follows is the rest of it)")
        for approval in pending.approvals:
            self.view.pending[approval.call_id] = approval
        self.follow(offset)

    def follow(self, offset: int) -> None:
        self.follower = asyncio.ensure_future(self._follow(offset))

    async def _follow(self, offset: int) -> None:
        try:
            async for event in self.handle.events(offset):
                self.view.render(event)
                self.after_event()
            if self.view.ended is None:  # closed without a terminal event: terminated
                self.gone = True
                self.lost = (f"thread {self.thread_id} has ended without a word (terminated?); "
                             f"`agentloop show {shlex.quote(self.thread_id)}` shows it")
        except (AgentLoopError, RPCError) as exc:
            self.lost = f"lost the thread's events: {_describe(exc)}"
        finally:
            if self.lost:
                self.view.line(self.lost)
            self.view.changed.set()

    def over(self) -> bool:
        """The thread has ended, or its events can no longer be read."""
        return self.view.ended is not None or self.lost is not None

    def after_event(self) -> None:
        if self.view.ended is not None:
            return
        self.asker.refresh()
        if self.asker.asking is None and self.idle():
            self.view.show_prompt()

    def idle(self) -> bool:
        return not self.view.busy and self.view.ended_turn >= self.waiting_for_turn

    def ready_for_input(self) -> bool:
        """Scripted input: whether the next line may be read now."""
        return self.over() or self.asker.asking is not None or self.idle()

    # The loop
    async def run(self) -> int:
        await self.open()
        say("type a message; /help lists the commands; " +
            ("Ctrl-D or /quit leaves" if self.interactive else "the end of the input leaves"))
        reader = LineReader(sys.stdin)
        try:
            self.after_event()
            while True:
                if not self.interactive:
                    await self.until(self.ready_for_input)
                line = None if self.over() else await self.next_line(reader)
                if self.over():
                    return self.ended_code()
                if line is None:  # Ctrl-D, or the end of scripted input
                    if not self.interactive:  # let the agent answer the last line first
                        await self.until(self.ready_for_input)
                        if self.over():
                            return self.ended_code()
                    self.view.end_line()
                    self.leave()
                    return 0
                if self.interactive:
                    self.view.typed()  # the terminal echoed it
                else:
                    self.view.line(f"{self.asker.prompt_text() if self.asker.asking else 'you> '}{line}")
                if not await self.act(line):
                    self.leave()
                    return 0
        except asyncio.CancelledError:  # Ctrl-C, SIGTERM, SIGHUP
            self.view.end_line()
            self.leave()
            raise
        finally:
            reader.close()
            if self.follower is not None and not self.follower.done():
                self.follower.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await self.follower

    async def next_line(self, reader: LineReader) -> str | None:
        """The next typed line; None at the end of the input, or when the thread ends first."""
        get = asyncio.ensure_future(reader.lines.get())
        try:
            while True:
                self.view.changed.clear()
                if self.over():
                    return None
                changed = asyncio.ensure_future(self.view.changed.wait())
                try:
                    await asyncio.wait({get, changed}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    changed.cancel()
                if get.done():
                    return get.result()
        finally:
            get.cancel()

    async def until(self, condition: Callable[[], bool]) -> None:
        while not condition():
            self.view.changed.clear()
            await self.view.changed.wait()

    def leave(self) -> None:
        say(exit_line(self.thread_id, busy=self.view.busy, embedded=self.embedded, waiting=list(self.view.pending))
            if self.exists else f"left; nothing was sent, so thread {self.thread_id} was not started")

    def ended_code(self) -> int:
        """0 when the thread ended completed or stopped; 1 when it failed, was
        cancelled, or its events were lost (then how to come back is said)."""
        ended = self.view.ended
        if ended is None:
            if not self.gone:
                self.leave()
            return 1
        return 0 if ended.type == "thread.run.completed" else 1

    async def act(self, line: str) -> bool:
        """Do what a line says; False to leave."""
        command = parse_line(line)
        if self.asker.asking is not None and command.kind in ("message", "empty"):
            await self.asker.answer(line)
            return True
        if command.kind == "empty":
            self.after_event()
            return True
        if command.kind == "quit":
            return False
        try:
            await self.do(command)
        except (AgentLoopError, RPCError) as exc:
            self.view.line(_describe(exc))
        if self.asker.asking is None:
            self.after_event()
        elif command.kind != "stop":  # a stopped turn resolves its approvals
            self.asker.prompt()
        return True

    async def do(self, command: ChatCommand) -> None:
        kind = command.kind
        if kind == "error":
            self.view.line(command.text)
        elif kind == "help":
            self.view.line(HELP.replace("THREAD", self.thread_id))
        elif kind == "message":
            await self.send(command.text)
        elif not self.exists:
            self.view.line(f"thread {self.thread_id} starts with your first message; send one first")
        elif kind == "steer":
            await self.handle.steer(command.text, by="chat")
            self.view.line("  (steering sent: the agent reads it before its next step)")
        elif kind == "stop":
            state = await self.handle.state()
            if not getattr(state, "busy", self.view.busy):
                self.view.line("no turn is running, so there is nothing to stop; /quit leaves the chat "
                               f"(the thread stays), `agentloop cancel {shlex.quote(self.thread_id)}` ends "
                               "the thread")
                return
            await self.handle.stop(command.text or "stopped from agentloop chat")
            self.view.line(f"  (stopping turn {self.view.turn} after its current step)")
        elif kind == "fork":
            assert command.step is not None  # parse_command gives /fork its step, or an error
            forked = await self.client.fork(self.thread_id, command.step, command.text or None)
            self.view.line(f"forked thread {self.thread_id} at step {command.step}: new run {forked.run_id}")
            self.view.line(f"  `agentloop watch {shlex.quote(forked.run_id)}` follows it")
        elif kind == "export":
            await self.export(command.text)

    async def send(self, text: str) -> None:
        strategy = getattr(self.args, "strategy", None)
        spec = None if self.exists else self.spec
        self.view.sent.append(text)
        try:
            handle = await self.client.send(self.thread_id, text, spec, strategy=strategy, by="chat",
                                            tenant=self.tenant)
        except BaseException:
            self.view.sent.remove(text)
            raise
        turn = handle.turn or self.view.turn + 1
        if not self.exists:
            self.exists = True
            self.follow(0)
            self.waiting_for_turn = turn
            return
        self.waiting_for_turn = max(self.waiting_for_turn, turn)
        state = await self.handle.state()
        if state.busy and state.turn < turn:
            self.view.line(f"  (queued: turn {turn} answers it after turn {state.turn})")

    async def export(self, path_text: str) -> None:
        path = Path(path_text or f"{self.thread_id}.json").expanduser()
        snapshot = await self.handle.export()
        data = snapshot.model_dump_json(indent=2)
        try:
            path.write_text(data + "\n")
        except OSError as exc:
            self.view.line(f"cannot write {path}: {exc.strerror}; give another file, e.g. /export thread.json")
            return
        self.view.line(f"exported thread {self.thread_id} ({len(snapshot.messages)} messages) to {path}; "
                       f"`agentloop start --from {shlex.quote(str(path))}` starts a run from it")


def _describe(exc: BaseException) -> str:
    """A sentence for an error the chat shows and goes on from."""
    if isinstance(exc, RPCError):
        return describe_rpc_error(exc)
    if isinstance(exc, UserError | CommandFailed):
        return str(exc)
    return str(exc) or type(exc).__name__


def add_chat_parser(sub: Any) -> None:
    """The ``chat`` command and its options."""
    chat = sub.add_parser(
        "chat", help="talk with an agent on a thread, in the terminal (answers stream; approvals asked inline)",
        description="An interactive conversation on a thread. Type messages; /help lists the commands "
                    "(/steer, /stop, /fork N, /export). Leaving keeps the thread; `agentloop chat --thread ID` "
                    "continues it. With stdin from a pipe or file, each line waits for the answer to the last.",
    )
    chat.add_argument("--thread", type=run_id, metavar="ID", help="the thread to continue, or to start under this "
                      "id if it does not exist (default: a new thread)")
    chat.add_argument("--strategy", choices=["enqueue", "interrupt", "rollback", "reject"],
                      help="what a message sent while the agent works does (default: the thread's, enqueue)")
    agent_options(chat, spec_help="the agent's AgentSpec in a JSON or YAML file; the flags "
                                  "below override its fields (a new thread only: a thread keeps its agent)",
                  max_steps_help="most LLM steps of a turn (default: 16)",
                  max_tokens_help="most tokens the model may write in one step")
    permission_options(chat, allow_help="run TOOL's calls without asking; repeatable",
                       ask_help="ask before each call of TOOL; repeatable",
                       yes_help="run every call without asking (tools named with "
                                "--ask still ask)")
    chat.add_argument("--local-worker", action="store_true",
                      help="with TEMPORAL_ADDRESS set, also run a worker in this process")
    imports(chat)
