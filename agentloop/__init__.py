"""agentloop: a durable, checkpointable LLM agent loop on Temporal.

Backend code imports this package only::

    from agentloop import AgentClient, AgentSpec

``__all__`` holds what users write in their code (docs/api.md lists it, a line
each). A Temporal application of your own adds :class:`AgentLoopPlugin` to its
Client and Worker and runs agents inside its workflows with
:mod:`agentloop.in_workflow`; scripted models for tests are in
:mod:`agentloop.testing`.
"""

# First: registers the exit hook that keeps scripts using Temporal's client
# from crashing at interpreter exit (see agentloop/workers/teardown.py).
import agentloop.workers.teardown  # noqa: F401  (isort: skip)
from agentloop.client.agent_client import AgentClient
from agentloop.client.evals import Overrides, cases_from_query, cases_from_runs, eval_report, list_evals, start_eval
from agentloop.client.handle import AgentRunHandle
from agentloop.shared.base.encryption import EncryptionCodec
from agentloop.shared.base.errors import AgentLoopError, DecisionRejected, ToolError, UserError
from agentloop.shared.base.messages import Message
from agentloop.shared.base.usage import Usage
from agentloop.shared.definition.activity_tools import activity_as_tool
from agentloop.shared.definition.approvals import ApprovalDecision, PermissionRule, ToolOutput
from agentloop.shared.definition.context_providers import ContextLayer
from agentloop.shared.definition.context_window import ContextPolicy
from agentloop.shared.definition.guardrails import GuardrailResult
from agentloop.shared.definition.pricing import Budget, ModelPrice
from agentloop.shared.definition.spec import AgentSpec, SubAgent
from agentloop.shared.evals.cases import EvalCase, read_dataset
from agentloop.shared.evals.checks import Candidate, parse_check
from agentloop.shared.evals.output import junit_xml, report_table
from agentloop.shared.evals.report import EvalReport
from agentloop.shared.runs.diff import RunDiff, diff_runs
from agentloop.shared.runs.events import AgentEvent
from agentloop.shared.runs.report import AgentRunReport
from agentloop.shared.runs.result import (
    AgentRunCancelled,
    AgentRunFailed,
    AgentRunResult,
    GuardrailTripped,
    MaxStepsExceeded,
)
from agentloop.shared.runs.run import AgentRunInput
from agentloop.shared.runs.threads import ThreadBusy, ThreadNotFound
from agentloop.tools.context_providers import ContextRequest, context_provider
from agentloop.tools.guardrails import GuardrailContext, guardrail, llm_judge
from agentloop.tools.hooks import EndRun, Fallback, Override, Skip, ToolCallInfo, before_tool_call, on_tool_error
from agentloop.tools.registry import default_registry, tool
from agentloop.tools.tool_context import ToolContext
from agentloop.workers.plugin import AgentLoopPlugin

__all__ = [
    "AgentClient",
    "AgentEvent",
    "AgentLoopError",
    "AgentLoopPlugin",
    "AgentRunCancelled",
    "AgentRunFailed",
    "AgentRunHandle",
    "AgentRunInput",
    "AgentRunReport",
    "AgentRunResult",
    "AgentSpec",
    "ApprovalDecision",
    "Budget",
    "Candidate",
    "ContextLayer",
    "ContextPolicy",
    "ContextRequest",
    "DecisionRejected",
    "EncryptionCodec",
    "EndRun",
    "EvalCase",
    "EvalReport",
    "Fallback",
    "GuardrailContext",
    "GuardrailResult",
    "GuardrailTripped",
    "MaxStepsExceeded",
    "Message",
    "ModelPrice",
    "Override",
    "Overrides",
    "PermissionRule",
    "RunDiff",
    "Skip",
    "SubAgent",
    "ThreadBusy",
    "ThreadNotFound",
    "ToolCallInfo",
    "ToolContext",
    "ToolError",
    "ToolOutput",
    "Usage",
    "UserError",
    "activity_as_tool",
    "before_tool_call",
    "cases_from_query",
    "cases_from_runs",
    "context_provider",
    "default_registry",
    "diff_runs",
    "eval_report",
    "guardrail",
    "junit_xml",
    "list_evals",
    "llm_judge",
    "on_tool_error",
    "parse_check",
    "read_dataset",
    "report_table",
    "start_eval",
    "tool",
]
