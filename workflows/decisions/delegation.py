"""Sub-agents: the pure decisions (docs/sub-agents.md).

What the model sees of a sub-agent (one tool per sub-agent, named after it,
taking ``{"task": ...}``), the id, input and budget of the child run a call
starts, and the tool result its outcome becomes. The workflow side, which
starts and waits for the child workflows, is
:mod:`~agentloop.workflows.effects.sub_agents`.

No I/O, clocks or randomness: this code runs inside workflow replay, and the
tests call it without a server (``tests/unit/workflows/test_delegation.py``).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from agentloop.shared.base.contracts import MAX_INPUT_BYTES
from agentloop.shared.base.messages import Message, ToolCallPart, ToolResultPart
from agentloop.shared.base.usage import Usage
from agentloop.shared.definition.activity_io import ToolDefinition
from agentloop.shared.definition.pricing import Budget
from agentloop.shared.definition.spec import AgentSpec, SubAgent
from agentloop.shared.runs.report import RunReason, RunStatus
from agentloop.shared.runs.run import AgentRunInput

#: Longest call id a child run id carries (provider ids are far shorter).
MAX_CALL_ID_IN_RUN_ID = 128

#: The schema of every sub-agent's tool.
TASK_PARAMETERS = {
    "type": "object",
    "properties": {
        "task": {
            "type": "string",
            "description": "What the sub-agent should do, with everything it needs to know to do it.",
        }
    },
    "required": ["task"],
}


def sub_agent_tools(spec: AgentSpec) -> list[ToolDefinition]:
    """One tool per sub-agent, named after it. ``read_only``: delegating
    changes nothing by itself (the sub-agent's own tools are gated in its
    own run), so the default permission lets it run; a rule may still ask."""
    return [
        ToolDefinition(name=name, description=sub.description or f"Delegate a task to the {name} sub-agent.",
                       parameters=TASK_PARAMETERS, read_only=True)
        for name, sub in spec.sub_agents.items()
    ]


def child_run_id(parent_run_id: str, call_id: str) -> str:
    """The child run's id: the same for a retried or replayed call, so a call
    never starts a second child."""
    return f"{parent_run_id}-sub-{call_id[:MAX_CALL_ID_IN_RUN_ID]}"


@dataclass(frozen=True)
class Task:
    """The task the model gave the sub-agent."""

    text: str


@dataclass(frozen=True)
class BadTask:
    """The call's arguments hold no task: the model sees ``message``."""

    message: str


def task_of(call: ToolCallPart) -> Task | BadTask:
    """The ``task`` argument of a delegation call."""
    task = call.arguments.get("task") if call.arguments_error is None else None
    if isinstance(task, str) and task.strip():
        return Task(task)
    return BadTask(
        f"The call to sub-agent '{call.name}' needs one argument, task: a non-empty string saying what it "
        f"should do. Received: {sorted(call.arguments) or 'no arguments'}. Call it again with "
        '{"task": "..."}.'
    )


def child_messages(sub: SubAgent, conversation: list[Message], task: str) -> list[Message]:
    """The child run's input: the task, after a copy of the conversation up
    to the message that delegated when ``sub.history`` is ``fork``. The
    delegating message is left out: its tool calls have no results yet,
    which providers refuse."""
    if sub.history != "fork":
        return [Message.user(task)]
    before = list(conversation)
    if before and before[-1].role == "assistant" and before[-1].tool_calls:
        before.pop()
    return [*before, Message.user(task)]


def child_workspace(parent: str | None, child: str | None) -> str | None:
    """The workspace a sub-agent's run gets: its own when it lies inside its
    parent's (or the parent names none: the worker checks it), else the
    parent's when it names none.

    Lexical: both are compared as written, normalised (``..`` resolved).

    Raises:
        ValueError: The sub-agent's workspace is not inside its parent's, or
            one is relative and the other absolute.
    """
    if parent is None or child is None:
        return child if parent is None else parent
    mine, theirs = posixpath.normpath(child), posixpath.normpath(parent)
    if posixpath.isabs(mine) != posixpath.isabs(theirs):
        raise ValueError(f"its workspace {child} and its parent's {parent} are not both absolute paths, so "
                         "agentloop cannot tell whether one lies inside the other; name both as absolute paths")
    if theirs == ".":
        inside = mine != ".." and not mine.startswith("../")
    else:
        inside = mine == theirs or mine.startswith(theirs.rstrip("/") + "/")
    if not inside:
        raise ValueError(f"its workspace {child} is not inside its parent's workspace {parent}; a sub-agent "
                         "works in its parent's workspace or in a directory inside it")
    return child


