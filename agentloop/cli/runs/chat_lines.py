"""What ``agentloop chat`` reads and says in lines: a typed line parsed into
a command (:func:`parse_line`, :data:`HELP`), the recap of a resumed thread,
the line said on leaving, and the line reader."""


from __future__ import annotations

import asyncio
import os
import shlex
import threading
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Literal

from agentloop.cli.runs.describe import short

if TYPE_CHECKING:
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
