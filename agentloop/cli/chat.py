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
import os
import shlex
import sys
import threading
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

from temporalio.service import RPCError, RPCStatusCode

from agentloop.cli.common import CommandFailed, existing_workspace, say, temporal_status
from agentloop.shared.base.errors import AgentLoopError, UserError
from agentloop.cli.render import args_json, describe_compaction, describe_decision, describe_guardrail, short

if TYPE_CHECKING:
    from agentloop.shared.definition.approvals import PendingApproval
    from agentloop.client.agent_client import AgentClient, AgentRunHandle
    from agentloop.shared.base.messages import Message


#: How many of a resumed thread's last messages the recap shows.
RECAP_MESSAGES = 6

#: What ``/help`` prints.
HELP = """\
Type a message and press Enter. A message sent while the agent works is handled by the thread's
double-texting strategy (enqueue: answered after the current turn).
  /steer TEXT      tell the working agent something; it reads it before its next step
  /stop [REASON]   end the current turn after its step (the thread stays)
  /fork N          start a new run from this conversation up to the end of step N
  /export [FILE]   write the thread's snapshot as JSON to FILE (default: THREAD.json)
  /help            this list
  /quit            leave; the thread stays (`agentloop chat --thread THREAD` continues it)
  //TEXT           send a message that begins with /
An approval asks [y]es/[n]o/[s]kip; after n, the reason you type is told to the agent."""

CommandKind = Literal["message", "steer", "stop", "fork", "export", "help", "quit", "empty", "error"]


@dataclass(frozen=True)
class ChatCommand:
    """One typed line, understood.

    Attributes:
        kind: What to do.
        text: The message, the steering text, the stop reason, the fork's
            new message or the export file ("" when none was given); for
            ``error``, the sentence to show.
        step: For ``fork``, the step to fork after.
    """

    kind: CommandKind
    text: str = ""
    step: int | None = None


def parse_line(line: str) -> ChatCommand:
    """Understand a typed line (pure: no I/O)."""
    text = line.strip()
    if not text:
        return ChatCommand("empty")
    if text.startswith("//"):
        return ChatCommand("message", text[1:])
    if not text.startswith("/"):
        return ChatCommand("message", text)
    word, _, rest = text.partition(" ")
    name, rest = word[1:].lower(), rest.strip()
    if name == "steer":
        if not rest:
            return ChatCommand("error", "/steer needs the text to tell the agent, e.g. /steer use the v2 API")
        return ChatCommand("steer", rest)
    if name == "stop":
        return ChatCommand("stop", rest)
    if name == "fork":
        number, _, message = rest.partition(" ")
        try:
            step = int(number)
        except ValueError:
            step = 0
        if step < 1:
            shown = f" ({short(number, 20)!r} is not)" if number else ""
            return ChatCommand("error", f"/fork needs the step to fork after, a whole number 1 or more{shown}, "
                                        "e.g. /fork 2; each turn's summary line names its steps")
        return ChatCommand("fork", message.strip(), step=step)
    if name == "export":
        return ChatCommand("export", rest)
    if name in ("help", "?"):
        return ChatCommand("help")
    if name in ("quit", "exit", "q"):
        return ChatCommand("quit")
    shown = short(word, 40)
    return ChatCommand("error", f"unknown command {shown}; /help lists the commands "
                                "(start a line with // to send a message that begins with /)")


def recap_lines(messages: list[Message], limit: int = RECAP_MESSAGES) -> list[str]:
    """The last ``limit`` things said in a conversation, one short line each
    (pure: for ``chat --thread ID`` on a thread that exists)."""
    said: list[str] = []
    for message in messages:
        if message.role == "user" and message.text:
            said.append(f"  you: {short(message.text, 160)}")
        elif message.role == "assistant":
            names = ", ".join(call.name for call in message.tool_calls)
            if message.text:
                said.append(f"  agent: {short(message.text, 160)}" + (f" (called {names})" if names else ""))
            elif names:
                said.append(f"  agent called {names}")
    if len(said) > limit:
        return [f"  ... {len(said) - limit} earlier", *said[-limit:]]
    return said


def exit_line(thread_id: str, *, busy: bool = False, embedded: bool = False, waiting: list[str] | None = None) -> str:
    """What the chat says as it leaves: the thread stays, and how to go on
    (``waiting``: the calls whose approval is still asked)."""
    run = shlex.quote(thread_id)
    line = f"left thread {thread_id}; it stays: `agentloop chat --thread {run}` continues it"
    if waiting:
        line += f" (and asks again for the decision on {', '.join(waiting)})"
    elif busy:
        line += (" (its current turn goes on once `agentloop chat` or `agentloop dev` runs a worker here)"
                 if embedded else " (its current turn goes on meanwhile)")
    return line


