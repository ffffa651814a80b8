"""The agent's configuration: model, prompt, tools, limits."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from agentloop.shared.base.errors import checked
from agentloop.shared.base.limits import TOOL_OUTPUT_LIMIT
from agentloop.shared.base.model_settings import ThinkingConfig, check_tool_choice
from agentloop.shared.base.priority import checked_priority
from agentloop.shared.definition.activity_io import ToolDefinition
from agentloop.shared.definition.activity_tools import ActivityTool
from agentloop.shared.definition.approvals import DefaultPermission, PermissionRule
from agentloop.shared.definition.context_providers import ContextLayer, compose_system_prompt
from agentloop.shared.definition.context_window import ContextPolicy
from agentloop.shared.definition.lanes import spec_lane_problem
from agentloop.shared.definition.output import OutputSpec, output_spec
from agentloop.shared.definition.pricing import Budget, price_for, validate_budget
from agentloop.shared.definition.spec_checks import (
    parse_model,
    spec_workspace_problem,
    thinking_problem,
    tool_names_problem,
    with_field_suggestions,
    worker_names_problem,
)

# Importable from here as before the checks moved to spec_checks.
from agentloop.shared.definition.spec_checks import KNOWN_PROVIDERS as KNOWN_PROVIDERS  # isort: skip
from agentloop.shared.definition.spec_checks import SYSTEM_FILESYSTEMS as SYSTEM_FILESYSTEMS  # isort: skip
from agentloop.shared.definition.spec_checks import system_workspace_problem as system_workspace_problem  # isort: skip

#: What the model is asked before a run completes, with
#: ``verify_before_completing``.
DEFAULT_VERIFICATION_PROMPT = (
    "Before you finish: check your work against the original request. If something is "
    "missing or wrong, fix it now (use tools if needed). If everything is done, reply with "
    "your final answer again."
)

#: What a thread does with a message that arrives while it is busy (names as
#: in LangGraph's server): answer it after the current turn (``enqueue``),
#: cancel the step under way and answer it (``interrupt``), discard the
#: current turn and answer it in its place (``rollback``), or refuse it
#: (``reject``).
DoubleTexting = Literal["enqueue", "interrupt", "rollback", "reject"]

#: The strategies, in the order the docs list them.
DOUBLE_TEXTING: tuple[str, ...] = ("enqueue", "interrupt", "rollback", "reject")

#: How deep sub-agents may nest by default (``AgentSpec.max_depth``).
DEFAULT_MAX_DEPTH = 3

#: When a run moves to a new worker version (``AgentSpec.upgrade``).
UpgradePolicy = Literal["pinned", "at_turn_boundary"]


def upgrade_policy(spec: AgentSpec, *, thread: bool) -> UpgradePolicy:
    """The spec's ``upgrade``, or the default: threads move at a turn
    boundary, other runs stay pinned."""
    if spec.upgrade is not None:
        return spec.upgrade
    return "at_turn_boundary" if thread else "pinned"


class AgentSpec(BaseModel):
    """What an agent is: its model, instructions, tools and limits.

    Attributes:
        model: ``provider:model``, e.g. ``openai:gpt-4.1-mini``,
            ``anthropic:claude-sonnet-4-5``, or ``scripted:<name>`` for a
            scripted model registered in the worker (tests and offline demos).
        name: The agent's name, shown in reports and to operators.
        system_prompt: Instructions sent as the system prompt on every step.
        tools: Names of tools registered in the worker that the model may call.
        mcp_servers: Names of MCP servers configured on the worker whose
            tools the model may call, each as ``server__tool`` (docs/tools.md); listed once, at the run's start.
        activity_tools: Tools that are Temporal activities on their own task
            queues, called directly by the run (docs/tools.md;
            :func:`~agentloop.shared.definition.activity_tools.activity_as_tool`).
        max_steps: Most LLM steps a run may take; at least one always runs.
        max_tool_call_continuations: Most LLM steps that may follow tool
            results; ``None`` leaves only ``max_steps`` in force.
        max_consecutive_failed_tool_steps: The run fails once this many steps
            in a row had every one of their tool calls fail. ``1`` (the
            default) fails the run at the first such step; raise it to let the
            model see the errors and recover.
        parallel_tool_calls: Run the tool calls of one step concurrently.
        tool_timeout_seconds: Default limit for one tool call.
        tool_timeouts: Per-tool limits that override the default, by name.
        tool_output_limit: Most characters of a tool's output that reach the
            model; longer output is cut with a visible note.
        temperature: Sampling temperature; provider default when unset.
        max_tokens: Most output tokens per LLM step; provider default when unset
            (Anthropic requires one: 4096 is used).
        llm_timeout_seconds: Limit for one LLM attempt.
        llm_max_attempts: Attempts for one LLM step (retryable errors only).
        tool_max_attempts: Attempts for one tool call when its worker is lost
            or the activity fails outside the tool; a tool's own errors are
            results and never retried.
        heartbeat_timeout_seconds: How soon Temporal notices a lost worker
            during an LLM step or tool call and retries it elsewhere.
        workspace: Directory the built-in file and shell tools are confined to,
            on the worker; the worker's ``AGENTLOOP_WORKSPACE`` (or its working
            directory) when unset.
        permissions: Permission rules, first match wins (see
            :class:`~agentloop.shared.definition.approvals.PermissionRule`).
        default_permission: What applies to a call no rule matches. ``auto``
            (the default) allows read-only tools and asks for every other.
        approval_timeout_seconds: A call waiting for approval this long is
            denied (the model hears so); waits forever when unset.
        client_tools: Tools the client declares and runs itself: the model
            may call them, and the run waits in ``requires_action`` until the
            client submits their outputs.
        stream_deltas: Publish text, thinking and tool-call deltas on the
            run's event stream as the provider streams them (each batch is a
            signal in the run's history; turn off for batch jobs nobody watches).
        stream_batch_seconds: Most time a delta waits before it is published;
            the first delta of a step goes at once.
        system_layers: Extra named layers of the system prompt:
            stable layers first, then by priority, so providers' prompt
            caches keep hitting; ``system_prompt`` is the first stable layer.
        context: Context window management: with ``context_window_tokens``
            set, old tool outputs are pruned and then older history is
            summarised once the estimate passes ``threshold`` of the window.
        budget: Cost and token limits; a run past one ends ``failed`` with
            reason ``cost_limit``.
        continue_as_new_every_steps: Continue the run as a new Temporal run
            after this many steps (it always does when Temporal suggests
            it); the run id stays the same. None: only when suggested.
        verify_before_completing: Before completing, ask the model once to
            check its work (``verification_prompt``); it may confirm or go on.
        verification_prompt: The question asked.
        sub_agents: Agents this one may delegate to, by name: the model sees
            one tool per sub-agent, named after it, taking ``{"task": ...}``;
            each call runs the sub-agent as a child workflow (docs/sub-agents.md).
        max_depth: How deep sub-agents may nest below the run's top agent
            (its sub-agents are level 1, theirs level 2...). A run whose
            spec nests deeper is refused at start; a sub-agent's runs keep
            the top agent's limit.
        guardrails: Guardrails registered on the worker (function guardrails
            and LLM judges, ``agentloop.tools.guardrails``), by name: input ones run
            before each LLM step, output ones after its response; a tripwire
            ends the run with reason ``guardrail``.
        tool_hooks: Tool hooks registered on the tools worker
            (``agentloop.tools.hooks``), by name, in order: ``before_tool_call``
            ones may skip a call or give its result, ``on_tool_error`` ones
            a fallback result or the run's end (reason ``tool_error``).
        tool_choice: ``auto`` (the model decides; nothing is sent),
            ``required`` (it must call a tool), ``none`` (it may not), or a
            tool's name (it must call that one). Named and ``required`` keep
            the model from answering: pair them with ``max_steps``.
        thinking: Extended thinking (Anthropic's ``budget_tokens``) or
            reasoning effort (OpenAI's ``effort``); either derives the other.
            Not with ``temperature``.
        context_providers: Context providers registered on the tools worker
            (``agentloop.context_provider``), by name: each adds a system
            layer at the run's start or before each step.
        agents_md: Make the workspace root's ``AGENTS.md``, when present, a
            system layer. None (the default): runs with tools (or MCP
            servers) read it with their tool list, at no extra activity;
            runs without tools use no workspace and read none. True: every
            run reads it (a ``load_context`` activity at the start). False:
            never.
        workspace_listing: Put a listing of the workspace (two levels) in
            the run's first user turn.
        double_texting: What a thread does with a message that arrives
            while it answers another (``enqueue``, ``interrupt``,
            ``rollback``, ``reject``; docs/conversations.md); the run's
            ``thread`` options and the message itself may say otherwise.
        output: The answer's type (docs/typed-results.md): a pydantic model
            class (a spec file names it by import path, ``myapp.models:Triage``),
            a JSON schema, or a simple type (``Literal["refund", "escalate"]``,
            ``int``, ``list[str]``). The final answer is checked against it
            and ``AgentRunResult.output`` holds the parsed value.
        output_retries: How many times an answer that does not match
            ``output`` goes back to the model with what was wrong; then the
            run fails with reason ``output_invalid``.
        upgrade: On versioned workers (docs/deploying.md), when a run moves
            to the deployment's current version: ``pinned`` (never: it
            finishes on the version it started on) or ``at_turn_boundary``
            (a thread at its next turn, any run at its next continue-as-new,
            through continue-as-new). None (the default): ``at_turn_boundary``
            for threads, ``pinned`` for other runs.
        lane: The provider lane its model calls go to, the task queue
            ``<queue>-llm-<lane>`` (docs/many-tenants.md): None (the default)
            the model's provider (``openai``, ``anthropic``, ``scripted``);
            a name of your own for a model or base URL with a limit of its own
            (a models worker must poll it: ``agentloop worker --lanes all,NAME``);
            ``""`` no lane, the run's own queue.
        priority: The run's priority in Temporal's queues, 1 (first) to 5
            (last); None: the server's default, 3. Its model and tool calls
            and its sub-agents inherit it; a run's tenant is the fairness
            key next to it (docs/many-tenants.md). Not part of the agent's
            definition (its fingerprint).
    """

    model_config = ConfigDict(extra="forbid")

    model: str
    name: str = "agent"
    system_prompt: str = ""
    tools: list[str] = Field(default_factory=list)
    mcp_servers: list[str] = Field(default_factory=list)
    activity_tools: list[ActivityTool] = Field(default_factory=list)
    max_steps: int = Field(default=16, ge=1)
    max_tool_call_continuations: int | None = Field(default=None, ge=0)
    max_consecutive_failed_tool_steps: int = Field(default=1, ge=1)
    parallel_tool_calls: bool = True
    tool_timeout_seconds: float = Field(default=120.0, gt=0)
    tool_timeouts: dict[str, float] = Field(default_factory=dict)
    tool_output_limit: int = Field(default=TOOL_OUTPUT_LIMIT, ge=256, le=1_000_000)
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1)
    llm_timeout_seconds: float = Field(default=600.0, gt=0)
    llm_max_attempts: int = Field(default=5, ge=1)
    tool_max_attempts: int = Field(default=3, ge=1)
    heartbeat_timeout_seconds: float = Field(default=30.0, gt=0)
    workspace: str | None = None
    permissions: list[PermissionRule] = Field(default_factory=list)
    default_permission: DefaultPermission = "auto"
    approval_timeout_seconds: float | None = Field(default=None, gt=0)
    client_tools: list[ToolDefinition] = Field(default_factory=list)
    stream_deltas: bool = True
    stream_batch_seconds: float = Field(default=0.1, gt=0, le=10)
    system_layers: list[ContextLayer] = Field(default_factory=list)
    context: ContextPolicy = Field(default_factory=ContextPolicy)
    budget: Budget = Field(default_factory=Budget)
    continue_as_new_every_steps: int | None = Field(default=None, ge=1)
    verify_before_completing: bool = False
    verification_prompt: str = DEFAULT_VERIFICATION_PROMPT
    sub_agents: dict[str, SubAgent] = Field(default_factory=dict)
    max_depth: int = Field(default=DEFAULT_MAX_DEPTH, ge=1, le=10)
    guardrails: list[str] = Field(default_factory=list)
    tool_hooks: list[str] = Field(default_factory=list)
    tool_choice: str = "auto"
    thinking: ThinkingConfig | None = None
    context_providers: list[str] = Field(default_factory=list)
    agents_md: bool | None = None
    workspace_listing: bool = False
    double_texting: DoubleTexting = "enqueue"
    output: OutputSpec | None = None
    output_retries: int = Field(default=2, ge=0, le=10)
    upgrade: UpgradePolicy | None = None
    lane: str | None = None
    priority: int | None = None

    @field_validator("lane")
    @classmethod
    def _lane(cls, value: str | None) -> str | None:
        return checked(value, spec_lane_problem)

    @field_validator("output", mode="before")
    @classmethod
    def _output_spec(cls, value: Any) -> Any:
        return None if value is None else output_spec(value)

    @model_validator(mode="wrap")
    @classmethod
    def _suggest_fields(cls, data: Any, handler: ModelWrapValidatorHandler[AgentSpec]) -> AgentSpec:
        try:
            return handler(data)
        except ValidationError as exc:
            raise with_field_suggestions(exc, cls) from None

    @field_validator("priority", mode="before")
    @classmethod
    def _check_priority(cls, value: Any) -> Any:
        return checked_priority(value)

    @field_validator("workspace")
    @classmethod
    def _check_workspace(cls, value: str | None) -> str | None:
        return checked(value, spec_workspace_problem)

    @field_validator("model")
    @classmethod
    def _check_model(cls, value: str) -> str:
        parse_model(value)
        return value

    @model_validator(mode="after")
    def _check_budget(self) -> AgentSpec:
        validate_budget(self.model, self.budget)
        return self

    @property
    def composed_system_prompt(self) -> str:
        """``system_prompt`` and ``system_layers``, in cache-friendly order."""
        if not self.system_layers:
            return self.system_prompt
        base = ContextLayer(name="system", content=self.system_prompt, priority=0, stable=True)
        return compose_system_prompt([base, *self.system_layers])

    @model_validator(mode="after")
    def _check_tool_names(self) -> AgentSpec:
        if problem := tool_names_problem(self.tools, [t.name for t in self.client_tools],
                                         [t.name for t in self.activity_tools], list(self.sub_agents)):
            raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _check_sub_agents(self) -> AgentSpec:
        if self.budget.cost_limit_usd is not None:
            for name, sub in self.sub_agents.items():
                prices = Budget(prices={**self.budget.prices, **sub.spec.budget.prices})
                if price_for(sub.spec.model, prices) is None:
                    raise ValueError(
                        f"budget.cost_limit_usd is set, and it holds for the sub-agents too, but the price of "
                        f"sub-agent {name}'s model {sub.spec.model!r} is unknown; add it to budget.prices, or "
                        "limit tokens with max_total_tokens instead"
                    )
        return self

    @field_validator("tool_choice")
    @classmethod
    def _check_tool_choice(cls, value: str) -> str:
        return check_tool_choice(value)

    @model_validator(mode="after")
    def _check_thinking(self) -> AgentSpec:
        if self.thinking is not None and (problem := thinking_problem(
                temperature=self.temperature, provider=self.provider, tool_choice=self.tool_choice)):
            raise ValueError(problem)
        return self

    @field_validator("guardrails", "tool_hooks", "context_providers")
    @classmethod
    def _check_worker_names(cls, value: list[str], info: ValidationInfo) -> list[str]:
        return checked(value, lambda names: worker_names_problem(info.field_name, names))

    @property
    def provider(self) -> str:
        """The provider half of ``model``."""
        return parse_model(self.model)[0]

    @property
    def model_name(self) -> str:
        """The model half of ``model``."""
        return parse_model(self.model)[1]

    def timeout_for(self, tool_name: str) -> float:
        """The time limit, in seconds, for one call of ``tool_name``."""
        return self.tool_timeouts.get(tool_name, self.tool_timeout_seconds)


class SubAgent(BaseModel):
    """An agent another agent may delegate to (``AgentSpec.sub_agents``).

    Attributes:
        spec: The sub-agent.
        description: One line for the model: what the sub-agent is for
            (the description of its tool).
        history: ``none``: the sub-agent sees only the task. ``fork``: it
            sees a copy of the delegating agent's conversation so far, then
            the task.
    """

    model_config = ConfigDict(extra="forbid")

    spec: AgentSpec
    description: str = ""
    history: Literal["none", "fork"] = "none"


AgentSpec.model_rebuild()


def deepest_path(spec: AgentSpec) -> list[str]:
    """Names along the deepest chain of sub-agents, ``spec``'s own first
    (``["lead"]`` for an agent without sub-agents)."""
    best: list[str] = []
    for name, sub in spec.sub_agents.items():
        below = deepest_path(sub.spec)
        if len(below) >= len(best):
            best = [name, *below[1:]]
    return [spec.name, *best]


def depth_problem(spec: AgentSpec, *, depth: int = 0, max_depth: int | None = None) -> str | None:
    """Why a run of ``spec`` at ``depth`` (0 for a top-level run) may not
    start, or None: its sub-agents nest past ``max_depth`` (``spec.max_depth``
    when None)."""
    limit = spec.max_depth if max_depth is None else max_depth
    path = deepest_path(spec)
    if depth + len(path) - 1 <= limit:
        return None
    where = f" below a run at depth {depth}" if depth else ""
    return (
        f"sub-agents nest {depth + len(path) - 1} levels deep ({' -> '.join(path)}{where}), past "
        f"max_depth={limit}; flatten the team or raise AgentSpec.max_depth (at most 10) on the top agent"
    )
