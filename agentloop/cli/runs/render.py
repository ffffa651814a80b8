"""Showing a run's event stream to a person or a script.

``agentloop run`` and ``agentloop watch`` pass every event of a run, in
stream order, to an :class:`EventRenderer`, picked by :func:`make_renderer`:

* :class:`PlainRenderer`: ``[step N] ...`` lines, for logs and pipes; the
  final answer once at the end.
* :class:`RichRenderer`: a live view on a terminal: the answer as it streams,
  tool calls and results, approvals waiting (with the command that decides
  them), status changes and token usage.
* :class:`JsonlRenderer`: one event per line, exactly
  ``event.model_dump(mode="json")``, for scripts.

In every mode, lines meant for a person and not part of the output proper
(why a run failed, the closing summary) go to stderr, except in the rich
view, which is all for a person.
"""
from __future__ import annotations

import abc
import json
import sys
from typing import IO

from rich.console import Console
from rich.text import Text

from agentloop.cli.runs.describe import (
    approve_commands,
    args_json,
    describe_actions,
    describe_approval,
    describe_child_event,
    describe_compaction,
    describe_decision,
    describe_guardrail,
    describe_message,
    describe_result,
    describe_retry,
    describe_sub_agent,
    short,
    submit_command,
    when,
)
from agentloop.shared.base.messages import ThinkingPart
from agentloop.shared.definition.approvals import PendingApproval
from agentloop.shared.runs.events import (
    AgentEvent,
    ApprovalRequested,
    ApprovalResolved,
    MessageCompleted,
    MessageDelta,
    MessageReset,
    RequiresAction,
    RunCancelled,
    RunCompleted,
    RunFailed,
    RunStatusChanged,
    StepCreated,
    SubAgentInvocationCompleted,
    SubAgentInvocationStarted,
    ToolCallCompletedByLLM,
    ToolExecutionCompleted,
    is_terminal,
)


class EventRenderer(abc.ABC):
    """Shows a run's events; call :meth:`render` with each, in stream order.

    The base keeps what every mode needs: the steps and tool calls seen (the
    closing summary counts them when the renderer saw the stream from its
    start) and the calls waiting for a decision (:attr:`pending`).

    Attributes:
        pending: Calls waiting for an operator's decision, by call id.
        steps: Steps begun, among the events seen.
        tool_calls: Tool calls answered, among the events seen.
    """

    def __init__(self) -> None:
        self.pending: dict[str, PendingApproval] = {}
        self.steps = 0
        self.tool_calls = 0
        self._from_start: bool | None = None
        self._reason: str | None = None

    def render(self, event: AgentEvent, *, stop_reason: str | None = None, reason: str | None = None) -> None:
        """Show one event.

        Args:
            event: The next event of the stream.
            stop_reason: For a run that ended ``stopped``, why; the terminal
                event's ``note`` when not given.
            reason: For a ``thread.message.reset``, why the attempt before
                failed (the provider's mapped error); the CLI reads it from
                the run's pending LLM activity.
        """
        if stop_reason is None and isinstance(event, RunCompleted):
            stop_reason = event.note
        if self._from_start is None:
            self._from_start = event.seq in (0, None)
        if isinstance(event, StepCreated):
            self.steps += 1
        elif isinstance(event, ToolExecutionCompleted):
            self.tool_calls += 1
        elif isinstance(event, ApprovalRequested):
            self.pending[event.approval.call_id] = event.approval
        elif isinstance(event, ApprovalResolved):
            self.pending.pop(event.call_id, None)
        elif is_terminal(event):
            self.pending.clear()
        self._reason = reason
        self._show(event, stop_reason)

    def render_child(self, event: AgentEvent, label: str) -> None:
        """Show a sub-agent's event (``watch --tree``), labelled with its
        name; it changes nothing this renderer counts for the run."""
        for line in describe_child_event(event, label):
            self.note(line)

    @abc.abstractmethod
    def note(self, text: str) -> None:
        """A line for the person following the run (e.g. an answer to a prompt)."""

    @abc.abstractmethod
    def _show(self, event: AgentEvent, stop_reason: str | None) -> None:
        """Show one event, in this renderer's mode."""

    def summary(self, event: RunCompleted | RunFailed | RunCancelled) -> str:
        """Steps, tool calls and tokens of the whole run (counts only when
        this renderer saw the stream from its start)."""
        usage = event.usage
        parts = [f"{self.steps} step{'' if self.steps == 1 else 's'}",
                 f"{self.tool_calls} tool call{'' if self.tool_calls == 1 else 's'}"] if self._from_start else []
        parts.append(f"{usage.input_tokens} in / {usage.output_tokens} out tokens")
        return ", ".join(parts)

    def ending(self, event: RunCompleted | RunFailed | RunCancelled, stop_reason: str | None) -> str:
        """How the run ended, in words for stderr (the final text aside)."""
        run_id = event.run_id
        if isinstance(event, RunFailed):
            return f"\nrun {run_id} failed ({event.reason}): {event.error}"
        if isinstance(event, RunCancelled):
            return (f"\nrun {run_id} was cancelled (`agentloop cancel` or the Temporal UI); "
                    f"`agentloop show {run_id}` shows where it stopped")
        if event.status == "stopped":
            return f"\nrun {run_id} stopped on request ({stop_reason or 'no reason given'})"
        return ""