def input_problem(name: str, child: AgentRunInput, limit: int = MAX_INPUT_BYTES) -> str | None:
    """Why the child run cannot start with this input, or None: Temporal
    refuses payloads over 2 MB, and a forked conversation can pass that."""
    size = len(child.model_dump_json())
    if size <= limit:
        return None
    fork = " (a forked copy of the conversation)" if len(child.messages) > 1 else ""
    return (
        f"The sub-agent '{name}' cannot start: its input{fork} is {size / 1e6:.1f} MB, over the "
        f"{limit / 1e6:.1f} MB a run starts with. Give it a shorter task, or declare it with history \"none\"."
    )


def child_budget(parent: AgentSpec, usage: Usage, cost_usd: float | None, child: AgentSpec) -> Budget:
    """The child's budget: its own limits, each cut to what remains of the
    parent's (one budget for the whole tree), with the parent's prices for
    models the child's table does not price.

    Args:
        parent: The delegating agent.
        usage: The parent's usage so far, its sub-agents' included.
        cost_usd: The parent's cost so far, sub-agents included (None: unknown).
        child: The sub-agent.
    """
    limits, own = parent.budget, child.budget

    def cut(parent_limit, used, child_limit, floor):
        if parent_limit is None:
            return child_limit
        remaining = max(parent_limit - used, floor)
        return remaining if child_limit is None else min(child_limit, remaining)

    return Budget(
        cost_limit_usd=cut(limits.cost_limit_usd, cost_usd or 0.0, own.cost_limit_usd, 1e-9),
        max_input_tokens=cut(limits.max_input_tokens, usage.input_tokens, own.max_input_tokens, 1),
        max_output_tokens=cut(limits.max_output_tokens, usage.output_tokens, own.max_output_tokens, 1),
        max_total_tokens=cut(limits.max_total_tokens, usage.total_tokens, own.max_total_tokens, 1),
        prices={**limits.prices, **own.prices},
    )


@dataclass(frozen=True)
class ChildCompleted:
    """The child run completed or was stopped; ``final_text`` is its answer."""

    status: RunStatus
    final_text: str
    note: str | None = None


@dataclass(frozen=True)
class ChildFailed:
    """The child run failed, was cancelled, terminated or timed out."""

    status: RunStatus
    reason: RunReason
    message: str


ChildOutcome = ChildCompleted | ChildFailed


def delegation_result(call: ToolCallPart, run_id: str, outcome: ChildOutcome) -> ToolResultPart:
    """What the delegating model sees. A failed child is an error result it
    can work with (never a failed step: it does not count toward
    ``max_consecutive_failed_tool_steps``)."""
    if isinstance(outcome, ChildCompleted):
        text = outcome.final_text or f"(the sub-agent '{call.name}' finished without an answer)"
        if outcome.status == "stopped":
            text += f"\n[the sub-agent '{call.name}' was stopped before it finished: {outcome.note or 'stopped'}]"
        return ToolResultPart(id=call.id, name=call.name, content=text)
    return ToolResultPart(
        id=call.id, name=call.name, is_error=True,
        content=f"The sub-agent '{call.name}' (run {run_id}) did not finish: {outcome.reason}: {outcome.message}",
    )


def waiting_on(running: dict[str, tuple[str, str]]) -> str:
    """The run's current details while sub-agents run: ``waiting on
    researcher (run ...)``, from ``{call id: (name, run id)}``."""
    return "waiting on " + ", ".join(f"{name} (run {run_id})" for name, run_id in running.values())
