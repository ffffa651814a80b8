"""LoopState: everything a run knows, in one model.

Serialised, a LoopState is exactly what a run hands to its next Temporal run
when it continues as new (``AgentRunInput.carry``). Its field names are the
ones runs in flight already carry, so they keep resuming. The conversation
travels beside it, as the next run's ``messages``. Fields marked
``exclude=True`` belong to one Temporal run: the next one rebuilds them.

Deterministic, like all of ``agentloop.workflows``: no I/O, clocks or
randomness; the workflow passes in what it needs from Temporal.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator
from temporalio.contrib.workflow_streams import WorkflowStreamState

from agentloop.shared.base.messages import Message, ToolCallPart, ToolResultPart
from agentloop.shared.base.usage import Usage
from agentloop.shared.definition.approvals import (
    ApprovalDecision,
    PendingAction,
    PendingApproval,
    StopRequest,
    SubmitToolOutputs,
    ToolGate,
    ToolOutput,
)
from agentloop.shared.definition.context_window import TokenAnchor
from agentloop.shared.runs.quotas import RunQuota
from agentloop.shared.runs.report import AgentRunReport, RunReason, RunStatus, StepReport
from agentloop.shared.runs.threads import ThreadState
from agentloop.shared.runs.transcripts import EMPTY_HASH, chain_hash

#: Decided call ids a run remembers across continue-as-new (for "already
#: decided" answers), the most recent ones.
CARRIED_ANSWERED = 1000

#: How many notes on refused or cut signals the ``state`` query keeps.
REJECTED_SIGNALS_KEPT = 20


class PendingStep(BaseModel):
    """A step whose tool calls wait for people, carried across continue-as-new.

    Attributes:
        gates: The step's calls, in order, with what each waits for.
        report: The step's report so far.
    """

    gates: list[ToolGate]
    report: StepReport


class LoopState(BaseModel):
    """What a run knows (see the module docstring).

    Attributes:
        input_count: How many of the messages were the run's input.
        step: Steps finished.
        usage: Usage so far, every LLM call of the run included.
        report: The run report so far.
        stream: The event stream (recent events and offsets); set in a carry.
        continuations: LLM steps after tool results since the last limit.
        failed_tool_steps: Consecutive steps whose every call failed.
        stop: A stop request not yet acted on.
        answered: Call ids decided or answered, oldest first.
        decisions: Decisions that arrived for calls still to be resolved.
        outputs: Client outputs that arrived for calls still to be resolved.
        announced: The last status published on the event stream.
        anchor: The provider's last input-token count, for estimates.
        verified: The verification question was asked.
        pending_step: A step waiting for people, resumed by the next run.
        runs: How many times the run has continued as new.
        rejected_signals: Why recent signals were refused or cut, newest last.
        sub_usage: The part of ``usage`` the run's sub-agents used.
        sub_cost_usd: What they cost (None once one's price is unknown).
        step_ends: Step (1-based) -> how many messages the conversation had
            at its end: where a fork at that step cuts (steps before the last
            compaction are left out: their messages were rewritten).
        thread: A thread's turns: the one under way, the messages waiting,
            recent results (None: the run is not a thread).
        steering: Steering messages waiting for the next LLM step.
        quota: The run's reservation from its tenant's quota (None: the
            run has no tenant, or has not asked yet).
        quota_wait: Until when the run waits for its tenant's quota.
        output_tries: Typed answers that did not match ``AgentSpec.output``
            (this run, or this turn of a thread).
        messages: The conversation (carried as the next run's ``messages``).
        status: The run's status now.
        reason: Why it ended, once it has.
        error: What went wrong, or why it stopped.
        approvals: Calls waiting for an operator's decision.
        actions: Calls waiting for the client's outputs.
        running_calls: Tool calls executing now.
        steps_this_run: Steps taken in this Temporal run.
        running_subs: Sub-agent runs under way, ``{call id: (name, run id)}``.
        under_way: The step whose tool calls are being run or wait for
            people (what an export carries so a restored run runs them).
    """

    model_config = ConfigDict(extra="ignore")

    input_count: int
    step: int = 0
    usage: Usage = Field(default_factory=Usage)
    report: AgentRunReport
    stream: WorkflowStreamState | None = None
    continuations: int = 0
    failed_tool_steps: int = 0
    stop: StopRequest | None = None
    answered: list[str] = Field(default_factory=list)
    decisions: dict[str, ApprovalDecision] = Field(default_factory=dict)
    outputs: dict[str, ToolOutput] = Field(default_factory=dict)
    announced: str | None = None
    anchor: TokenAnchor | None = None
    verified: bool = False
    pending_step: PendingStep | None = None
    runs: int = 0
    rejected_signals: list[str] = Field(default_factory=list)
    sub_usage: Usage = Field(default_factory=Usage)
    sub_cost_usd: float | None = 0.0
    step_ends: dict[int, int] = Field(default_factory=dict)
    thread: ThreadState | None = None
    steering: list[str] = Field(default_factory=list)
    output_tries: int = 0
    quota: RunQuota | None = None
    quota_wait: datetime | None = Field(default=None, exclude=True)

    messages: list[Message] = Field(default_factory=list, exclude=True)
    status: RunStatus = Field(default="running", exclude=True)
    reason: RunReason | None = Field(default=None, exclude=True)
    error: str | None = Field(default=None, exclude=True)
    approvals: dict[str, PendingApproval] = Field(default_factory=dict, exclude=True)
    actions: dict[str, PendingAction] = Field(default_factory=dict, exclude=True)
    running_calls: dict[str, ToolCallPart] = Field(default_factory=dict, exclude=True)
    steps_this_run: int = Field(default=0, exclude=True)
    running_subs: dict[str, tuple[str, str]] = Field(default_factory=dict, exclude=True)
    under_way: PendingStep | None = Field(default=None, exclude=True)

    _answered: set[str] = PrivateAttr(default_factory=set)
    _hashes: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="after")
    def _rebuild(self) -> LoopState:
        # A carried step that waits for people waits again, for the calls
        # whose decision or output has not arrived yet.
        self._answered = set(self.answered)
        if self.pending_step is not None:
            self.under_way = self.pending_step
            for gate in self.pending_step.gates:
                if gate.approval is not None and gate.call.id not in self.decisions:
                    self.approvals[gate.call.id] = gate.approval
                if gate.action is not None and gate.call.id not in self.outputs:
                    self.actions[gate.call.id] = gate.action
        return self

    # What people send ------------------------------------------------------------

    def was_answered(self, call_id: str) -> bool:
        """A decision or an output for ``call_id`` already arrived."""
        return call_id in self._answered

    def mark_answered(self, call_id: str) -> None:
        if call_id not in self._answered:
            self._answered.add(call_id)
            self.answered.append(call_id)

    def decide(self, decision: ApprovalDecision) -> None:
        """Take an operator's decision for a pending call."""
        self.decisions[decision.call_id] = decision
        self.approvals.pop(decision.call_id, None)
        self.mark_answered(decision.call_id)

    def take_outputs(self, submission: SubmitToolOutputs) -> None:
        """Take the client's outputs for pending calls."""
        for output in submission.tool_outputs:
            self.outputs[output.call_id] = output
            self.actions.pop(output.call_id, None)
            self.mark_answered(output.call_id)

    def still_pending(self) -> list[str]:
        """Ids of the calls still waiting for a decision or an output."""
        return [*self.approvals, *self.actions]

    def note(self, text: str) -> None:
        """Keep a note on a refused or cut signal for the ``state`` query."""
        self.rejected_signals = [*self.rejected_signals, text][-REJECTED_SIGNALS_KEPT:]

    def request_stop(self, request: StopRequest) -> None:
        """The first stop request wins."""
        if self.stop is None:
            self.stop = request

    # What the loop does -------------------------------------------------------------

    def add_usage(self, usage: Usage, attempts: int) -> Usage:
        """Count an LLM call's usage; every attempt Temporal made is a request."""
        if attempts > usage.requests:
            usage = usage.model_copy(update={"requests": attempts})
        self.usage = self.usage + usage
        self.report.total_usage = self.usage
        return usage

    def add_sub_usage(self, usage: Usage, cost_usd: float | None) -> None:
        """Count a sub-agent run's usage and cost (its own sub-agents' included)."""
        self.sub_usage = self.sub_usage + usage
        self.sub_cost_usd = None if cost_usd is None or self.sub_cost_usd is None else self.sub_cost_usd + cost_usd
        self.usage = self.usage + usage
        self.report.total_usage = self.usage

    def wait_for(self, gates: list[ToolGate]) -> None:
        """The step's calls that ask an operator or the client start waiting."""
        for gate in gates:
            if gate.approval is not None:
                self.approvals[gate.call.id] = gate.approval
            if gate.action is not None:
                self.actions[gate.call.id] = gate.action

    def ask_to_verify(self, prompt: str) -> None:
        """The verification question is the next user message: one more step."""
        self.verified = True
        self.messages.append(Message.user(prompt))
        self.advance()

    def retry_output(self, message: Message) -> None:
        """A typed answer that did not match: what was wrong joins the
        conversation (the results of the step's calls when it answered with
        ``final_result``) and the model tries again, in one more step."""
        self.output_tries += 1
        self.messages.append(message)
        if message.role == "tool":
            self.under_way = None
            self.end_step_here()
        self.advance()

    def finish_step(self, results: list[tuple[ToolResultPart, bool]], *, failed_steps: int) -> None:
        """The step's results join the conversation and the step is done."""
        self.messages.append(Message(role="tool", content=[r for r, _ in results]))
        self.failed_tool_steps = failed_steps
        self.under_way = None
        self.end_step_here()
        self.advance()

    def end_step_here(self) -> None:
        """The step under way ends with the conversation as it is now. Steps
        are numbered as the report counts them (one per LLM step: a thread's
        turns go on counting), from 1."""
        self.step_ends[self.report.step_count] = len(self.messages)

    def advance(self) -> None:
        self.step += 1
        self.steps_this_run += 1

    def end(self, status: RunStatus, reason: RunReason, error: str | None) -> None:
        self.status, self.reason, self.error = status, reason, error

    # The transcript ------------------------------------------------------------------

    def transcript_hashes(self) -> list[str]:
        """Chained hashes of the messages (:mod:`agentloop.shared.runs.transcripts`),
        extended for the messages appended since the last call."""
        hashes = self._hashes
        if len(hashes) > len(self.messages):
            del hashes[len(self.messages):]
        for message in self.messages[len(hashes):]:
            hashes.append(chain_hash(hashes[-1] if hashes else EMPTY_HASH, message))
        return hashes

    def replace_messages(self, messages: list[Message]) -> None:
        """Rewrite the conversation (pruning, compaction): hashes start over."""
        self.messages = messages
        self._hashes = []
        self.step_ends = {}

    # Continue-as-new -------------------------------------------------------------------

    def carried(self, pending: PendingStep | None, stream: WorkflowStreamState | None = None) -> LoopState:
        """What the next Temporal run gets: this state with the step that
        waits for people, the decisions and outputs that already arrived for
        it, and the most recent answered ids."""
        ids = {g.call.id for g in pending.gates} if pending else set()
        return self.model_copy(
            update={
                "answered": self.answered[-CARRIED_ANSWERED:],
                "decisions": {k: v for k, v in self.decisions.items() if k in ids},
                "outputs": {k: v for k, v in self.outputs.items() if k in ids},
                "pending_step": pending,
                "stream": stream,
            }
        )

    def resume(self, messages: list[Message]) -> None:
        """In the next Temporal run: the conversation comes back from the input."""
        self.messages = list(messages)
