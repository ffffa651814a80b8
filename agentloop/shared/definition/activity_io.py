"""The inputs and results of the run's activities, and the ChatModel protocol.

These are the contract between :mod:`workflows` and :mod:`activities`: runs in
flight depend on them, so fields are added (optional), never renamed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Literal, Protocol

from pydantic import (
    BaseModel,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from agentloop.shared.base.limits import TOOL_OUTPUT_LIMIT
from agentloop.shared.base.messages import ImagePart, Message
from agentloop.shared.base.model_settings import ThinkingConfig
from agentloop.shared.base.usage import Usage
from agentloop.shared.definition.pricing import ModelPrice

#: Normalised finish reasons.
FinishReason = Literal["stop", "tool_calls", "length", "content_filter", "other"]


class _Compact(BaseModel):
    """Serialises without the fields that hold their default: these models
    go into every step's history events, and defaults cost bytes there."""

    @model_serializer(mode="wrap")
    def _without_defaults(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        data = handler(self)
        if not isinstance(data, dict):
            return data
        for name, default, factory in _optional_fields(type(self)):
            if name in data and getattr(self, name) == (factory() if factory is not None else default):
                del data[name]
        return data


_OPTIONAL_FIELDS: dict[type, list[tuple[str, Any, Any]]] = {}


def _optional_fields(cls: type[BaseModel]) -> list[tuple[str, Any, Any]]:
    """A model's fields that have a default: name, default, default factory
    (read once per class: pydantic's ``get_default`` inspects the factory's
    signature on every call, and these models are dumped at every step)."""
    found = _OPTIONAL_FIELDS.get(cls)
    if found is None:
        found = [(name, field.default, field.default_factory)
                 for name, field in cls.model_fields.items() if not field.is_required()]
        _OPTIONAL_FIELDS[cls] = found
    return found


class ToolDefinition(BaseModel):
    """A tool as the model sees it.

    Attributes:
        name: The tool's name.
        description: What it does, for the model.
        parameters: JSON schema of its arguments (an object schema).
        read_only: The tool does not change anything (used by policies).
    """

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    read_only: bool = False


class OutputFormat(BaseModel):
    """The answer's schema, for a provider's native structured output.

    Attributes:
        name: The schema's name.
        json_schema: An object schema, in strict form (every property
            required, no additional properties).
    """

    name: str
    json_schema: dict[str, Any]


class ModelRequest(_Compact):
    """What a :class:`ChatModel` is asked.

    Attributes:
        model: The model name, without provider prefix.
        system_prompt: System instructions ("" for none).
        messages: The conversation.
        tools: Tools the model may call.
        temperature: Sampling temperature, or None for the provider default.
        max_tokens: Output token limit, or None for the provider default.
        parallel_tool_calls: Whether the model may ask for several calls at once.
        tool_choice: ``required``, ``none`` or a tool's name; None for the
            provider's default (``auto``).
        thinking: Extended thinking / reasoning effort, or None.
        output: The answer's schema, for the provider's native structured
            output (OpenAI's ``response_format``, Anthropic's ``output_config``);
            None for free text.
    """

    model: str
    system_prompt: str = ""
    messages: list[Message] = Field(default_factory=list)
    tools: list[ToolDefinition] = Field(default_factory=list)
    temperature: float | None = None
    max_tokens: int | None = None
    parallel_tool_calls: bool = True
    tool_choice: str | None = None
    thinking: ThinkingConfig | None = None
    output: OutputFormat | None = None


class ModelResponse(BaseModel):
    """What a :class:`ChatModel` answered.

    Attributes:
        message: The whole assistant message (text, thinking, tool calls).
        usage: Tokens of this call.
        finish_reason: Normalised finish reason.
        raw_finish_reason: The provider's own word for it.
        model: The model name the provider reported.
        max_tokens: The output token limit the request was sent with (the
            spec's, or the provider's default when the spec sets none), so a
            ``length`` failure names the limit that applied; None when no
            limit was sent (the server's own applied) or the model does not
            say (scripted models, results recorded before this field).
    """

    message: Message
    usage: Usage = Field(default_factory=Usage)
    finish_reason: FinishReason
    raw_finish_reason: str | None = None
    model: str = ""
    max_tokens: int | None = None


class StreamDelta(BaseModel):
    """One increment of a streaming answer (a ``thread.message.delta`` event).

    Attributes:
        kind: ``text`` and ``thinking`` carry ``text``; ``tool_call_start``
            carries ``call_id`` and ``name``; ``tool_call_delta`` carries a
            piece of the call's JSON arguments in ``text``; ``tool_call_end``
            closes ``call_id``; ``usage`` carries the usage reported so far
            (the worker keeps it, so a failed attempt's tokens still count;
            it is not published).
        text: The text or argument fragment.
        call_id: The tool call this delta belongs to.
        name: The tool's name (``tool_call_start``).
    """

    kind: Literal["text", "thinking", "tool_call_start", "tool_call_delta", "tool_call_end", "usage"]
    text: str = ""
    call_id: str | None = None
    name: str | None = None
    usage: Usage | None = None


#: Receives deltas as a provider streams them. Called from the activity's
#: event loop; it must not block.
DeltaSink = Callable[[StreamDelta], None]


class ChatModel(Protocol):
    """One LLM provider. Implementations map every error with their
    provider's error-mapping function, so Temporal decides on retries."""

    async def complete(self, request: ModelRequest, on_delta: DeltaSink | None = None) -> ModelResponse:
        """Answer one request, passing deltas to ``on_delta`` as they arrive
        (streaming providers) and returning the whole answer at the end."""
        ...


class CallModelInput(_Compact):
    """Input of the ``call_model`` activity.

    Attributes:
        run_id: The run (workflow id).
        step: Zero-based step number.
        model: ``provider:model``.
        request: The request for the provider.
        stream_deltas: Publish the provider's deltas on the run's event stream.
        stream_batch_seconds: Most time deltas wait before being published.
        transcript: The conversation by reference; when set, ``request``
            carries no messages, tools or system prompt, and the worker
            fills them in from its cache and the run's queries.
        seed: With ``transcript``, on a run's first step: the same
            transcript by value, so the worker asks the run nothing.
        compaction: With ``transcript``: this call summarises
            ``messages[head:end]`` of that transcript (for context
            compaction) instead of answering it; ``request`` carries the
            summariser's system prompt and output limit.
        price: The model's price as the run counts it (its budget's
            prices, else the built-in table), for the worker's cost
            metric; None when unknown.
        tenant: The run's tenant, for the worker's lane-wait metric label
            (an inherited Temporal priority reads as unset inside the
            activity); None: no tenant, or a run from before it was sent.
    """

    run_id: str
    step: int
    model: str
    request: ModelRequest
    stream_deltas: bool = True
    stream_batch_seconds: float = 0.1
    transcript: TranscriptRef | None = None
    compaction: CompactionRef | None = None
    seed: TranscriptSeed | None = None
    price: ModelPrice | None = None
    tenant: str | None = None


class CallModelResult(BaseModel):
    """Result of the ``call_model`` activity.

    Attributes:
        response: The provider's answer.
        latency_ms: Time of the successful attempt.
        attempt: Which attempt succeeded (1 for the first).
        failed_attempts_usage: Tokens earlier, failed attempts of this call
            used, as far as their providers reported them before failing.
        queue_wait_ms: How long the successful attempt waited in its task
            queue (a lane's rate limit, a backlog, no free worker): from its
            scheduling to its start, by the server's clock. None from
            workers that predate lanes.
    """

    response: ModelResponse
    latency_ms: float = 0.0
    attempt: int = 1
    failed_attempts_usage: Usage = Field(default_factory=Usage)
    queue_wait_ms: float | None = None


class TranscriptSeed(BaseModel):
    """A run's first LLM step, by value as well as by reference: the system
    prompt, tools and messages that ``transcript`` names, so a worker that
    has never seen the run need not ask it for them (checked against the
    reference's hashes; ignored if they differ). Only small first steps carry
    one (see ``agentloop.workflows.effects.activity_calls.SEED_MAX_BYTES``)."""

    system_prompt: str = ""
    tools: list[ToolDefinition] = Field(default_factory=list)
    messages: list[Message] = Field(default_factory=list)


class TranscriptRef(BaseModel):
    """The transcript an LLM step is asked about, by reference (see
    :mod:`agentloop.shared.runs.transcripts`).

    Attributes:
        message_count: Messages in the transcript.
        transcript_hash: Chained hash after the last of them.
        context_hash: Hash of the system prompt and tools.
    """

    message_count: int
    transcript_hash: str
    context_hash: str


class CompactionRef(BaseModel):
    """Which messages of a transcript to summarise, and how.

    Attributes:
        head: Messages kept verbatim at the start (shown as context).
        end: The summary replaces ``messages[head:end]``.
        policy: The run's ``ContextPolicy``, as a dict (summary prompt, cuts).
    """

    head: int
    end: int
    policy: dict[str, Any] = Field(default_factory=dict)


CallModelInput.model_rebuild()


class ResolveToolsInput(BaseModel):
    """Input of the ``resolve_tools`` activity: tool names from the spec,
    and the MCP servers whose tools the run uses (``AgentSpec.mcp_servers``);
    with ``agents_md``, the workspace root's ``AGENTS.md`` too (``workspace``:
    the spec's, or the worker's when None)."""

    names: list[str] = Field(default_factory=list)
    hooks: list[str] = Field(default_factory=list)
    mcp_servers: list[str] = Field(default_factory=list)
    agents_md: bool = False
    workspace: str | None = None


#: Failure type of ``resolve_tools_here`` on a worker that does not serve
#: the tools beside the runs (role ``models``): the run asks the tools queue.
TOOLS_NOT_HERE_ERROR_TYPE = "ToolsNotHere"


class ResolveToolsResult(BaseModel):
    """Result of ``resolve_tools``: definitions, and names the worker lacks.

    Attributes:
        tools: Definitions of the tools found, in the order asked.
        missing: Names not registered in the worker.
        available: Every tool name the worker has, for the error message.
        agents_md: The workspace's ``AGENTS.md`` (cut to its limit), when
            asked for and present.
        runs_queue: The run's task queue, when the worker that answered
            also serves the tool activities there (role ``all``): the run's
            tool calls then go to its own queue, where the worker that
            completes a workflow task starts them at once, instead of
            through the tools queue. None from a tools-only worker (and in
            histories from before): tool calls go to the tools queue.
        local_tools: The tools registered ``local=True``, when ``runs_queue``
            is set: the run calls them as local activities
            (``execute_tool_here``) of the worker running it.
    """

    tools: list[ToolDefinition] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)
    available: list[str] = Field(default_factory=list)
    missing_hooks: list[str] = Field(default_factory=list)
    available_hooks: list[str] = Field(default_factory=list)
    agents_md: str | None = None
    runs_queue: str | None = None
    local_tools: list[str] = Field(default_factory=list)


