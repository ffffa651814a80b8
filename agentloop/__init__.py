"""agentloop: a durable, checkpointable LLM agent loop on Temporal.

Backend code imports this package only::

    from agentloop import AgentClient, AgentSpec

``__all__`` holds what users write in their code (docs/api.md lists it, a line
each). A Temporal application of your own adds :class:`AgentLoopPlugin` to its
Client and Worker and runs agents inside its workflows with
:mod:`agentloop.workflow`; scripted models for tests are in
:mod:`agentloop.testing`.

Names that earlier versions exported here (every event class, the error
subclasses, report parts, the model protocol...) stay importable from
``agentloop``, from the module that defines them (:data:`_MORE`); they are not
part of ``__all__``.
"""

# First: registers the exit hook that keeps scripts using Temporal's client
# from crashing at interpreter exit (see agentloop/workers/teardown.py).
import agentloop.workers.teardown  # noqa: F401  (isort: skip)
from agentloop.client.agent_client import AgentClient
from agentloop.shared.definition.activity_tools import activity_as_tool
from agentloop.shared.definition.approvals import ApprovalDecision, PermissionRule, ToolOutput
from agentloop.shared.definition.context_providers import ContextLayer
from agentloop.shared.definition.context_window import ContextPolicy
from agentloop.shared.base.errors import AgentLoopError, AgentRunFailed, DecisionRejected, ToolError, UserError
from agentloop.shared.definition.guardrails import GuardrailResult
from agentloop.shared.base.messages import Message
from agentloop.shared.definition.pricing import Budget, ModelPrice
from agentloop.shared.runs.report import AgentRunReport
from agentloop.shared.base.usage import Usage
from agentloop.shared.runs.run import AgentRunResult
from agentloop.shared.definition.spec import AgentSpec, SubAgent
from agentloop.shared.runs.threads import ThreadBusy, ThreadNotFound
from agentloop.tools.context import context_provider, ContextRequest
from agentloop.tools.guardrails import guardrail, GuardrailContext, llm_judge
from agentloop.tools.hooks import before_tool_call, EndRun, Fallback, on_tool_error, Override, Skip, ToolCallInfo
from agentloop.tools.registry import tool, ToolContext
from agentloop.workers.plugin import AgentLoopPlugin
from agentloop.shared.runs.events import AgentEvent

__all__ = [
    "AgentClient",
    "AgentEvent",
    "AgentLoopError",
    "AgentLoopPlugin",
    "AgentRunFailed",
    "AgentRunReport",
    "AgentRunResult",
    "AgentSpec",
    "ApprovalDecision",
    "Budget",
    "ContextLayer",
    "ContextPolicy",
    "ContextRequest",
    "DecisionRejected",
    "EndRun",
    "Fallback",
    "GuardrailContext",
    "GuardrailResult",
    "Message",
    "ModelPrice",
    "Override",
    "PermissionRule",
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
    "context_provider",
    "guardrail",
    "llm_judge",
    "on_tool_error",
    "tool",
]

#: Importable from ``agentloop`` as before, outside ``__all__``: name -> module.
_MORE = {
    "ActivityTool": "agentloop.shared.definition.activity_tools",
    "AgentRunCancelled": "agentloop.shared.base.errors",
    "AgentRunHandle": "agentloop.client.agent_client",
    "AgentRunInput": "agentloop.shared.runs.run",
    "ApprovalRequested": "agentloop.shared.runs.events",
    "ApprovalResolved": "agentloop.shared.runs.events",
    "ChatModel": "agentloop.shared.definition.activity_io",
    "ContentFiltered": "agentloop.shared.base.errors",
    "ContentPart": "agentloop.shared.base.messages",
    "ContextManaged": "agentloop.shared.runs.events",
    "CostLimitExceeded": "agentloop.shared.base.errors",
    "DecisionAccepted": "agentloop.shared.definition.approvals",
    "EncryptionCodec": "agentloop.shared.base.encryption",
    "EncryptionKeyMissing": "agentloop.shared.base.encryption",
    "GuardrailTriggered": "agentloop.shared.runs.events",
    "GuardrailTripped": "agentloop.shared.base.errors",
    "ImagePart": "agentloop.shared.base.messages",
    "MaxStepsExceeded": "agentloop.shared.base.errors",
    "MaxToolCallContinuationsExceeded": "agentloop.shared.base.errors",
    "MessageCompleted": "agentloop.shared.runs.events",
    "MessageCreated": "agentloop.shared.runs.events",
    "MessageDelta": "agentloop.shared.runs.events",
    "MessageReset": "agentloop.shared.runs.events",
    "ModelRequest": "agentloop.shared.definition.activity_io",
    "ModelResponse": "agentloop.shared.definition.activity_io",
    "OutputLimitReached": "agentloop.shared.base.errors",
    "PendingAction": "agentloop.shared.definition.approvals",
    "PendingApproval": "agentloop.shared.definition.approvals",
    "PendingWork": "agentloop.shared.definition.approvals",
    "RequiresAction": "agentloop.shared.runs.events",
    "RunCancelled": "agentloop.shared.runs.events",
    "RunCompleted": "agentloop.shared.runs.events",
    "RunContinued": "agentloop.shared.runs.events",
    "RunCreated": "agentloop.shared.runs.events",
    "RunError": "agentloop.shared.base.errors",
    "RunFailed": "agentloop.shared.runs.events",
    "RunReason": "agentloop.shared.runs.report",
    "RunState": "agentloop.shared.runs.run",
    "RunStatus": "agentloop.shared.runs.report",
    "RunStatusChanged": "agentloop.shared.runs.events",
    "RunSummary": "agentloop.client.agent_client",
    "StepCreated": "agentloop.shared.runs.events",
    "StepReport": "agentloop.shared.runs.report",
    "SubAgentInvocationCompleted": "agentloop.shared.runs.events",
    "SubAgentInvocationStarted": "agentloop.shared.runs.events",
    "SubRunReport": "agentloop.shared.runs.report",
    "TextPart": "agentloop.shared.base.messages",
    "ThinkingConfig": "agentloop.shared.base.model_settings",
    "ThinkingPart": "agentloop.shared.base.messages",
    "Tool": "agentloop.tools.registry",
    "ToolCallCompletedByLLM": "agentloop.shared.runs.events",
    "ToolCallCreated": "agentloop.shared.runs.events",
    "ToolCallPart": "agentloop.shared.base.messages",
    "ToolCallReport": "agentloop.shared.runs.report",
    "ToolDefinition": "agentloop.shared.definition.activity_io",
    "ToolExecutionCompleted": "agentloop.shared.runs.events",
    "ToolExecutionStarted": "agentloop.shared.runs.events",
    "ToolRegistry": "agentloop.tools.registry",
    "ToolResultPart": "agentloop.shared.base.messages",
    "ToolStepFailed": "agentloop.shared.base.errors",
    "default_registry": "agentloop.tools.registry",
    "run_failed_class": "agentloop.shared.base.errors",
}


def __getattr__(name: str) -> object:
    module = _MORE.get(name)
    if module is None:
        raise AttributeError(f"module 'agentloop' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