# The conversation as it is shown ------------------------------------------------------


class ChatView:
    """Shows a thread's events as a conversation, and keeps what the chat
    needs to know: the turn under way, the steps it took, the calls waiting
    for a decision, whether the thread has ended.

    Args:
        thread_id: The thread (its events from other runs are ignored).
        out: Where the conversation goes.
        interactive: Whether a person types (then prompts are shown).
    """

    #: The prompt shown when the agent waits for a message.
    prompt = "you> "

    def __init__(self, thread_id: str, out: IO[str], *, interactive: bool = False) -> None:
        self.thread_id = thread_id
        self.out = out
        self.interactive = interactive
        self.pending: dict[str, PendingApproval] = {}
        self.busy = False
        self.turn = 0  # the turn under way, or the last one
        self.ended_turn = 0  # the last turn that ended
        # 1-based steps of the turn under way, numbered across the thread's
        # turns: the numbers /fork takes (AgentSnapshot.step_ends).
        self.first_step: int | None = None
        self.last_step: int | None = None
        self.ended: Any = None  # the thread's terminal event
        self.sent: list[str] = []  # messages this chat sent, not seen received yet
        self.changed = asyncio.Event()
        self._line_open = False  # text on the current line without its newline yet
        self._prompt_shown = False
        self._shown: dict[str, str] = {}  # streamed text of each message (current attempt)
        self._attempt: dict[str, int] = {}
        self._said_in_turn = False  # some answer text of this turn was shown

    # Output helpers
    def write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    def line(self, text: str = "") -> None:
        """A line of its own (after ending any open one)."""
        self.end_line()
        self.write(text + "\n")

    def end_line(self) -> None:
        if self._line_open:
            self.write("\n")
        self._line_open = self._prompt_shown = False

    def typed(self) -> None:
        """The person pressed Enter: the terminal echoed the line and its newline."""
        self._line_open = self._prompt_shown = False

    def show_prompt(self, text: str | None = None) -> None:
        text = self.prompt if text is None else text
        if not self.interactive or self._prompt_shown:
            return
        self.end_line()
        self.write(text)
        self._line_open = self._prompt_shown = True

    # Events
    def render(self, event: Any) -> None:
        """Show one event of the thread's stream and update what is known."""
        try:
            self._render(event)
        finally:
            self.changed.set()

    def _render(self, event: Any) -> None:
        kind = getattr(event, "type", "")
        if getattr(event, "run_id", self.thread_id) != self.thread_id:
            return  # a sub-agent's event
        step = getattr(event, "step", 0) + 1
        if kind == "agent.turn.started":
            self._turn_started(event.turn)
        elif kind == "agent.run.step.created":
            if not self.busy:  # a thread that predates turn events, or a plain run
                self._turn_started(self.turn + 1)
            self.first_step = self.first_step or step
            self.last_step = step
        elif kind == "thread.message.delta":
            self._delta(event)
        elif kind == "thread.message.reset":
            self._shown[event.message_id] = ""
            self._attempt[event.message_id] = event.attempt
            why = f" ({event.reason})" if getattr(event, "reason", None) else ""
            self.line(f"  (the LLM call failed{why}; retrying step {step}, attempt {event.attempt})")
        elif kind == "thread.message.completed":
            self._completed(event)
        elif kind == "agent.tool.execution.completed":
            result = event.result
            mark = "✗" if result.is_error else "✓"
            label = result.name + ("" if event.ran else " (not run)")
            self.line(f"  {mark} {label}: {short(result.content, 160)}")
        elif kind == "agent.tool.approval.requested":
            self.pending[event.approval.call_id] = event.approval
            approval = event.approval
            why = f" ({approval.reason})" if approval.reason else ""
            self.line(f"  approval needed: {approval.tool_name} {args_json(approval.arguments)}{why}")
        elif kind == "agent.tool.approval.resolved":
            self.pending.pop(event.call_id, None)
            self.line(f"  {describe_decision(event)}")
        elif kind == "thread.run.requires_action":
            ids = " ".join(a.call_id for a in event.actions)
            self.line(f"  the agent waits for outputs of calls the client runs ({ids}); chat cannot run them: "
                      f"`agentloop submit {shlex.quote(self.thread_id)} ...` answers them")
        elif kind == "agent.context.compacted":
            self.line(f"  ({describe_compaction(event)})")
        elif kind == "agent.guardrail.triggered":
            self.line(f"  {describe_guardrail(event)}")
        elif kind == "agent.run.steered":
            texts = "; ".join(short(text, 100) for text in getattr(event, "texts", []))
            self.line(f"  (steering read before step {step}{': ' + texts if texts else ''})")
        elif kind == "agent.thread.message.received":
            text = getattr(event, "text", "")
            if text and not self.mine(text):  # sent from elsewhere: `agentloop send`, another chat
                by = getattr(event, "by", None)
                self.line(f"  (message{' from ' + by if by else ''} for turn {event.turn}: {short(text, 160)})")
        elif kind == "agent.turn.interrupted":
            self.line(f"  (turn {event.turn} interrupted by the message of turn {getattr(event, 'by_turn', '?')})")
        elif kind == "agent.turn.rolled_back":
            self.line(f"  (turn {event.turn} rolled back: the message of turn {getattr(event, 'by_turn', '?')} "
                      "takes its place)")
        elif kind == "agent.turn.ended":
            self._turn_ended(event)
        elif kind in ("thread.run.completed", "thread.run.failed", "thread.run.cancelled"):
            self._thread_ended(event)

    def mine(self, text: str) -> bool:
        """Whether this chat sent ``text`` (and forget it: each is shown once)."""
        if text in self.sent:
            self.sent.remove(text)
            return True
        return False

    def _turn_started(self, turn: int) -> None:
        self.busy, self.turn = True, turn
        self.first_step = self.last_step = None
        self._attempt.clear()
        self._said_in_turn = False

    def _agent_says(self) -> None:
        if not self._line_open or self._prompt_shown:
            self.end_line()
            self.write("agent> ")
            self._line_open = True

    def _delta(self, event: Any) -> None:
        message_id, delta = event.message_id, event.delta
        if delta.kind != "text" or event.attempt < self._attempt.get(message_id, 0):
            return  # thinking and tool-call chunks show once complete; a late chunk of a failed attempt
        self._attempt.setdefault(message_id, event.attempt)
        if message_id not in self._shown or not self._shown[message_id]:
            self._shown[message_id] = ""
            self._agent_says()
        self._shown[message_id] += delta.text
        self._said_in_turn = True
        self.write(delta.text)
        self._line_open = not delta.text.endswith("\n")

    def _completed(self, event: Any) -> None:
        message = event.message
        text, shown = message.text, self._shown.pop(event.message_id, "")
        if text and not shown:
            self._agent_says()
            self.write(text)
        elif text.startswith(shown) and text != shown:
            self.write(text[len(shown):])
        if text:
            self._said_in_turn = True
            self.end_line()
        for call in message.tool_calls:
            self.line(f"  → {call.name} {args_json(call.arguments, 160)}")

    def steps_text(self) -> str:
        if self.first_step is None:
            return "no step"
        if self.first_step == self.last_step:
            return f"step {self.first_step}"
        return f"steps {self.first_step}-{self.last_step}"

    def _turn_ended(self, event: Any) -> None:
        status, reason = getattr(event, "status", "completed"), getattr(event, "reason", None)
        final = getattr(event, "final_text", "") or ""
        if final and not self._said_in_turn:  # e.g. a chat that joined the turn past its deltas
            self._agent_says()
            self.write(final)
        how = status if not reason or reason in (status, "done") else f"{status}: {reason}"
        error = getattr(event, "error", None) or ""
        if error.startswith(f"{status}: "):  # "stopped: <the stop request's reason>"
            error = error[len(status) + 2:]
        if error:
            how += f" ({short(error, 200)})"
        usage = getattr(event, "usage", None)
        tokens = f" · {usage.input_tokens} in / {usage.output_tokens} out tokens" if usage else ""
        self.line(f"[turn {getattr(event, 'turn', self.turn)} {how} · {self.steps_text()}{tokens}]")
        self.busy = False
        self.ended_turn = max(self.ended_turn, getattr(event, "turn", self.turn))
        self.pending.clear()

    def _thread_ended(self, event: Any) -> None:
        self.ended = event
        self.busy = False
        self.pending.clear()
        if event.type == "thread.run.completed":
            if event.final_text and not self._said_in_turn:
                self._agent_says()
                self.write(event.final_text)
                self.end_line()
            how = "stopped" + (f" ({event.note})" if event.note else "") if event.status == "stopped" \
                else "completed"
        elif event.type == "thread.run.failed":
            how = f"failed ({event.reason}): {short(event.error, 300)}"
        else:
            how = "cancelled"
        self.line(f"thread {self.thread_id} has ended: {how}; it takes no more messages (`agentloop chat` "
                  "starts a new thread)")