class ExecuteToolInput(_Compact):
    """Input of the ``execute_tool`` activity.

    Attributes:
        run_id: The run.
        step: The step that asked for the call.
        call_id: The tool call's id.
        tool_name: The tool to run.
        arguments: Arguments from the model (validated by the activity).
        workspace: Workspace root for built-in tools, or None for the worker's.
        timeout_seconds: The tool's time limit.
        output_limit: Most characters of output the model sees.
        hooks: The spec's tool hooks (``AgentSpec.tool_hooks``), in order.
        agent_name: The spec's name (``ToolContext.agent_name``).
        model: The spec's model (``ToolContext.model``).
    """

    run_id: str
    step: int
    call_id: str
    tool_name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    workspace: str | None = None
    timeout_seconds: float = 120.0
    output_limit: int = TOOL_OUTPUT_LIMIT
    hooks: list[str] = Field(default_factory=list)
    agent_name: str = ""
    model: str = ""


class ExecuteToolResult(BaseModel):
    """Result of ``execute_tool``.

    Attributes:
        call_id: The tool call's id.
        content: What the model sees (the output, or the error message).
        is_error: True when the call failed.
        truncated: The output was cut to ``output_limit``.
        latency_ms: Time the tool ran.
        metrics: Tool-reported metrics.
        end_run: An ``on_tool_error`` hook ended the run, saying this.
        images: Images the tool returned, for the model.
    """

    call_id: str
    content: str
    is_error: bool = False
    truncated: bool = False
    latency_ms: float = 0.0
    metrics: dict[str, Any] = Field(default_factory=dict)
    end_run: str | None = None
    images: list[ImagePart] = Field(default_factory=list)


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Summary text and Google-style ``Args:`` descriptions of a docstring."""
    lines = doc.splitlines()
    summary_lines: list[str] = []
    args: dict[str, str] = {}
    i = 0
    while i < len(lines) and lines[i].strip() not in ("Args:", "Arguments:", "Returns:", "Raises:"):
        summary_lines.append(lines[i])
        i += 1
    if i < len(lines) and lines[i].strip() in ("Args:", "Arguments:"):
        i += 1
        current: str | None = None
        while i < len(lines):
            line = lines[i]
            if line.strip() in ("Returns:", "Raises:", "Yields:", "Examples:"):
                break
            m = re.match(r"^\s+(\w+)(?:\s*\([^)]*\))?:\s*(.*)$", line)
            if m and (len(line) - len(line.lstrip())) <= 8:
                current = m.group(1)
                args[current] = m.group(2).strip()
            elif current and line.strip():
                args[current] += " " + line.strip()
            i += 1
    return "\n".join(summary_lines).strip(), args
