"""A run's input, result and live state."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from agentloop.shared.base.contracts import MAX_INPUT_BYTES
from agentloop.shared.base.errors import RUN_FAILED_ERROR_TYPE, UserError, describe_validation_error
from agentloop.shared.base.messages import Message, ToolCallPart
from agentloop.shared.base.priority import checked_tenant
from agentloop.shared.base.usage import Usage
from agentloop.shared.definition.approvals import ApprovalDecision, PendingAction, PendingApproval, ToolOutput
from agentloop.shared.definition.fingerprint import AgentDefinition
from agentloop.shared.definition.output import OutputSpec, output_spec
from agentloop.shared.definition.spec import AgentSpec, depth_problem
from agentloop.shared.runs.eval_tools import EvalPlan
from agentloop.shared.runs.report import AgentRunReport, RunOriginReport, RunReason, RunStatus
from agentloop.shared.runs.result import AgentRunFailed, AgentRunResult, run_failed
from agentloop.shared.runs.state import LoopState, PendingStep
from agentloop.shared.runs.threads import ThreadOptions

#: Most bytes of messages a run's Temporal result carries (see
#: :attr:`AgentRunResult.messages`).
RESULT_MESSAGES_LIMIT = 64 * 1024

#: A run whose report is larger than this (bytes of JSON) leaves its steps out
#: of its Temporal result; the client fetches them (``report`` query).
RESULT_REPORT_LIMIT = 256 * 1024

#: Most characters of a run's ``error`` (it is in the result, the report and
#: a failed run's message); a longer one is cut with a note.
MAX_ERROR_CHARS = 20_000


#: What a run carries when it continues as new: its whole state (the name
#: runs in flight know it by; see :class:`agentloop.shared.runs.state.LoopState`).
RunCarry = LoopState


#: The smallest valid run input, as JSON: what a failed run's message shows
#: an operator who typed something else into ``temporal workflow start``.
RUN_INPUT_EXAMPLE = (
    '{"spec": {"model": "openai:gpt-4.1-mini"}, '
    '"messages": [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}]}'
)


class RunOrigin(BaseModel):
    """``AgentRunInput.origin``: a run that starts from a snapshot.

    Attributes:
        kind: ``restored`` (the run goes on where the snapshot was taken:
            its steps, usage, report and pending calls come along) or
            ``forked`` (a new run on the original's conversation up to the
            end of step ``at_step``; steps and usage start from zero).
        from_run: The run the snapshot was taken of.
        at_step: A fork's step.
        tools: The tools the snapshot's run offered: those this worker lacks
            are ``tool_removed`` warnings (not a failed start), new ones
            ``tool_added``.
        step: A restored run's steps finished.
        step_ends: A restored run's step boundaries.
        usage: A restored run's usage so far.
        report: A restored run's report so far.
        pending_step: A restored run's step under way: its calls without an
            answer wait (approvals, client actions) or run again.
        decisions: Decisions that had arrived for calls of ``pending_step``.
        outputs: Client outputs that had arrived for them.
        turn: A thread's turns so far (a thread restored or forked from a
            thread that waits for its next message starts waiting, at this turn).
        definition: The snapshot's agent definition
            (``agentloop.shared.definition.fingerprint``): the run says how its own differs.
    """

    model_config = ConfigDict(extra="forbid")

    kind: Literal["restored", "forked"]
    from_run: str
    at_step: int | None = None
    tools: list[str] | None = None
    step: int = 0
    step_ends: dict[int, int] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)
    report: AgentRunReport | None = None
    pending_step: PendingStep | None = None
    decisions: dict[str, ApprovalDecision] = Field(default_factory=dict)
    outputs: dict[str, ToolOutput] = Field(default_factory=dict)
    turn: int = 0
    definition: AgentDefinition | None = None

    def note(self) -> RunOriginReport:
        """What the run's report says about it."""
        return RunOriginReport(kind=self.kind, from_run=self.from_run, at_step=self.at_step)


class SubRunLink(BaseModel):
    """What a sub-agent's run knows of the run that delegated to it.

    Attributes:
        parent_run_id: The delegating run.
        root_run_id: The top run of the tree.
        name: The sub-agent's name in the parent's spec (its tool's name).
        call_id: The parent's tool call that started this run.
        depth: 1 for a sub-agent of a top run, 2 below that...
        max_depth: The top agent's ``max_depth``.
    """

    model_config = ConfigDict(extra="forbid")

    parent_run_id: str
    root_run_id: str
    name: str
    call_id: str
    depth: int = Field(ge=1)
    max_depth: int = Field(ge=1)


