"""Lines that describe a run and its events, shared by the renderers,
``agentloop show`` and ``agentloop chat``: leaf code, no input or output."""

from __future__ import annotations

import json
import shlex
from datetime import datetime
from typing import Any

from agentloop.shared.base.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from agentloop.shared.base.text import clip
from agentloop.shared.definition.approvals import PendingAction, PendingApproval
from agentloop.shared.runs.events import (
    AgentEvent,
    ApprovalRequested,
    ApprovalResolved,
    MessageCompleted,
    MessageReset,
    RunCancelled,
    RunCompleted,
    RunFailed,
    SubAgentInvocationCompleted,
    SubAgentInvocationStarted,
    ToolExecutionCompleted,
)


def short(text: str, limit: int = 200) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    text = " ".join(text.split())
    return clip(text, limit)


def args_json(arguments: dict[str, Any], limit: int = 160) -> str:
    """A call's arguments as short JSON."""
    return short(json.dumps(arguments, ensure_ascii=False), limit)


def when(moment: datetime | None) -> str:
    """A moment in local time, to the second."""
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S") if moment else "-"


def approve_commands(run_id: str, call_id: str) -> list[str]:
    """The commands that decide a pending approval: approve, deny, skip."""
    base = f"agentloop approve {shlex.quote(run_id)} {shlex.quote(call_id)}"
    return [base, f"{base} --deny --reason '...'", f"{base} --skip --result '...'"]


def submit_command(run_id: str, actions: list[PendingAction]) -> str:
    """One command that answers every pending action (they are answered together)."""
    first, *rest = actions
    command = f"agentloop submit {shlex.quote(run_id)} {shlex.quote(first.call_id)} OUTPUT"
    for action in rest:
        command += f" --output {shlex.quote(action.call_id)} OUTPUT"
    return command


def describe_message(message: Message, step: int) -> list[str]:
    """Lines that show a finished assistant message (``step`` is 1-based)."""
    lines: list[str] = []
    for part in message.content:
        # The final answer (no tool calls) is printed whole at the end, not here.
        if isinstance(part, TextPart) and message.role == "assistant" and part.text and message.tool_calls:
            lines.append(f"[step {step}] assistant: {short(part.text)}")
        elif isinstance(part, ThinkingPart):
            lines.append(f"[step {step}] thinking: {short(part.text)}")
        elif isinstance(part, ToolCallPart):
            lines.append(f"[step {step}] tool call {part.name} {args_json(part.arguments)}")
        elif isinstance(part, ToolResultPart):
            lines.append(describe_result(part, step))
    return lines


def describe_result(result: ToolResultPart, step: int) -> str:
    """The line that shows a tool's result."""
    status = "error" if result.is_error else "ok"
    return f"[step {step}] tool result {result.name} ({status}): {short(result.content, 160)}"


def describe_approval(run_id: str, approval: PendingApproval) -> list[str]:
    """Lines that announce a call waiting for a decision, with the commands that decide it."""
    approve, deny, _skip = approve_commands(run_id, approval.call_id)
    lines = [(f"[step {approval.step}] approval needed: {approval.tool_name} "
              f"{args_json(approval.arguments)} (call {approval.call_id})")]
    if approval.reason:
        lines.append(f"  why: {approval.reason}")
    if approval.expires_at:
        lines.append(f"  denied automatically at {when(approval.expires_at)} without a decision")
    lines += [f"  approve: {approve}", f"  deny:    {deny}"]
    return lines


def describe_actions(run_id: str, actions: list[PendingAction]) -> list[str]:
    """Lines that announce calls waiting for the client's outputs."""
    lines = [f"[step {a.step}] waiting for client output: {a.tool_name} {args_json(a.arguments)} "
             f"(call {a.call_id}, {a.reason})" for a in actions]
    lines.append(f"  submit: {submit_command(run_id, actions)}   (OUTPUT '-' reads stdin)")
    return lines