class PlainRenderer(EventRenderer):
    """``[step N] ...`` lines as calls are made and answered, approvals with
    the commands that decide them, and the final answer once at the end.

    Args:
        out: Where the lines and the final answer go.
        err: Where how the run ended goes.
    """

    def __init__(self, out: IO[str], err: IO[str]) -> None:
        super().__init__()
        self.out, self.err = out, err

    def note(self, text: str) -> None:
        self._print(text)

    def _print(self, *lines: str, err: bool = False) -> None:
        for line in lines:
            print(line, file=self.err if err else self.out, flush=True)

    def _show(self, event: AgentEvent, stop_reason: str | None) -> None:
        step = event.step + 1
        if isinstance(event, MessageCompleted):
            self._print(*describe_message(event.message, step))
        elif isinstance(event, MessageReset):
            self._print(f"[step {step}] {describe_retry(event, self._reason)}")
        elif isinstance(event, ToolExecutionCompleted):
            self._print(describe_result(event.result, step))
        elif isinstance(event, ApprovalRequested):
            self._print(*describe_approval(event.run_id, event.approval))
        elif isinstance(event, ApprovalResolved):
            self._print(f"[step {step}] {describe_decision(event)}")
        elif isinstance(event, RequiresAction):
            self._print(*describe_actions(event.run_id, event.actions))
        elif event.type == "agent.context.compacted":
            self._print(f"[step {step}] {describe_compaction(event)}")
        elif event.type == "agent.guardrail.triggered":
            self._print(f"[step {step}] {describe_guardrail(event)}")
        elif isinstance(event, (SubAgentInvocationStarted, SubAgentInvocationCompleted)):
            self._print(f"[step {step}] {describe_sub_agent(event)}")
        elif isinstance(event, (RunCompleted, RunFailed, RunCancelled)):
            if ending := self.ending(event, stop_reason):
                self._print(ending, err=True)
            if isinstance(event, RunCompleted):
                self._print("\n" + event.final_text)
                self._print(f"\n[{self.summary(event)}]", err=True)


class JsonlRenderer(EventRenderer):
    """One JSON object per event and line, flushed, and nothing else on
    ``out``; how the run ended and notes for a person go to ``err``."""

    def __init__(self, out: IO[str], err: IO[str]) -> None:
        super().__init__()
        self.out, self.err = out, err

    def note(self, text: str) -> None:
        print(text, file=self.err, flush=True)

    def render_child(self, event: AgentEvent, label: str) -> None:
        self._show(event, None)  # every event, tagged by its run_id

    def _show(self, event: AgentEvent, stop_reason: str | None) -> None:
        self.out.write(json.dumps(event.model_dump(mode="json"), ensure_ascii=False, separators=(",", ":")) + "\n")
        self.out.flush()
        if isinstance(event, (RunCompleted, RunFailed, RunCancelled)):
            if ending := self.ending(event, stop_reason):
                self.note(ending)
            if isinstance(event, RunCompleted):
                self.note(f"\n[{self.summary(event)}]")


