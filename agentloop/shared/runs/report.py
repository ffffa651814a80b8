"""The run report (AgentRunReport, StepReport, ToolCallReport)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from agentloop.shared.base.text import cut
from agentloop.shared.base.usage import Usage
from agentloop.shared.definition.fingerprint import DefinitionChange

#: The longest text a tool call's report keeps of each string argument and of
#: the error: the whole of it is in the conversation and the events, and the
#: report travels in every hand-over and in the run's result.
REPORT_TEXT_LIMIT = 2_000


class ToolCallReport(BaseModel):
    """How one tool call went.

    Attributes:
        call_id: The tool call's id.
        tool_name: The tool called.
        arguments: The arguments the model passed, each string longer than
            ``REPORT_TEXT_LIMIT`` characters cut (the cut shown in it).
        arguments_cut: Some string argument was cut.
        result_size_bytes: UTF-8 size of the result the model saw.
        latency_ms: Time from scheduling the call to its result.
        skipped: The call did not run (e.g. unknown tool).
        error: The error the model saw (cut to ``REPORT_TEXT_LIMIT``
            characters), or None on success.
        truncated: The output was cut to ``tool_output_limit``.
        metrics: Tool-reported metrics (strings cut like the arguments').
        permission: The policy's verdict: ``allow``, ``ask`` or ``deny``.
        decision: The operator's decision when asked (``approve``,
            ``deny``, ``skip``, ``override``, ``timeout``), or ``client``
            when the client ran the call and submitted its output.
        decided_by: Who decided, when they said.
        waited_ms: Time spent waiting for the decision or the client's output.
        sub_run_id: The sub-agent run the call started, for a delegation.
        eval_answer: In an eval's case run (docs/evals.md): ``recorded``
            (answered from the recording, not run), ``live`` or ``refused``.
    """

    call_id: str
    tool_name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    arguments_cut: bool = False
    result_size_bytes: int = 0
    latency_ms: float = 0.0
    skipped: bool = False
    error: str | None = None
    truncated: bool = False
    metrics: dict[str, Any] = Field(default_factory=dict)
    permission: Literal["allow", "ask", "deny"] | None = None
    decision: Literal["approve", "deny", "skip", "override", "timeout", "client", "stopped"] | None = None
    decided_by: str | None = None
    waited_ms: float = 0.0
    sub_run_id: str | None = None
    eval_answer: Literal["recorded", "live", "refused"] | None = None


def report_text(text: str) -> str:
    """A text as the report keeps it: at most ``REPORT_TEXT_LIMIT``
    characters, the cut shown."""
    return cut(text, REPORT_TEXT_LIMIT)


def cut_strings(values: dict[str, Any], limit: int = REPORT_TEXT_LIMIT) -> tuple[dict[str, Any], bool]:
    """``values`` (a tool call's arguments or metrics) as its report keeps
    them: each string, at any depth, longer than ``limit`` characters cut,
    the cut shown. Returns them, and whether any was cut (``values`` itself
    when none was)."""
    was_cut = False

    def keep(value: Any) -> Any:
        nonlocal was_cut
        if isinstance(value, str) and len(value) > limit:
            was_cut = True
            return cut(value, limit)
        if isinstance(value, dict):
            return {k: keep(v) for k, v in value.items()}
        if isinstance(value, list):
            return [keep(v) for v in value]
        return value

    kept = keep(values)
    return (kept, True) if was_cut else (values, False)


class GuardrailReport(BaseModel):
    """A guardrail that did not pass (``agentloop.tools.guardrails``).

    Attributes:
        name: The guardrail.
        stage: ``input`` (before the step's LLM call) or ``output`` (after it).
        tripwire: It ended the run.
        reason: Why it did not pass.
        severity: ``info``, ``low``, ``medium``, ``high`` or ``critical``.
    """

    name: str
    stage: Literal["input", "output"]
    tripwire: bool = False
    reason: str = ""
    severity: str = "info"


class StepReport(BaseModel):
    """How one step (an LLM call and the tool calls it asked for) went.

    Attributes:
        index: Zero-based step number.
        type: ``initial`` for the first step, ``tool_followup`` after tool results.
        llm_latency_ms: Time of the LLM activity, retries included.
        usage: Tokens of this step's LLM call.
        finish_reason: Normalised finish reason (``stop``, ``tool_calls``,
            ``length``, ``content_filter``, ``other``).
        tool_calls: One report per tool call, in call order.
        tool_total_ms: Wall time of this step's tool phase, waits for
            decisions included.
        approval_wait_ms: The part of ``tool_total_ms`` the step waited for
            decisions or the client's outputs (see :func:`wait_within`).
        sub_agent_usage: Usage of the sub-agent runs this step delegated to
            (their own sub-agents included); the run's ``total_usage``
            includes it, ``usage`` does not.
        sub_agent_cost_usd: Their cost.
        guardrails: The guardrails that did not pass at this step.
        lane: The provider lane its LLM call went to (None: the run's own
            queue, as runs before lanes).
        lane_wait_ms: How long that call waited in its lane before a worker
            started it (the lane's rate limit, its backlog); part of
            ``llm_latency_ms``.
    """

    index: int
    type: Literal["initial", "tool_followup"]
    llm_latency_ms: float = 0.0
    usage: Usage = Field(default_factory=Usage)
    finish_reason: str = ""
    tool_calls: list[ToolCallReport] = Field(default_factory=list)
    tool_total_ms: float = 0.0
    approval_wait_ms: float = 0.0
    sub_agent_usage: Usage = Field(default_factory=Usage)
    sub_agent_cost_usd: float = 0.0
    guardrails: list[GuardrailReport] = Field(default_factory=list)
    lane: str | None = None
    lane_wait_ms: float = 0.0


def wait_within(step: StepReport, *, parallel: bool) -> float:
    """How much of a step's tool phase waited for decisions or client
    outputs: its calls' ``waited_ms``, summed when they ran one after
    another, the longest when they ran in parallel (their waits overlap);
    never more than the phase."""
    waits = [call.waited_ms for call in step.tool_calls]
    waited = max(waits, default=0.0) if parallel else sum(waits)
    return min(waited, step.tool_total_ms)


#: A run's status: ``running``, the two waits while it goes on and ``idle``
#: (a thread between turns), then how it ended.
RunStatus = Literal[
    "running",
    "idle",
    "awaiting_approval",
    "requires_action",
    "waiting_for_quota",
    "completed",
    "failed",
    "cancelled",
    "stopped",
]

#: The statuses of a run that goes on (every other status is how it ended).
LIVE_STATUSES: tuple[str, ...] = ("running", "idle", "awaiting_approval", "requires_action", "waiting_for_quota")

#: The statuses of a run with a step under way (``idle``: a thread waits between turns).
STEP_UNDER_WAY: tuple[str, ...] = ("running", "awaiting_approval", "requires_action", "waiting_for_quota")

RunReason = Literal[
    "done",
    "error",
    "max_steps",
    "max_tool_call_continuations",
    "length",
    "content_filter",
    "tool_error",
    "stopped",
    "cancelled",
    "guardrail",
    "cost_limit",
    "output_invalid",
    "quota_exceeded",
]


class SubRunReport(BaseModel):
    """A sub-agent run a run delegated to (``AgentSpec.sub_agents``).

    Attributes:
        name: The sub-agent's name (the tool the model called).
        run_id: The sub-agent's run id (its workflow id).
        call_id: The tool call that started it.
        step: The delegating step, zero-based.
        status: ``running``, then how it ended.
        reason: Why it ended.
        usage: Its usage, its own sub-agents' included.
        cost_usd: Its cost (None when its model's price is unknown).
        error: What went wrong, when it did not complete.
    """

    name: str
    run_id: str
    call_id: str
    step: int = 0
    status: RunStatus = "running"
    reason: RunReason | None = None
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float | None = None
    error: str | None = None


class RunWarning(BaseModel):
    """Something a run went on despite (``AgentRunResult.warnings``, the report).

    Attributes:
        type: ``tool_removed`` (a tool of the snapshot the run was restored
            or forked from is not on this worker: the run goes on without it)
            or ``tool_added`` (the run offers a tool the snapshot did not have).
        tool: The tool's name.
        message: The warning, in words.
    """

    type: Literal["tool_removed", "tool_added"]
    tool: str
    message: str


class RunOriginReport(BaseModel):
    """Where a restored or forked run came from (``AgentRunReport.origin``).

    Attributes:
        kind: ``restored`` (from a snapshot, ``AgentClient.restore``) or
            ``forked`` (``AgentClient.fork``).
        from_run: The run the snapshot was taken of.
        at_step: A fork's step: the conversation is the original's up to the
            end of this step (1-based).
    """

    kind: Literal["restored", "forked"]
    from_run: str
    at_step: int | None = None


class AgentRunReport(BaseModel):
    """Everything about one run, available by query at any time.

    Attributes:
        id: The run id (workflow id).
        model: ``provider:model``.
        started_at: When the run started (workflow time).
        completed_at: When it ended, None while running.
        total_ms: Duration, up to now while running.
        reason: Why it ended, None while running.
        user_message: The text of the run's input (cut to
            ``REPORT_TEXT_LIMIT`` characters: the whole of it is the
            conversation's).
        final_text: The last assistant text (a typed run's: its answer as JSON).
        output: A typed run's answer (``AgentSpec.output``), as JSON; a
            thread's: its last turn's.
        error: What went wrong, when the run failed.
        steps: One report per step; in a long run, the newest (see
            ``earlier_steps``).
        earlier_steps: Steps taken before the oldest report in ``steps``: a
            hand-over (continue-as-new) carries the newest step reports
            within ``REPORT_STEPS_CARRY_BYTES`` (in
            ``agentloop/workflows/effects/handover.py``), so a run of thousands of
            steps keeps handing over. Counts and totals still include them.
        step_count: Steps taken (``earlier_steps`` included).
        tool_call_count: Tool calls made.
        total_usage: Usage summed over all steps.
        total_llm_time_ms: Time in LLM activities.
        total_tool_time_ms: Time the tools took: the tool phases' wall time
            less ``total_approval_wait_ms``.
        total_approval_wait_ms: Time tool calls waited for a decision
            (approval) or for the client's output, summed over steps.
        total_cost_usd: Cost of the run's usage at the model's price
            (``agentloop.shared.definition.pricing``); None when the price is unknown. With
            sub-agents, their cost is included, each at its model's price.
        sub_runs: The sub-agent runs this run delegated to, in start order
            (their usage is in ``total_usage``).
        origin: Set on a run restored from a snapshot or forked from a run.
        warnings: What the run went on despite (tools removed or added
            since the snapshot it was restored or forked from).
        agent_version: The fingerprint of the run's agent definition
            (``agentloop.shared.definition.fingerprint``; the ``AgentVersion`` search attribute).
        definition_change: A restored or forked run: how its definition
            differs from the snapshot's (``DefinitionChange.describe()``).
        total_lane_wait_ms: Time its LLM calls waited in their provider
            lanes (``StepReport.lane_wait_ms``), summed over steps.
        lane_waits: Steps whose LLM call waited in its lane at least
            ``LANE_WAIT_NOTICE_MS`` (agentloop.shared.definition.lanes).
    """

    id: str
    model: str
    started_at: datetime
    completed_at: datetime | None = None
    total_ms: float = 0.0
    reason: RunReason | None = None
    user_message: str = ""
    final_text: str = ""
    output: Any = None
    error: str | None = None
    steps: list[StepReport] = Field(default_factory=list)
    earlier_steps: int = 0
    step_count: int = 0
    tool_call_count: int = 0
    total_usage: Usage = Field(default_factory=Usage)
    total_llm_time_ms: float = 0.0
    total_tool_time_ms: float = 0.0
    total_approval_wait_ms: float = 0.0
    total_cost_usd: float | None = None
    sub_runs: list[SubRunReport] = Field(default_factory=list)
    origin: RunOriginReport | None = None
    warnings: list[RunWarning] = Field(default_factory=list)
    agent_version: str = ""
    definition_change: DefinitionChange | None = None
    total_lane_wait_ms: float = 0.0
    lane_waits: int = 0