# Approvals asked inline ------------------------------------------------------------------


class ApprovalAsker:
    """Asks the thread's pending approvals one at a time; the next typed
    line that is not a command answers the one asked."""

    def __init__(self, view: ChatView, decide: Callable[[Any], Awaitable[Any]]) -> None:
        self.view = view
        self.decide = decide
        self.asking: PendingApproval | None = None
        self.wants_reason = False

    def refresh(self) -> None:
        """Drop a question that was decided elsewhere; ask the next pending one."""
        if self.asking is not None and self.asking.call_id not in self.view.pending:
            self.asking, self.wants_reason = None, False
        if self.asking is None and self.view.pending:
            self.asking = next(iter(self.view.pending.values()))
            self.prompt()

    def prompt_text(self) -> str:
        assert self.asking is not None
        if self.wants_reason:
            return "  reason, told to the agent (Enter for none): "
        return f"approve {self.asking.tool_name} {args_json(self.asking.arguments, 100)}? [y]es/[n]o/[s]kip: "

    def prompt(self) -> None:
        self.view.show_prompt(self.prompt_text())

    async def answer(self, line: str) -> None:
        from agentloop.shared.definition.approvals import ApprovalDecision

        approval = self.asking
        assert approval is not None
        answer = line.strip().lower()
        decision = None
        if self.wants_reason:
            decision = ApprovalDecision(call_id=approval.call_id, decision="deny", reason=line.strip() or None,
                                        by="chat")
        elif answer in ("y", "yes"):
            decision = ApprovalDecision(call_id=approval.call_id, decision="approve", by="chat")
        elif answer in ("s", "skip"):
            decision = ApprovalDecision(call_id=approval.call_id, decision="skip", by="chat")
        elif answer in ("n", "no"):
            self.wants_reason = True
        else:
            self.view.line("  answer y (run it), n (deny it) or s (skip it); a line starting with / is a command")
        if decision is None:
            self.prompt()
            return
        self.asking, self.wants_reason = None, False
        # The call leaves the questions now; its resolved event confirms it.
        self.view.pending.pop(approval.call_id, None)
        try:
            await self.decide(decision)
        except AgentLoopError as exc:
            self.view.line(f"  not sent: {exc}")
        self.refresh()