class AgentRunInput(BaseModel):
    """The input of :class:`AgentRunWorkflow`.

    Attributes:
        spec: The agent's configuration.
        messages: The turn's input, usually one user message. Earlier messages
            of a thread may come first.
        carry: Set only when a run continues as new: its state so far (then
            ``messages`` is the conversation so far).
        parent: Set only on a sub-agent's run: the run that delegated to it.
        thread: Set on a thread's run (docs/conversations.md): the run stays
            open after a turn and answers the messages sent to it.
        origin: Set only on a run restored from a snapshot or forked from a
            run (``AgentClient.restore``, ``AgentClient.fork``).
        eval: Set only on a case run of an eval (docs/evals.md): the
            recorded tool calls and approval decisions, and the tool policies.
        tenant: Whose run it is (docs/many-tenants.md): the workflow's
            Temporal fairness key, the ``AgentTenant`` search attribute;
            sub-agents and thread turns keep it. None: no tenant.
    """

    model_config = ConfigDict(extra="forbid")

    spec: AgentSpec
    messages: list[Message] = Field(min_length=1)
    carry: LoopState | None = None
    parent: SubRunLink | None = None
    thread: ThreadOptions | None = None
    origin: RunOrigin | None = None
    eval: EvalPlan | None = None
    tenant: str | None = None

    @field_validator("tenant", mode="before")
    @classmethod
    def _check_tenant(cls, value: Any) -> Any:
        return checked_tenant(value)

    @model_validator(mode="after")
    def _check_depth(self) -> AgentRunInput:
        link = self.parent
        problem = depth_problem(self.spec, depth=link.depth if link else 0,
                                max_depth=link.max_depth if link else None)
        if problem is not None:
            raise ValueError(problem)
        return self


