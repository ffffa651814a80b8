"""agentloop: a durable, checkpointable LLM agent loop on Temporal.

Backend code imports this package only::

    from agentloop import AgentClient, AgentSpec
"""

from agentloop.activities.scripted_model import (
    ScriptedChatModel,
    call,
    calls,
    register_scripted_model,
    reply,
)
from agentloop.activity_io import ChatModel, ModelRequest, ModelResponse, ToolDefinition
from agentloop.approvals import (
    ApprovalDecision,
    DecisionAccepted,
    PendingAction,
    PendingApproval,
    PendingWork,
    PermissionRule,
    ToolOutput,
)
from agentloop.client import AgentClient, AgentRunHandle, RunSummary
from agentloop.context import ContextLayer, ContextPolicy
from agentloop.errors import (
    AgentLoopError,
    AgentRunFailed,
    DecisionRejected,
    ToolError,
    UserError,
)
from agentloop.messages import (
    ContentPart,
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from agentloop.pricing import Budget, ModelPrice
from agentloop.report import AgentRunReport, StepReport, ToolCallReport, Usage
from agentloop.run import AgentRunInput, AgentRunResult, RunState, RunStatus
from agentloop.spec import AgentSpec
from agentloop.tools import Tool, ToolContext, ToolRegistry, default_registry, tool

__all__ = [
    "AgentClient",
    "AgentLoopError",
    "AgentRunFailed",
    "AgentRunHandle",
    "AgentRunInput",
    "AgentRunReport",
    "AgentRunResult",
    "AgentSpec",
    "ApprovalDecision",
    "Budget",
    "ChatModel",
    "ContentPart",
    "ContextLayer",
    "ContextPolicy",
    "DecisionAccepted",
    "DecisionRejected",
    "ImagePart",
    "Message",
    "ModelPrice",
    "ModelRequest",
    "ModelResponse",
    "PendingAction",
    "PendingApproval",
    "PendingWork",
    "PermissionRule",
    "RunState",
    "RunStatus",
    "RunSummary",
    "ScriptedChatModel",
    "StepReport",
    "TextPart",
    "ThinkingPart",
    "Tool",
    "ToolCallPart",
    "ToolCallReport",
    "ToolContext",
    "ToolDefinition",
    "ToolError",
    "ToolOutput",
    "ToolRegistry",
    "ToolResultPart",
    "Usage",
    "UserError",
    "call",
    "calls",
    "default_registry",
    "register_scripted_model",
    "reply",
    "tool",
]
