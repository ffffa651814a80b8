"""``agentloop chat``'s screen: a thread's events shown as a conversation
(:class:`ChatView`), and its approvals asked inline (:class:`ApprovalAsker`)."""


from __future__ import annotations

import asyncio
import shlex
from collections.abc import Awaitable, Callable
from typing import IO, TYPE_CHECKING, Any

from agentloop.cli.runs.describe import args_json, describe_compaction, describe_decision, describe_guardrail, short
from agentloop.shared.base.errors import AgentLoopError

if TYPE_CHECKING:
    from agentloop.shared.definition.approvals import PendingApproval


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