def _what_it_is(value: Any) -> str:
    """What a decoded start argument is, in words, without quoting it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a JSON boolean"
    if isinstance(value, (int, float)):
        return "a JSON number"
    if isinstance(value, str):
        return f"a JSON string ({len(value):,} characters)"
    if isinstance(value, (list, tuple)):
        return f"a JSON array ({len(value):,} items)"
    if isinstance(value, (bytes, bytearray)):
        return f"a binary/plain payload of {len(value):,} bytes"
    return f"a {type(value).__name__}"


def parse_run_input(args: Sequence[Any]) -> AgentRunInput:
    """The run's input from the workflow's arguments as Temporal decoded them
    (the workflow takes them raw, so that no input can fail its task).

    Raises:
        ValueError: The arguments are not one ``AgentRunInput`` (or a JSON
            object that validates as one). The message says what was wrong and
            shows ``RUN_INPUT_EXAMPLE``; it never quotes the input itself.
    """
    if len(args) == 1 and isinstance(args[0], AgentRunInput):
        return args[0]
    if not args:
        problem = "the run was started without an input"
    elif len(args) > 1:
        problem = f"the run was started with {len(args)} inputs; it takes one"
    elif not isinstance(args[0], dict):
        problem = f"the run's input is {_what_it_is(args[0])}, not a JSON object"
    else:
        try:
            return AgentRunInput.model_validate(args[0])
        except ValidationError as exc:
            problem = describe_validation_error(exc)
    raise ValueError(
        f"invalid run input: {problem}. A run takes one JSON object with the agent's spec and the "
        f"input messages, e.g. {RUN_INPUT_EXAMPLE}"
    )


class RunState(BaseModel):
    """What a run is doing now (query ``state``).

    Attributes:
        run_id: The run id.
        status: Current status.
        step: Steps finished so far, which is the number of the last one
            finished (steps are numbered from 1: see docs/operating.md, "Step
            numbers").
        current_step: The number of the step under way (``step + 1``), or
            None when none is (the run has ended, or a thread waits).
        steps_taken: Steps taken: the finished ones and the one under way
            once its LLM call answered (a cancelled run's last step counts);
            the report's ``step_count``, and the steps the CLI counts.
        reason: Why it ended, once ended.
        error: Error message, when failed.
        running_tool_calls: Tool calls executing now.
        message_count: Messages in the conversation.
        usage: Usage so far.
        pending_approvals: Calls waiting for an operator's decision.
        pending_actions: Calls waiting for the client's outputs.
        stop_requested: A ``stop`` signal arrived; the run ends after this step.
        rejected_signals: Why recent signals were ignored (malformed payload,
            unknown or already decided call id), and which fields of a signal
            were cut to their limits (``approve signal: reason cut to 10,000
            characters ...``); newest last.
        agent_name: ``AgentSpec.name``.
        model: ``AgentSpec.model``.
        waiting_on: The sub-agent runs under way, e.g. ``waiting on
            researcher (run ...)`` (also the workflow's current details,
            which the Temporal UI shows); empty when none.
        thread_id: The thread id, for a thread's run; empty otherwise.
        turn: The thread's turn under way, or its last one.
        busy: A turn is under way (a thread waiting for a message is not).
        queued: Messages waiting for their turn.
        workspace: The workspace the spec names; None: the default of the
            worker that runs it.
    """

    run_id: str
    status: RunStatus
    step: int = 0
    current_step: int | None = None
    steps_taken: int = 0
    reason: RunReason | None = None
    error: str | None = None
    running_tool_calls: list[ToolCallPart] = Field(default_factory=list)
    message_count: int = 0
    usage: Usage = Field(default_factory=Usage)
    pending_approvals: list[PendingApproval] = Field(default_factory=list)
    pending_actions: list[PendingAction] = Field(default_factory=list)
    stop_requested: bool = False
    rejected_signals: list[str] = Field(default_factory=list)
    agent_name: str = ""
    model: str = ""
    waiting_on: str = ""
    thread_id: str = ""
    turn: int = 0
    busy: bool = False
    queued: int = 0
    workspace: str | None = None


class MessagesResult(BaseModel):
    """Query ``messages``: the conversation so far."""

    messages: list[Message] = Field(default_factory=list)


def as_messages(input: str | Message | Sequence[Message]) -> list[Message]:
    """A run's input messages: a string is one user message.

    Raises:
        UserError: No message.
    """
    if isinstance(input, str):
        return [Message.user(input)]
    if isinstance(input, Message):
        return [input]
    messages = list(input)
    if not messages:
        raise UserError("a run needs at least one input message")
    return messages


def run_input(spec: AgentSpec, input: str | Message | Sequence[Message]) -> AgentRunInput:
    """The input a run is started with.

    Raises:
        UserError: No message, or more than :data:`MAX_INPUT_BYTES` in all.
    """
    problem = depth_problem(spec)
    if problem is not None:
        raise UserError(problem)
    built = AgentRunInput(spec=spec, messages=as_messages(input))
    size = len(built.model_dump_json())
    if size > MAX_INPUT_BYTES:
        raise UserError(
            f"the run's input is {size / 1e6:.1f} MB; Temporal refuses payloads over 2 MB and "
            f"agentloop starts runs with at most {MAX_INPUT_BYTES / 1e6:.1f} MB. Put large documents "
            "in the workspace and let the agent read them with its tools, or send a shorter thread"
        )
    return built


def typed_result(result: AgentRunResult, output: OutputSpec | None) -> AgentRunResult:
    """``result`` with its ``output`` parsed into ``output``'s Python type
    (when known here); as is otherwise.

    Raises:
        OutputInvalid: The value the run checked against the schema does not
            parse as the type (a validator the schema cannot express).
    """
    if output is None or output.python_type is None or result.output is None:
        return result
    try:
        value = output.parse(result.output)
    except ValidationError as exc:
        raise run_failed(f"run {result.run_id}'s answer does not parse as {output.name}: "
                         f"{describe_validation_error(exc)}", reason="output_invalid", result=result) from None
    return result.model_copy(update={"output": value})


def with_output(spec: AgentSpec, output_type: Any) -> AgentSpec:
    """``spec`` answering in ``output_type`` (a type, import path or JSON
    schema: see ``AgentSpec.output``); ``spec`` itself when None.

    Raises:
        UserError: ``output_type`` is not one of those.
    """
    if output_type is None:
        return spec
    try:
        return spec.model_copy(update={"output": output_spec(output_type)})
    except ValueError as exc:
        raise UserError(str(exc)) from None


def run_failed_from(run_id: str, cause: BaseException) -> AgentRunFailed:
    """The :class:`AgentRunFailed` (the subclass of its reason) for run
    ``run_id`` whose workflow failed with ``cause``: the cause of a client's
    ``WorkflowFailureError``, or of a parent workflow's ``ChildWorkflowError``.
    The run's result comes from the failure's details."""
    from temporalio.exceptions import ApplicationError, CancelledError, TerminatedError, TimeoutError

    if isinstance(cause, ApplicationError) and cause.type == RUN_FAILED_ERROR_TYPE:
        result = AgentRunResult.model_validate(cause.details[0]) if cause.details else None
        reason = result.reason if result and result.reason else "error"
        return run_failed(f"run {run_id} failed ({reason}): {result.error if result else cause.message}",
                          reason=reason, result=result)
    if isinstance(cause, CancelledError):
        return run_failed(f"run {run_id} was cancelled", reason="cancelled")
    if isinstance(cause, TerminatedError):
        return run_failed(f"run {run_id} was terminated: {cause.message}", reason="error")
    if isinstance(cause, TimeoutError):
        return run_failed(f"run {run_id} timed out: {cause.message}", reason="error")
    return run_failed(f"run {run_id} failed: {cause}", reason="error")
