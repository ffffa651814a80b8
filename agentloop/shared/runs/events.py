"""The run's event stream, typed.

Every event has ``type`` (the discriminator), ``run_id``, ``step``, ``time``
and ``seq``. The workflow publishes the durable events (run, step, message,
tool call, approval, status, terminal) with ``time`` from ``workflow.now()``;
the LLM activity publishes the streaming ones (``thread.message.delta``,
``thread.message.reset`` and ``thread.run.step.tool_call.created``) in
batches while the provider streams. Both travel through Temporal Workflow
Streams, so a subscriber reads from any offset and resumes without loss;
``seq`` is that offset (filled in by :meth:`AgentClient.events`).

Seed 004's stream events map onto these: ``step_start`` →
``agent.run.step.created``, ``text``/``thinking`` → ``thread.message.delta``,
``tool_call_start`` → ``thread.run.step.tool_call.created``,
``tool_call_end`` → ``thread.run.step.tool_call.completed_by_llm``,
``step_end`` → ``thread.message.completed``, ``done`` → the terminal event.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter

from agentloop.shared.base import contracts
from agentloop.shared.base.messages import Message, ToolCallPart, ToolResultPart
from agentloop.shared.base.usage import Usage
from agentloop.shared.definition.activity_io import FinishReason, StreamDelta
from agentloop.shared.definition.approvals import PendingAction, PendingApproval
from agentloop.shared.definition.fingerprint import DefinitionChange
from agentloop.shared.runs.report import RunReason

#: The Workflow Streams topic every run event is published on.
EVENTS_TOPIC = contracts.EVENTS_TOPIC


class _Event(BaseModel):
    """Fields every event has.

    Attributes:
        run_id: The run (workflow id).
        step: Zero-based step the event belongs to.
        time: When it happened (workflow time for workflow events, the
            worker's clock for deltas).
        seq: Position in the run's stream (its offset); resume after an
            event with ``from_offset=seq + 1``. Set by the subscriber.
    """

    run_id: str
    step: int = 0
    time: datetime
    seq: int | None = None


class RunCreated(_Event):
    """``agent.run.created``: the run started."""

    type: Literal["agent.run.created"] = "agent.run.created"
    agent_name: str
    model: str
    input: list[Message] = Field(default_factory=list)
    agent_version: str = ""
    definition_change: DefinitionChange | None = None


class RunStatusChanged(_Event):
    """``agent.run.status.changed``: e.g. to ``awaiting_approval`` and back."""

    type: Literal["agent.run.status.changed"] = "agent.run.status.changed"
    status: str
    previous: str | None = None


class StepCreated(_Event):
    """``agent.run.step.created``: an LLM step begins."""

    type: Literal["agent.run.step.created"] = "agent.run.step.created"


class MessageCreated(_Event):
    """``thread.message.created``: the assistant message of a step begins;
    deltas with the same ``message_id`` follow."""

    type: Literal["thread.message.created"] = "thread.message.created"
    message_id: str
    role: Literal["assistant"] = "assistant"


class MessageDelta(_Event):
    """``thread.message.delta``: streamed text, thinking or tool-call
    arguments. ``attempt`` is the LLM attempt that produced it."""

    type: Literal["thread.message.delta"] = "thread.message.delta"
    message_id: str
    attempt: int = 1
    delta: StreamDelta


class MessageReset(_Event):
    """``thread.message.reset``: an LLM attempt failed mid-stream and
    Temporal retries it; drop what ``message_id`` streamed so far (deltas of
    earlier attempts), then the new attempt's deltas follow."""

    type: Literal["thread.message.reset"] = "thread.message.reset"
    message_id: str
    attempt: int
    #: Why the attempt before failed, as agentloop mapped the provider's
    #: error (e.g. ``OpenAI server error (503): ...``); None when unknown.
    reason: str | None = None


class MessageCompleted(_Event):
    """``thread.message.completed``: the whole assistant message."""

    type: Literal["thread.message.completed"] = "thread.message.completed"
    message_id: str
    message: Message
    usage: Usage = Field(default_factory=Usage)
    finish_reason: FinishReason | None = None
    #: Set when the step's LLM call waited in its provider lane at least
    #: ``LANE_WAIT_NOTICE_MS``: the lane and how long (its rate limit, its backlog).
    lane: str | None = None
    lane_wait_ms: float | None = None


class ToolCallCreated(_Event):
    """``thread.run.step.tool_call.created``: the model began a tool call
    (streamed; arguments follow as deltas)."""

    type: Literal["thread.run.step.tool_call.created"] = "thread.run.step.tool_call.created"
    message_id: str
    attempt: int = 1
    call_id: str
    name: str


class ToolCallCompletedByLLM(_Event):
    """``thread.run.step.tool_call.completed_by_llm``: a tool call with its
    final arguments."""

    type: Literal["thread.run.step.tool_call.completed_by_llm"] = "thread.run.step.tool_call.completed_by_llm"
    call: ToolCallPart


class ToolExecutionStarted(_Event):
    """``agent.tool.execution.started``: a call is being run, or answered by
    policy, operator or client, now (after any wait for approval or output)."""

    type: Literal["agent.tool.execution.started"] = "agent.tool.execution.started"
    call: ToolCallPart


class ToolExecutionCompleted(_Event):
    """``agent.tool.execution.completed``: the result the model will see.

    Attributes:
        ran: The tool actually ran in the worker.
        latency_ms: From start to result.
    """

    type: Literal["agent.tool.execution.completed"] = "agent.tool.execution.completed"
    result: ToolResultPart
    ran: bool = True
    latency_ms: float = 0.0


class ApprovalRequested(_Event):
    """``agent.tool.approval.requested``: a call waits for an operator."""

    type: Literal["agent.tool.approval.requested"] = "agent.tool.approval.requested"
    approval: PendingApproval


class ApprovalResolved(_Event):
    """``agent.tool.approval.resolved``: the operator decided (or the wait
    timed out, or the run was stopped)."""

    type: Literal["agent.tool.approval.resolved"] = "agent.tool.approval.resolved"
    call_id: str
    decision: str
    by: str | None = None
    reason: str | None = None
    #: How long the call waited for the decision (None in runs started before it was recorded).
    waited_ms: float | None = None


class RequiresAction(_Event):
    """``thread.run.requires_action``: calls the client must run and answer
    with ``submit_tool_outputs``."""

    type: Literal["thread.run.requires_action"] = "thread.run.requires_action"
    actions: list[PendingAction]


class ContextManaged(_Event):
    """``agent.context.compacted``: the conversation was made smaller to fit
    the context window: old tool outputs pruned, or older history replaced
    by a summary.

    Attributes:
        kind: ``prune`` or ``summary``.
        tokens_before: Estimated input tokens before.
        tokens_after: Estimated input tokens after.
        messages_affected: Tool results pruned, or messages summarised.
        trigger: ``threshold`` (the estimate passed the policy's threshold)
            or ``context_length_error`` (the provider refused the request).
    """

    type: Literal["agent.context.compacted"] = "agent.context.compacted"
    kind: Literal["prune", "summary"]
    tokens_before: int
    tokens_after: int
    messages_affected: int
    trigger: Literal["threshold", "context_length_error"] = "threshold"


class RunContinued(_Event):
    """``agent.run.continued``: the run continues as a new Temporal run
    (history kept short); the run id, the stream and its offsets go on."""

    type: Literal["agent.run.continued"] = "agent.run.continued"
    runs: int


class SubAgentInvocationStarted(_Event):
    """``agent.sub_agent.invocation.started``: the run delegated a task to a
    sub-agent, whose run (a child workflow) has started.

    Attributes:
        call_id: The tool call that delegated.
        name: The sub-agent's name.
        child_run_id: The sub-agent's run id: follow it with
            ``AgentClient.get_handle(child_run_id)`` or ``agentloop watch``.
        task: The task it was given.
        history: ``none`` or ``fork`` (it got a copy of the conversation).
    """

    type: Literal["agent.sub_agent.invocation.started"] = "agent.sub_agent.invocation.started"
    call_id: str
    name: str
    child_run_id: str
    task: str = ""
    history: Literal["none", "fork"] = "none"


class SubAgentInvocationCompleted(_Event):
    """``agent.sub_agent.invocation.completed``: the sub-agent's run ended;
    ``final_text`` (or ``error``) is what the delegating model sees.

    Attributes:
        call_id: The tool call that delegated.
        name: The sub-agent's name.
        child_run_id: The sub-agent's run id.
        status: How it ended (``completed``, ``failed``, ``stopped``, ``cancelled``).
        reason: Why.
        final_text: Its last answer.
        error: What went wrong, when it did not complete.
        usage: Its usage, its own sub-agents' included.
        cost_usd: Its cost, when its model's price is known.
    """

    type: Literal["agent.sub_agent.invocation.completed"] = "agent.sub_agent.invocation.completed"
    call_id: str
    name: str
    child_run_id: str
    status: str
    reason: RunReason | None = None
    final_text: str = ""
    error: str | None = None
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float | None = None


class GuardrailTriggered(_Event):
    """``agent.guardrail.triggered``: a guardrail did not pass. With
    ``tripwire`` the run ends (reason ``guardrail``); without, it goes on.

    Attributes:
        name: The guardrail.
        stage: ``input`` or ``output``.
        tripwire: It ends the run.
        reason: Why.
        severity: ``info``, ``low``, ``medium``, ``high`` or ``critical``.
    """

    type: Literal["agent.guardrail.triggered"] = "agent.guardrail.triggered"
    name: str
    stage: Literal["input", "output"]
    tripwire: bool = False
    reason: str = ""
    severity: str = "info"


class ToolRemoved(_Event):
    """``agent.run.tool_removed``: a run restored or forked from a snapshot
    goes on without a tool the snapshot had (this worker does not have it)."""

    type: Literal["agent.run.tool_removed"] = "agent.run.tool_removed"
    tool: str
    message: str = ""


class ToolAdded(_Event):
    """``agent.run.tool_added``: a run restored or forked from a snapshot
    offers a tool the snapshot did not have."""

    type: Literal["agent.run.tool_added"] = "agent.run.tool_added"
    tool: str
    message: str = ""


class ThreadMessageReceived(_Event):
    """``agent.thread.message.received``: a thread took a message; turn
    ``turn`` answers it, by ``strategy`` (docs/conversations.md)."""

    type: Literal["agent.thread.message.received"] = "agent.thread.message.received"
    turn: int
    strategy: str
    text: str = ""
    by: str | None = None


class TurnStarted(_Event):
    """``agent.turn.started``: a thread's turn begins (its user message is in)."""

    type: Literal["agent.turn.started"] = "agent.turn.started"
    turn: int


class TurnInterrupted(_Event):
    """``agent.turn.interrupted``: turn ``turn`` was cut short by the message
    of turn ``by_turn``; ``partial_text`` is what its step had streamed."""

    type: Literal["agent.turn.interrupted"] = "agent.turn.interrupted"
    turn: int
    by_turn: int
    partial_text: str = ""


class TurnRolledBack(_Event):
    """``agent.turn.rolled_back``: turn ``turn`` was discarded (``discarded``
    messages, its user message included) for the message of turn ``by_turn``."""

    type: Literal["agent.turn.rolled_back"] = "agent.turn.rolled_back"
    turn: int
    by_turn: int
    discarded: int = 0


class TurnEnded(_Event):
    """``agent.turn.ended``: a thread's turn is over; the thread waits for
    the next message (its run goes on: this is not a terminal event)."""

    type: Literal["agent.turn.ended"] = "agent.turn.ended"
    turn: int
    status: str
    reason: RunReason | None = None
    final_text: str = ""
    output: Any = None
    error: str | None = None
    usage: Usage = Field(default_factory=Usage)


class RunSteered(_Event):
    """``agent.run.steered``: steering messages joined the conversation
    before this step."""

    type: Literal["agent.run.steered"] = "agent.run.steered"
    texts: list[str] = Field(default_factory=list)
    turn: int = 0


class QuotaWaiting(_Event):
    """``agent.run.quota.waiting``: the run's tenant has spent its quota for
    the window; the run waits (status ``waiting_for_quota``) until ``until``,
    when the window turns, then asks again."""

    type: Literal["agent.run.quota.waiting"] = "agent.run.quota.waiting"
    tenant: str
    until: datetime
    message: str = ""


class RunCompleted(_Event):
    """``thread.run.completed``: the run ended ``completed`` or ``stopped``
    (then ``note`` says why, e.g. ``stopped: <the stop request's reason>``)."""

    type: Literal["thread.run.completed"] = "thread.run.completed"
    status: Literal["completed", "stopped"] = "completed"
    reason: RunReason = "done"
    final_text: str = ""
    output: Any = None
    usage: Usage = Field(default_factory=Usage)
    note: str | None = None


class RunFailed(_Event):
    """``thread.run.failed``: the run ended ``failed``."""

    type: Literal["thread.run.failed"] = "thread.run.failed"
    reason: RunReason
    error: str
    usage: Usage = Field(default_factory=Usage)


class RunCancelled(_Event):
    """``thread.run.cancelled``: the run was cancelled."""

    type: Literal["thread.run.cancelled"] = "thread.run.cancelled"
    usage: Usage = Field(default_factory=Usage)


AgentEvent = Annotated[
    (
        RunCreated | RunStatusChanged | StepCreated | MessageCreated | MessageDelta | MessageReset
        | MessageCompleted | ToolCallCreated | ToolCallCompletedByLLM | ToolExecutionStarted
        | ToolExecutionCompleted | ApprovalRequested | ApprovalResolved | RequiresAction
        | ContextManaged | RunContinued | SubAgentInvocationStarted | SubAgentInvocationCompleted
        | GuardrailTriggered | ThreadMessageReceived | TurnStarted | TurnInterrupted | TurnRolledBack
        | TurnEnded | RunSteered | ToolRemoved | ToolAdded | QuotaWaiting | RunCompleted | RunFailed | RunCancelled
    ),
    Field(discriminator="type"),
]

#: Validates any event from JSON or a dict.
EVENT_ADAPTER: TypeAdapter[Any] = TypeAdapter(AgentEvent)

#: Event types that end a run's stream; exactly one ends every stream.
TERMINAL_EVENT_TYPES = frozenset({"thread.run.completed", "thread.run.failed", "thread.run.cancelled"})


def message_id(run_id: str, step: int) -> str:
    """The id of step ``step``'s assistant message."""
    return f"{run_id}:msg:{step}"


def is_terminal(event: Any) -> bool:
    """Whether ``event`` ends its run's stream."""
    return getattr(event, "type", None) in TERMINAL_EVENT_TYPES
