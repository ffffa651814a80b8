"""A run's result and the failure family a client sees for a run that ended
``failed``: one ``AgentRunFailed`` subclass per reason, each carrying the result."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator

from agentloop.shared.base.errors import AgentLoopError
from agentloop.shared.base.messages import Message
from agentloop.shared.base.usage import Usage
from agentloop.shared.runs.eval_tools import EvalTally
from agentloop.shared.runs.report import AgentRunReport, RunReason, RunStatus, RunWarning


class AgentRunResult(BaseModel):
    """The output of a finished run (also carried by a failed run's error).

    Attributes:
        run_id: The run id (workflow id).
        status: ``completed``, ``failed``, ``cancelled`` or ``stopped``.
        reason: Why the run ended.
        final_text: The last assistant text (a typed run's: its answer as JSON).
        output: A typed run's answer (``AgentSpec.output``): the parsed
            value, as the Python type where the caller knows it
            (``AgentClient.start`` with a spec whose ``output`` is a type,
            ``run_agent(..., output_type=...)``), else as JSON.
        error: What went wrong, when the run failed.
        messages: The messages the run added (assistant and tool results).
            A run whose added messages exceed ``RESULT_MESSAGES_LIMIT`` bytes
            leaves them out of its Temporal result (they are in its history
            once already) and sets ``messages_omitted``;
            :meth:`AgentRunHandle.result` fetches them with the ``messages``
            query, so callers of the client see them either way.
        messages_omitted: How many messages the Temporal result left out.
        report_steps_omitted: The Temporal result's report leaves out its
            steps: its messages were left out, or the report is over
            ``RESULT_REPORT_LIMIT`` bytes. :meth:`AgentRunHandle.result`
            fetches the full report.
        usage: Usage summed over the run.
        report: The full run report.
        warnings: What the run went on despite (``report.warnings``): tools
            removed or added since the snapshot it was restored or forked from.
        eval_tally: An eval's case run only: the tools it called and how
            they were answered, kept when the report's steps are left out.
    """

    run_id: str
    status: RunStatus
    reason: RunReason
    final_text: str = ""
    output: Any = None
    error: str | None = None
    messages: list[Message] = Field(default_factory=list)
    messages_omitted: int = 0
    report_steps_omitted: bool = False
    usage: Usage = Field(default_factory=Usage)
    report: AgentRunReport
    warnings: list[RunWarning] = Field(default_factory=list)
    eval_tally: EvalTally | None = None

    @model_validator(mode="after")
    def _report_warnings(self) -> AgentRunResult:
        if not self.warnings and self.report.warnings:
            self.warnings = list(self.report.warnings)
        return self


class AgentRunFailed(AgentLoopError):
    """A run ended ``failed`` (or was cancelled or terminated).

    What :meth:`AgentRunHandle.result() <agentloop.AgentRunHandle.result>` and
    :func:`agentloop.in_workflow.run_agent` raise. There is one subclass per
    reason (see :func:`run_failed_class`), so ``except MaxStepsExceeded``
    catches one kind and ``except AgentRunFailed`` every kind.

    Attributes:
        reason: Why (``error``, ``max_steps``, ``length``, ``tool_error``...).
        result: The run's result: messages, usage and report up to the
            failure; None for a run that was cancelled or terminated.
    """

    def __init__(self, message: str, *, reason: str, result: AgentRunResult | None = None):
        super().__init__(message)
        self.reason = reason
        self.result = result

    def __reduce__(self) -> Any:
        # Keyword-only arguments: pickling (and so a sync tool's child
        # process) needs to be told how to rebuild the exception.
        return (_rebuild_run_failed, (type(self), str(self), self.reason, self.result))


def _rebuild_run_failed(cls: type[AgentRunFailed], message: str, reason: str, result: Any) -> AgentRunFailed:
    return cls(message, reason=reason, result=result)


class RunError(AgentRunFailed):
    """Reason ``error``: the run itself failed (an LLM step that used up its
    attempts, a model the worker cannot serve, bad start input), or it was
    terminated, timed out, or failed in a way agentloop does not know."""


class MaxStepsExceeded(AgentRunFailed):
    """Reason ``max_steps``: the run took ``AgentSpec.max_steps`` steps
    without a final answer."""


class CostLimitExceeded(AgentRunFailed):
    """Reason ``cost_limit``: a cost or token limit of ``AgentSpec.budget``
    was exceeded."""


class ToolStepFailed(AgentRunFailed):
    """Reason ``tool_error``: every tool call of a step failed, for more
    steps in a row than ``AgentSpec.max_consecutive_failed_tool_steps``."""


class OutputLimitReached(AgentRunFailed):
    """Reason ``length``: the model stopped at its output token limit
    (finish reason ``length``)."""


class ContentFiltered(AgentRunFailed):
    """Reason ``content_filter``: the provider withheld the answer."""


class GuardrailTripped(AgentRunFailed):
    """Reason ``guardrail``: a guardrail's tripwire ended the run."""


class MaxToolCallContinuationsExceeded(AgentRunFailed):
    """Reason ``max_tool_call_continuations``: the run went past
    ``AgentSpec.max_tool_call_continuations`` where it could not wait for the
    client's outputs."""


class OutputInvalid(AgentRunFailed):
    """Reason ``output_invalid``: the model's answer did not match
    ``AgentSpec.output``, after ``output_retries`` more tries."""


class QuotaExceeded(AgentRunFailed):
    """Reason ``quota_exceeded``: the run's tenant spent its quota for the
    window, and the tenant's policy at the limit is ``fail``
    (``agentloop quota set TENANT ... --at-limit fail``)."""


class AgentRunCancelled(AgentRunFailed):
    """Reason ``cancelled``: the run was cancelled (Temporal workflow
    cancellation). Named apart from the event class
    :class:`agentloop.shared.runs.events.RunCancelled`, which a run's stream ends with."""


#: The exception class of each failure reason.
RUN_FAILED_CLASSES: dict[str, type[AgentRunFailed]] = {
    "error": RunError,
    "max_steps": MaxStepsExceeded,
    "cost_limit": CostLimitExceeded,
    "tool_error": ToolStepFailed,
    "length": OutputLimitReached,
    "content_filter": ContentFiltered,
    "guardrail": GuardrailTripped,
    "max_tool_call_continuations": MaxToolCallContinuationsExceeded,
    "cancelled": AgentRunCancelled,
    "output_invalid": OutputInvalid,
    "quota_exceeded": QuotaExceeded,
}


def run_failed_class(reason: str | None) -> type[AgentRunFailed]:
    """The :class:`AgentRunFailed` subclass for a run's failure ``reason``;
    :class:`AgentRunFailed` itself for a reason it does not know (one added
    later)."""
    return RUN_FAILED_CLASSES.get(reason or "error", AgentRunFailed)


def run_failed(message: str, *, reason: str | None, result: AgentRunResult | None = None) -> AgentRunFailed:
    """The exception for a run that failed with ``reason``: an instance of
    :func:`run_failed_class`."""
    reason = reason or "error"
    return run_failed_class(reason)(message, reason=reason, result=result)