class RichRenderer(EventRenderer):
    """A live view of the run on a terminal.

    The assistant's text is printed as it streams; a retried LLM attempt
    (``thread.message.reset``) gets a short note and its message starts
    over below it, so nothing is shown twice after the note.

    Args:
        console: Where to draw (stdout's terminal).
    """

    #: Tool results are shown cut to this many characters at most.
    RESULT_CHARS = 160

    def __init__(self, console: Console) -> None:
        super().__init__()
        self.console = console
        self._line_open = False  # streamed text without its newline yet
        self._streaming: str | None = None  # "text" or "thinking", on the open line
        self._attempt: dict[str, int] = {}
        self._shown: dict[str, str] = {}  # text of each message shown so far (current attempt)
        self._streamed: set[str] = set()  # messages that had deltas (current attempt)
        self._last_text = ""

    def note(self, text: str) -> None:
        self._end_line()
        self.console.print(Text(text))

    def _write(self, text: str, style: str = "") -> None:
        self.console.print(Text(text, style=style), end="", soft_wrap=True)
        self._line_open = not text.endswith("\n")

    def _end_line(self) -> None:
        if self._line_open:
            self.console.print()
        self._line_open, self._streaming = False, None

    def _line(self, *parts: str | tuple[str, str], indent: int = 0) -> None:
        self._end_line()
        self.console.print(Text.assemble(" " * indent, *parts), soft_wrap=True)

    def _show(self, event: AgentEvent, stop_reason: str | None) -> None:
        step = event.step + 1
        if isinstance(event, StepCreated):
            self._end_line()
            self.console.rule(Text(f"step {step}", style="dim"), style="dim", align="left")
        elif isinstance(event, MessageDelta):
            self._delta(event)
        elif isinstance(event, MessageReset):
            self._attempt[event.message_id] = event.attempt
            self._shown[event.message_id] = ""
            self._streamed.discard(event.message_id)
            why = f": {short(self._reason, 200)}" if self._reason else ""
            self._line((f"(retrying step {step}, attempt {event.attempt}{why})", "yellow"))
        elif isinstance(event, MessageCompleted):
            self._completed(event)
        elif isinstance(event, ToolCallCompletedByLLM):
            call = event.call
            limit = max(40, self.console.width - len(call.name) - 4)
            self._line(("→ ", "cyan"), (call.name, "bold cyan"), " ", (args_json(call.arguments, limit), "dim"))
        elif isinstance(event, ToolExecutionCompleted):
            result = event.result
            mark, style = ("✗", "red") if result.is_error else ("✓", "green")
            label = result.name + ("" if event.ran else " (not run)")
            # On one line when the terminal is wide enough.
            limit = max(40, min(self.RESULT_CHARS, self.console.width - len(label) - 6))
            self._line((mark + " ", style), label, (f"  {short(result.content, limit)}", "dim"), indent=2)
        elif isinstance(event, ApprovalRequested):
            self._approval(event.run_id, event.approval)
        elif isinstance(event, ApprovalResolved):
            style = "green" if event.decision == "approve" else "yellow" if event.decision == "skip" else "red"
            self._line((describe_decision(event), style), indent=2)
        elif isinstance(event, RequiresAction):
            self._end_line()
            for a in event.actions:
                self._line((" waiting for client output ", "bold black on yellow"), " ",
                           (a.tool_name, "bold"), " ", (args_json(a.arguments), "dim"), f"  (call {a.call_id})")
            self._line("submit: ", (submit_command(event.run_id, event.actions), "bold"),
                       ("   (OUTPUT '-' reads stdin)", "dim"), indent=2)
        elif event.type == "agent.context.compacted":
            self._line((describe_compaction(event), "dim"))
        elif event.type == "agent.guardrail.triggered":
            self._line((describe_guardrail(event), "red" if event.tripwire else "yellow"), indent=2)
        elif event.type == "agent.run.quota.waiting":
            self._line((f"waiting for quota until {event.until.isoformat()}: {event.message}", "yellow"), indent=2)
        elif isinstance(event, (SubAgentInvocationStarted, SubAgentInvocationCompleted)):
            failed = isinstance(event, SubAgentInvocationCompleted) and event.status not in ("completed", "stopped")
            self._line((describe_sub_agent(event), "red" if failed else "magenta"), indent=2)
        elif isinstance(event, RunStatusChanged):
            # Only the waits and their end: the run's start and end have their own lines.
            if event.previous is not None and event.status in ("running", "awaiting_approval", "requires_action",
                                                                 "waiting_for_quota"):
                self._line((f"status: {event.previous} → {event.status}", "dim"))
        elif isinstance(event, (RunCompleted, RunFailed, RunCancelled)):
            self._ended(event, stop_reason)

    def _delta(self, event: MessageDelta) -> None:
        message_id, delta = event.message_id, event.delta
        if event.attempt < self._attempt.get(message_id, 0) or delta.kind not in ("text", "thinking"):
            return  # a late delta of a failed attempt; tool calls show once complete
        self._attempt.setdefault(message_id, event.attempt)
        self._streamed.add(message_id)
        if self._streaming != delta.kind:
            self._end_line()
            self._streaming = delta.kind
        if delta.kind == "text":
            self._shown[message_id] = self._shown.get(message_id, "") + delta.text
            self._write(delta.text)
        else:
            self._write(delta.text, "dim italic")

    def _completed(self, event: MessageCompleted) -> None:
        text, shown = event.message.text, self._shown.get(event.message_id, "")
        if event.message_id not in self._streamed:
            # Not streamed (a provider that answers whole, or watched from
            # past the deltas): show it now.
            for part in event.message.content:
                if isinstance(part, ThinkingPart) and part.text:
                    self._line((part.text, "dim italic"))
            if text:
                self._line(text)
        elif text.startswith(shown) and text != shown:
            self._write(text[len(shown):])
        self._end_line()
        self._last_text = text
        usage = event.usage
        self._line((f"{usage.input_tokens} in / {usage.output_tokens} out tokens", "dim"), indent=2)

    def _approval(self, run_id: str, approval: PendingApproval) -> None:
        approve, deny, _skip = approve_commands(run_id, approval.call_id)
        self._line((" approval needed ", "bold black on yellow"), " ", (approval.tool_name, "bold"), " ",
                   args_json(approval.arguments), (f"  (call {approval.call_id})", "dim"))
        if approval.reason:
            self._line(("why: ", "dim"), approval.reason, indent=2)
        if approval.expires_at:
            self._line((f"denied automatically at {when(approval.expires_at)} without a decision", "dim"),
                       indent=2)
        self._line("approve: ", (approve, "bold yellow"), indent=2)
        self._line("deny:    ", (deny, "yellow"), indent=2)

    def _ended(self, event: RunCompleted | RunFailed | RunCancelled, stop_reason: str | None) -> None:
        self._end_line()
        if isinstance(event, RunCompleted):
            if event.final_text and event.final_text != self._last_text:
                self._line(event.final_text)  # its deltas came before what we saw
            if event.status == "stopped":
                head = (f"■ stopped ({stop_reason or 'on request'})", "bold yellow")
            else:
                head = ("✓ completed", "bold green")
        elif isinstance(event, RunFailed):
            head = (f"✗ failed ({event.reason}): {event.error}", "bold red")
        else:
            head = ("✗ cancelled", "bold red")
        self.console.print()
        self._line(head, (f" · {self.summary(event)}", "dim"))


def make_renderer(out: IO[str] | None = None, err: IO[str] | None = None, *, jsonl: bool = False) -> EventRenderer:
    """JSON lines with ``jsonl``; else the rich view when ``out`` is a
    terminal, plain lines when it is not."""
    out, err = out or sys.stdout, err or sys.stderr
    if jsonl:
        return JsonlRenderer(out, err)
    if out.isatty():
        return RichRenderer(Console(file=out, highlight=False))
    return PlainRenderer(out, err)
