"""Following a run: render its events until it ends, and ask its approvals
on a terminal (``agentloop run`` and ``agentloop watch``)."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

from temporalio.service import RPCError

from agentloop.cli.runs.describe import args_json
from agentloop.cli.runs.render import EventRenderer
from agentloop.shared.base.errors import DecisionRejected
from agentloop.shared.runs.events import (
    AgentEvent,
    ApprovalRequested,
    MessageReset,
    RunCompleted,
    SubAgentInvocationStarted,
    is_terminal,
)
from agentloop.shared.runs.result import AgentRunFailed

if TYPE_CHECKING:
    from agentloop.client.handle import AgentRunHandle
    from agentloop.shared.definition.approvals import PendingApproval

#: How long ``run``/``watch`` wait for a run's first event before saying that
#: no worker may be answering (reading events needs one, even for ended runs).
FIRST_EVENT_HINT_SECONDS = 15.0


class TerminalAnswers:
    """Lines typed on a terminal, read without blocking the event loop."""

    def __init__(self, stream: IO[str]) -> None:
        self._fd = stream.fileno()
        self._buffer = b""
        self.lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self._fd, self._readable)

    def _readable(self) -> None:
        try:
            chunk = os.read(self._fd, 4096)
        except OSError:  # the terminal went away
            chunk = b""
        if not chunk:  # end of input: no more answers
            self._loop.remove_reader(self._fd)
            self.lines.put_nowait(None)
            return
        self._buffer += chunk
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            self.lines.put_nowait(line.decode(errors="replace").strip())

    def discard_typed_ahead(self) -> None:
        while not self.lines.empty():
            if self.lines.get_nowait() is None:
                self.lines.put_nowait(None)
                return

    def close(self) -> None:
        self._loop.remove_reader(self._fd)


@dataclass
class Prompter:
    """Asks about pending approvals on a terminal, one at a time, and sends
    the answers; a call decided elsewhere (another terminal, an ops tool) is
    dropped from the questions. ``say`` shows a line to the person."""

    handle: AgentRunHandle
    answers: TerminalAnswers
    prompt_out: IO[str]
    say: Callable[[str], None]
    queue: list[PendingApproval] = field(default_factory=list)
    asking: PendingApproval | None = None
    wants_reason: bool = False
    closed: bool = False

    def ask(self, approval: PendingApproval) -> None:
        self.queue.append(approval)

    async def step(self, pending_ids: Collection[str]) -> None:
        """Drop questions nobody waits for, then ask the next one."""
        if self.asking is not None and self.asking.call_id not in pending_ids:
            self.say(f"\n  ({self.asking.call_id} was decided elsewhere)")
            self.asking, self.wants_reason = None, False
        self.queue = [a for a in self.queue if a.call_id in pending_ids]
        if self.asking is None and self.queue and not self.closed:
            self.asking = self.queue.pop(0)
            self.answers.discard_typed_ahead()
            self._prompt()

    def _prompt(self) -> None:
        assert self.asking is not None
        if self.wants_reason:
            text = "  reason, told to the model (Enter for none): "
        else:
            text = (f"approve {self.asking.tool_name} {args_json(self.asking.arguments, 100)}? "
                    "[y]es/[n]o/[s]kip: ")
        print(text, end="", file=self.prompt_out, flush=True)

    async def answer(self, line: str | None) -> None:
        """Act on one typed line."""
        from agentloop.shared.definition.approvals import ApprovalDecision

        if line is None:
            if self.asking is not None or self.queue:
                self.say("\n  (no more input: waiting for a decision from elsewhere)")
            self.closed, self.asking = True, None
            return
        approval = self.asking
        if approval is None:
            return  # typed while nothing was asked
        decision: ApprovalDecision | None = None
        if self.wants_reason:
            decision = ApprovalDecision(call_id=approval.call_id, decision="deny", reason=line or None, by="cli")
        elif line.lower() in ("y", "yes"):
            decision = ApprovalDecision(call_id=approval.call_id, decision="approve", by="cli")
        elif line.lower() in ("s", "skip"):
            decision = ApprovalDecision(call_id=approval.call_id, decision="skip", by="cli")
        elif line.lower() in ("n", "no"):
            self.wants_reason = True
        if decision is None:
            self._prompt()
            return
        self.asking, self.wants_reason = None, False
        try:
            await self.handle.decide(decision)
        except DecisionRejected as exc:
            self.say(f"  not sent: {exc}")
            return
        verb = {"approve": "approved", "deny": "denied", "skip": "skipped"}[decision.decision]
        self.say(f"  {verb} {approval.call_id}")


async def follow(
    handle: AgentRunHandle,
    renderer: EventRenderer,
    *,
    from_offset: int = 0,
    prompter: Prompter | None = None,
    tree: bool = False,
) -> AgentEvent | None:
    """Render the run's events from ``from_offset`` until it ends.

    With a ``prompter`` (stdin is a terminal), each approval is also asked
    there and the answer sent (the run's own; a sub-agent's is shown with
    the command that decides it). With ``tree``, the sub-agents' events are
    shown too, each line labelled with the sub-agent's name.

    Returns:
        The run's terminal event; None when the stream ended without one (a
        terminated run, or ``from_offset`` past the end of an ended run).
    """
    events: asyncio.Queue[Any] = asyncio.Queue()
    end = object()

    async def pump() -> None:
        try:
            async for event in handle.events(from_offset, include_children=tree):
                events.put_nowait(event)
        finally:
            events.put_nowait(end)

    labels = TreeLabels()
    pump_task = asyncio.ensure_future(pump())
    next_event: asyncio.Future[Any] | None = None
    line_task: asyncio.Future[str | None] | None = None
    terminal: AgentEvent | None = None
    hinted = from_offset > 0  # past offset 0, a quiet stream is no sign of a missing worker
    try:
        while True:
            if next_event is None:
                next_event = asyncio.ensure_future(events.get())
            waiting: set[asyncio.Future[Any]] = {next_event}
            if prompter is not None and not prompter.closed:
                if line_task is None:
                    line_task = asyncio.ensure_future(prompter.answers.lines.get())
                waiting.add(line_task)
            done, _ = await asyncio.wait(waiting, timeout=None if hinted else FIRST_EVENT_HINT_SECONDS,
                                         return_when=asyncio.FIRST_COMPLETED)
            if not done:
                hinted = True
                print(f"(no events from run {handle.run_id} yet: reading them needs a worker on its task "
                      "queue, even once the run has ended; is `agentloop worker` or `agentloop dev` running?)",
                      file=sys.stderr, flush=True)
                continue
            if next_event.done():
                hinted = True
                # Render all that arrived before asking anything, so a
                # replayed approval that is already decided is never asked.
                batch = [next_event.result()]
                next_event = None
                while not events.empty():
                    batch.append(events.get_nowait())
                for event in batch:
                    if event is end:
                        await pump_task  # raises what reading the stream raised
                        return terminal
                    if event.run_id != handle.run_id:
                        renderer.render_child(event, labels.label(event))
                        continue
                    labels.label(event)
                    reason = None
                    if isinstance(event, MessageReset):  # runs before the reset said why: ask the server
                        reason = event.reason or await retry_reason(handle, event)
                    renderer.render(event, reason=reason)
                    if is_terminal(event):
                        terminal = event
                    elif prompter is not None and isinstance(event, ApprovalRequested):
                        prompter.ask(event.approval)
                if prompter is not None and terminal is None:
                    await prompter.step(renderer.pending)
            if prompter is not None and line_task is not None and line_task.done():
                line, line_task = line_task.result(), None
                await prompter.answer(line)
    finally:
        for task in (pump_task, next_event, line_task):
            if task is not None and not task.done():
                task.cancel()
        if prompter is not None:
            prompter.answers.close()


class TreeLabels:
    """Names of a tree's runs for ``--tree`` views: a sub-agent's run is
    labelled by the names along its path, e.g. ``researcher/fact_checker``."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def label(self, event: AgentEvent) -> str:
        """The label of the event's run; learns the children it starts."""
        own = self.names.get(event.run_id, "")
        if isinstance(event, SubAgentInvocationStarted):
            self.names[event.child_run_id] = f"{own}/{event.name}" if own else event.name
        return own or event.run_id