# Reading lines -------------------------------------------------------------------------------


class LineReader:
    """Lines from a stream, without blocking the event loop; None at the end.

    A terminal or a pipe is watched by the event loop; a regular file (which
    the loop cannot watch) is read by a thread."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._loop = asyncio.get_running_loop()
        self._buffer = b""
        self._fd = stream.fileno()
        self._watching = False
        try:
            self._loop.add_reader(self._fd, self._readable)
            self._watching = True
        except (PermissionError, OSError, ValueError):
            threading.Thread(target=self._read_all, name="chat-stdin", daemon=True).start()

    def _readable(self) -> None:
        try:
            chunk = os.read(self._fd, 4096)
        except OSError:  # the terminal went away
            chunk = b""
        self._take(chunk)

    def _take(self, chunk: bytes) -> None:
        if not chunk:
            if self._buffer:
                self.lines.put_nowait(self._buffer.decode(errors="replace").rstrip("\r"))
                self._buffer = b""
            self.close()
            self.lines.put_nowait(None)
            return
        self._buffer += chunk
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            self.lines.put_nowait(line.decode(errors="replace").rstrip("\r"))

    def _read_all(self) -> None:
        while True:
            try:
                chunk = os.read(self._fd, 65536)
            except OSError:
                chunk = b""
            self._loop.call_soon_threadsafe(self._take, chunk)
            if not chunk:
                return

    def close(self) -> None:
        if self._watching:
            self._loop.remove_reader(self._fd)
            self._watching = False


# The command ---------------------------------------------------------------------------------


def new_thread_id() -> str:
    return f"thread-{uuid.uuid4().hex[:12]}"


async def cmd_chat(args: argparse.Namespace) -> int:
    from agentloop.cli.embedded import command_config, session
    from agentloop.cli.run import spec_of_run, stdin_is_terminal
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
                from agentloop.cli.run import spec_of_run

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
            handle = await self.client.send(self.thread_id, text, spec, strategy=strategy, by="chat")
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
        from agentloop.cli import describe_rpc_error

        return describe_rpc_error(exc)
    if isinstance(exc, UserError | CommandFailed):
        return str(exc)
    return str(exc) or type(exc).__name__
