"""agentloop: a durable, checkpointable LLM agent loop on Temporal.

Backend code imports this package only::

    from agentloop import AgentClient, AgentSpec

``__all__`` holds what users write in their code (docs/api.md lists it, a line
each). A Temporal application of your own adds :class:`AgentLoopPlugin` to its
Client and Worker and runs agents inside its workflows with
:mod:`agentloop.in_workflow`; scripted models for tests are in
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
from agentloop.shared.activity_tools import activity_as_tool
from agentloop.shared.approvals import ApprovalDecision, PermissionRule, ToolOutput
from agentloop.shared.context import ContextLayer, ContextPolicy
from agentloop.shared.errors import AgentLoopError, AgentRunFailed, DecisionRejected, ToolError, UserError
from agentloop.shared.guardrails import GuardrailResult
from agentloop.shared.messages import Message
from agentloop.shared.pricing import Budget, ModelPrice
from agentloop.shared.report import AgentRunReport, Usage
from agentloop.shared.run import AgentRunResult
from agentloop.shared.spec import AgentSpec, SubAgent
from agentloop.shared.threads import ThreadBusy, ThreadNotFound
from agentloop.tools.context_providers import context_provider, ContextRequest
from agentloop.tools.guardrails import guardrail, GuardrailContext, llm_judge
from agentloop.tools.hooks import before_tool_call, EndRun, Fallback, on_tool_error, Override, Skip, ToolCallInfo
from agentloop.tools.registry import tool
from agentloop.tools.tool_context import ToolContext
from agentloop.workers.plugin import AgentLoopPlugin
from agentloop.shared.events import AgentEvent

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
    "ActivityTool": "agentloop.shared.activity_tools",
    "AgentRunCancelled": "agentloop.shared.errors",
    "AgentRunHandle": "agentloop.client.agent_client",
    "AgentRunInput": "agentloop.shared.run",
    "ApprovalRequested": "agentloop.shared.events",
    "ApprovalResolved": "agentloop.shared.events",
    "ChatModel": "agentloop.shared.activity_io",
    "ContentFiltered": "agentloop.shared.errors",
    "ContentPart": "agentloop.shared.messages",
    "ContextManaged": "agentloop.shared.events",
    "CostLimitExceeded": "agentloop.shared.errors",
    "DecisionAccepted": "agentloop.shared.approvals",
    "EncryptionCodec": "agentloop.shared.encryption",
    "EncryptionKeyMissing": "agentloop.shared.encryption",
    "GuardrailTriggered": "agentloop.shared.events",
    "GuardrailTripped": "agentloop.shared.errors",
    "ImagePart": "agentloop.shared.messages",
    "MaxStepsExceeded": "agentloop.shared.errors",
    "MaxToolCallContinuationsExceeded": "agentloop.shared.errors",
    "MessageCompleted": "agentloop.shared.events",
    "MessageCreated": "agentloop.shared.events",
    "MessageDelta": "agentloop.shared.events",
    "MessageReset": "agentloop.shared.events",
    "ModelRequest": "agentloop.shared.activity_io",
    "ModelResponse": "agentloop.shared.activity_io",
    "OutputLimitReached": "agentloop.shared.errors",
    "PendingAction": "agentloop.shared.approvals",
    "PendingApproval": "agentloop.shared.approvals",
    "PendingWork": "agentloop.shared.approvals",
    "RequiresAction": "agentloop.shared.events",
    "RunCancelled": "agentloop.shared.events",
    "RunCompleted": "agentloop.shared.events",
    "RunContinued": "agentloop.shared.events",
    "RunCreated": "agentloop.shared.events",
    "RunError": "agentloop.shared.errors",
    "RunFailed": "agentloop.shared.events",
    "RunReason": "agentloop.shared.report",
    "RunState": "agentloop.shared.run",
    "RunStatus": "agentloop.shared.report",
    "RunStatusChanged": "agentloop.shared.events",
    "RunSummary": "agentloop.client.agent_client",
    "StepCreated": "agentloop.shared.events",
    "StepReport": "agentloop.shared.report",
    "SubAgentInvocationCompleted": "agentloop.shared.events",
    "SubAgentInvocationStarted": "agentloop.shared.events",
    "SubRunReport": "agentloop.shared.report",
    "TextPart": "agentloop.shared.messages",
    "ThinkingConfig": "agentloop.shared.model_settings",
    "ThinkingPart": "agentloop.shared.messages",
    "Tool": "agentloop.tools.registry",
    "ToolCallCompletedByLLM": "agentloop.shared.events",
    "ToolCallCreated": "agentloop.shared.events",
    "ToolCallPart": "agentloop.shared.messages",
    "ToolCallReport": "agentloop.shared.report",
    "ToolDefinition": "agentloop.shared.activity_io",
    "ToolExecutionCompleted": "agentloop.shared.events",
    "ToolExecutionStarted": "agentloop.shared.events",
    "ToolRegistry": "agentloop.tools.registry",
    "ToolResultPart": "agentloop.shared.messages",
    "ToolStepFailed": "agentloop.shared.errors",
    "default_registry": "agentloop.tools.registry",
    "run_failed_class": "agentloop.shared.errors",
}


def __getattr__(name: str) -> object:
    module = _MORE.get(name)
    if module is None:
        raise AttributeError(f"module 'agentloop' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
