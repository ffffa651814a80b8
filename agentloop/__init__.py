"""agentloop: a durable, checkpointable LLM agent loop on Temporal.

Backend code imports this package only::

    from agentloop import AgentClient, AgentSpec

A Temporal application of your own adds :class:`AgentLoopPlugin` to its
Client and Worker, and runs agents inside its workflows with
:func:`agentloop.workflow.run_agent`. Scripted models for tests are in
:mod:`agentloop.testing`.
"""

# First: registers the exit hook that keeps scripts using Temporal's client
# from crashing at interpreter exit (see agentloop/teardown.py).
import agentloop.workers.teardown  # noqa: F401  (isort: skip)
from agentloop.shared.activity_io import ChatModel, ModelRequest, ModelResponse, ToolDefinition
from agentloop.shared.approvals import (
    ApprovalDecision,
    DecisionAccepted,
    PendingAction,
    PendingApproval,
    PendingWork,
    PermissionRule,
    ToolOutput,
)
from agentloop.client.agent_client import AgentClient, AgentRunHandle, RunSummary
from agentloop.shared.context import ContextLayer, ContextPolicy
from agentloop.shared.errors import (
    AgentLoopError,
    AgentRunCancelled,
    AgentRunFailed,
    ContentFiltered,
    CostLimitExceeded,
    DecisionRejected,
    GuardrailTripped,
    MaxStepsExceeded,
    MaxToolCallContinuationsExceeded,
    OutputLimitReached,
    RunError,
    ToolError,
    ToolStepFailed,
    UserError,
    run_failed_class,
)
from agentloop.shared.events import (
    AgentEvent,
    ApprovalRequested,
    ApprovalResolved,
    ContextManaged,
    GuardrailTriggered,
    MessageCompleted,
    MessageCreated,
    MessageDelta,
    MessageReset,
    RequiresAction,
    RunCancelled,
    RunCompleted,
    RunContinued,
    RunCreated,
    RunFailed,
    RunStatusChanged,
    StepCreated,
    SubAgentInvocationCompleted,
    SubAgentInvocationStarted,
    ToolCallCompletedByLLM,
    ToolCallCreated,
    ToolExecutionCompleted,
    ToolExecutionStarted,
)
from agentloop.tools.context import ContextRequest, context_provider
from agentloop.tools.guardrails import GuardrailContext, guardrail, llm_judge
from agentloop.shared.guardrails import GuardrailResult
from agentloop.tools.hooks import EndRun, Fallback, Override, Skip, ToolCallInfo, before_tool_call, on_tool_error
from agentloop.shared.model_settings import ThinkingConfig
from agentloop.shared.messages import (
    ContentPart,
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from agentloop.workers.plugin import AgentLoopPlugin
from agentloop.shared.pricing import Budget, ModelPrice
from agentloop.shared.report import AgentRunReport, RunReason, StepReport, SubRunReport, ToolCallReport, Usage
from agentloop.shared.run import AgentRunInput, AgentRunResult, RunState, RunStatus
from agentloop.shared.activity_tools import ActivityTool, activity_as_tool
from agentloop.shared.spec import AgentSpec, SubAgent
from agentloop.tools.registry import Tool, ToolContext, ToolRegistry, default_registry, tool

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
    "ActivityTool",
    "AgentSpec",
    "ApprovalDecision",
    "ApprovalRequested",
    "ApprovalResolved",
    "Budget",
    "ChatModel",
    "ContentFiltered",
    "ContentPart",
    "ContextLayer",
    "ContextManaged",
    "ContextPolicy",
    "ContextRequest",
    "CostLimitExceeded",
    "DecisionAccepted",
    "DecisionRejected",
    "EndRun",
    "Fallback",
    "GuardrailContext",
    "GuardrailResult",
    "GuardrailTriggered",
    "GuardrailTripped",
    "ImagePart",
    "MaxStepsExceeded",
    "MaxToolCallContinuationsExceeded",
    "Message",
    "MessageCompleted",
    "MessageCreated",
    "MessageDelta",
    "MessageReset",
    "ModelPrice",
    "ModelRequest",
    "ModelResponse",
    "OutputLimitReached",
    "Override",
    "PendingAction",
    "PendingApproval",
    "PendingWork",
    "PermissionRule",
    "RequiresAction",
    "RunCancelled",
    "RunCompleted",
    "RunContinued",
    "RunCreated",
    "RunError",
    "RunFailed",
    "RunReason",
    "RunState",
    "RunStatus",
    "RunStatusChanged",
    "RunSummary",
    "Skip",
    "StepCreated",
    "StepReport",
    "SubAgent",
    "SubAgentInvocationCompleted",
    "SubAgentInvocationStarted",
    "SubRunReport",
    "TextPart",
    "ThinkingConfig",
    "ThinkingPart",
    "Tool",
    "ToolCallCompletedByLLM",
    "ToolCallCreated",
    "ToolCallInfo",
    "ToolCallPart",
    "ToolCallReport",
    "ToolContext",
    "ToolDefinition",
    "ToolError",
    "ToolExecutionCompleted",
    "ToolExecutionStarted",
    "ToolOutput",
    "ToolRegistry",
    "ToolResultPart",
    "ToolStepFailed",
    "Usage",
    "UserError",
    "activity_as_tool",
    "before_tool_call",
    "context_provider",
    "default_registry",
    "guardrail",
    "llm_judge",
    "on_tool_error",
    "run_failed_class",
    "tool",
]
