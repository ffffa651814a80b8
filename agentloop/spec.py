"""The agent's configuration: model, prompt, tools, limits."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agentloop.activity_io import ToolDefinition
from agentloop.approvals import DefaultPermission, PermissionRule
from agentloop.context import ContextLayer, ContextPolicy, compose_system_prompt
from agentloop.pricing import Budget, validate_budget

#: What the model is asked before a run completes, with
#: ``verify_before_completing``.
DEFAULT_VERIFICATION_PROMPT = (
    "Before you finish: check your work against the original request. If something is "
    "missing or wrong, fix it now (use tools if needed). If everything is done, reply with "
    "your final answer again."
)

#: Providers a model string may name, as ``provider:model``.
KNOWN_PROVIDERS = ("openai", "anthropic", "scripted")


def parse_model(model: str) -> tuple[str, str]:
    """Split ``provider:model`` into its two halves, with a clear error.

    Raises:
        ValueError: The string has no provider prefix or names an unknown one.
    """
    provider, sep, name = model.partition(":")
    if not sep or not provider or not name:
        raise ValueError(
            f"model {model!r} must be 'provider:model', e.g. 'openai:gpt-4.1-mini' or "
            f"'anthropic:claude-sonnet-4-5'; providers: {', '.join(KNOWN_PROVIDERS)}"
        )
    if provider not in KNOWN_PROVIDERS:
        raise ValueError(
            f"unknown model provider {provider!r} in {model!r}; use one of "
            f"{', '.join(KNOWN_PROVIDERS)} (any OpenAI-compatible server works as "
            "'openai:<model>' with OPENAI_BASE_URL set on the worker)"
        )
    return provider, name


class AgentSpec(BaseModel):
    """What an agent is: its model, instructions, tools and limits.

    Attributes:
        model: ``provider:model``, e.g. ``openai:gpt-4.1-mini``,
            ``anthropic:claude-sonnet-4-5``, or ``scripted:<name>`` for a
            scripted model registered in the worker (tests and offline demos).
        name: The agent's name, shown in reports and to operators.
        system_prompt: Instructions sent as the system prompt on every step.
        tools: Names of tools registered in the worker that the model may call.
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
            :class:`~agentloop.approvals.PermissionRule`).
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
        system_layers: Extra named layers of the system prompt (seed 004):
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
    """

    model_config = ConfigDict(extra="forbid")

    model: str
    name: str = "agent"
    system_prompt: str = ""
    tools: list[str] = Field(default_factory=list)
    max_steps: int = Field(default=16, ge=1)
    max_tool_call_continuations: int | None = Field(default=None, ge=0)
    max_consecutive_failed_tool_steps: int = Field(default=1, ge=1)
    parallel_tool_calls: bool = True
    tool_timeout_seconds: float = Field(default=120.0, gt=0)
    tool_timeouts: dict[str, float] = Field(default_factory=dict)
    tool_output_limit: int = Field(default=16_000, ge=256, le=1_000_000)
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
    def _check_client_tools(self) -> AgentSpec:
        names = [t.name for t in self.client_tools]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"client_tools declares {', '.join(duplicates)} more than once")
        clash = sorted(set(names) & set(self.tools))
        if clash:
            raise ValueError(
                f"{', '.join(clash)} is both a worker tool (tools) and a client tool (client_tools); "
                "keep it in one list"
            )
        return self

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