def describe_guardrail(event: Any) -> str:
    """One line for an ``agent.guardrail.triggered`` event."""
    verdict = "tripped" if event.tripwire else "did not pass"
    return f"guardrail {event.name} ({event.stage}) {verdict} [{event.severity}]: {event.reason or 'no reason given'}"


def describe_compaction(event: Any) -> str:
    """What an ``agent.context.compacted`` event did to the conversation."""
    what = "pruned old tool outputs" if event.kind == "prune" else "summarised older messages"
    why = "" if event.trigger == "threshold" else ", after the provider refused the request as too long"
    return (f"context compacted: {what} ({event.messages_affected}), about {event.tokens_before} → "
            f"{event.tokens_after} input tokens{why}")


def describe_retry(event: MessageReset, reason: str | None) -> str:
    """The line about an LLM attempt that failed and is retried, with why when known."""
    why = f" ({short(reason, 200)})" if reason else ""
    return f"the LLM call failed{why}; retrying (attempt {event.attempt})"


#: How an approval's decision reads, by ``ApprovalResolved.decision``.
DECISION_WORDS = {
    "approve": "approved", "deny": "denied", "skip": "skipped",
    "timeout": "denied (no decision in time)", "stopped": "not run (the run was stopped)",
}


def describe_sub_agent(event: SubAgentInvocationStarted | SubAgentInvocationCompleted) -> str:
    """A delegation's start or end, naming the sub-agent's run (``agentloop watch RUN`` follows it)."""
    if isinstance(event, SubAgentInvocationStarted):
        forked = ", with a copy of the conversation" if event.history == "fork" else ""
        return f"⇢ {event.name} started (run {event.child_run_id}{forked}): {short(event.task, 160)}"
    tokens = f"{event.usage.total_tokens:,} tokens"
    if event.status in ("completed", "stopped"):
        return f"⇠ {event.name} {event.status} ({tokens}): {short(event.final_text, 160)}"
    return f"⇠ {event.name} {event.status} ({event.reason}, {tokens}): {short(event.error or '', 160)}"


def describe_child_event(event: AgentEvent, label: str) -> list[str]:
    """A sub-agent's event in its parent's view (``watch --tree``): what it
    said, its tool calls and results, its approvals and its end, each line
    prefixed with ``[label]``; nothing for the rest (deltas, status...)."""
    step = event.step + 1
    if isinstance(event, MessageCompleted):
        lines = describe_message(event.message, step)
    elif isinstance(event, ToolExecutionCompleted):
        lines = [describe_result(event.result, step)]
    elif isinstance(event, ApprovalRequested):
        lines = describe_approval(event.run_id, event.approval)
    elif isinstance(event, ApprovalResolved):
        lines = [f"[step {step}] {describe_decision(event)}"]
    elif isinstance(event, (SubAgentInvocationStarted, SubAgentInvocationCompleted)):
        lines = [f"[step {step}] {describe_sub_agent(event)}"]
    elif isinstance(event, RunFailed):
        lines = [f"run {event.run_id} failed ({event.reason}): {short(event.error)}"]
    elif isinstance(event, RunCancelled):
        lines = [f"run {event.run_id} was cancelled"]
    elif isinstance(event, RunCompleted):
        said = f": {short(event.final_text)}" if event.final_text else ""
        lines = [f"run {event.run_id} {event.status} ({event.usage.total_tokens:,} tokens){said}"]
    else:
        lines = []
    return [f"  [{label}] {line}" for text in lines for line in text.splitlines()]


def describe_decision(event: ApprovalResolved) -> str:
    """What became of a call that waited for a decision."""
    line = f"{event.call_id} {DECISION_WORDS.get(event.decision, event.decision)}"
    if event.by:
        line += f" by {event.by}"
    return line + (f": {event.reason}" if event.reason else "")


# Renderers ---------------------------------------------------------------------------