async def retry_reason(handle: AgentRunHandle, event: MessageReset) -> str | None:
    """Why the LLM attempt before ``event.attempt`` failed: the last failure
    of the run's pending ``call_model`` activity while that attempt runs.
    None once the attempt is over (e.g. a finished run being replayed)."""
    try:
        description = await handle.workflow_handle.describe()
    except RPCError:
        return None
    for activity in description.raw_description.pending_activities:
        if (activity.activity_type.name == "call_model" and activity.attempt == event.attempt
                and activity.HasField("last_failure")):
            return await failure_message(handle.workflow_handle._client.data_converter, activity.last_failure)
    return None


async def failure_message(converter: Any, failure: Any) -> str | None:
    """A failure's message; one sealed in its encoded attributes (payload
    encryption, docs/security.md) is opened with ``converter``'s codec."""
    if not failure.HasField("encoded_attributes"):
        return failure.message or None
    copy = type(failure)()
    copy.CopyFrom(failure)
    try:
        error = await converter.decode_failure(copy)
    except Exception:  # a key this process lacks: say what the server holds
        return failure.message or None
    return str(getattr(error, "message", error)) or None


async def exit_code(handle: AgentRunHandle, terminal: AgentEvent | None) -> int:
    """0 for a run that completed or was stopped, 1 for one that failed or
    was cancelled; a stream without a terminal event asks the run's result."""
    if terminal is not None:
        return 0 if isinstance(terminal, RunCompleted) else 1
    try:
        result = await handle.result()
    except AgentRunFailed as failed:
        print(f"agentloop: {failed}", file=sys.stderr)
        return 1
    print(f"run {handle.run_id} has ended ({result.status}); no more events", file=sys.stderr)
    return 0


# Commands ---------------------------------------------------------------------
