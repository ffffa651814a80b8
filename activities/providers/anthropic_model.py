"""The Anthropic :class:`~agentloop.shared.definition.activity_io.ChatModel`, over the Messages API.

Answers are always streamed: the events are read into a
:class:`~agentloop.activities.providers.streaming.StepAccumulator`, which passes deltas on as they
come and builds the whole answer. Request building
(:func:`to_anthropic_request`, which also marks the prompt-cache breakpoints)
is a pure function.
"""

from __future__ import annotations

import json
import re
from typing import Any, assert_never

import anthropic
from anthropic import AsyncAnthropic
from temporalio.exceptions import ApplicationError

from agentloop.activities.providers.provider_common import Provider
from agentloop.activities.providers.sdk import SDKChatModel, SDKErrors, tool_declaration
from agentloop.activities.providers.streaming import StepAccumulator
from agentloop.shared.base.messages import ImagePart, Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from agentloop.shared.base.model_settings import anthropic_tool_choice
from agentloop.shared.base.usage import Usage
from agentloop.shared.definition.activity_io import (
    DeltaSink,
    FinishReason,
    ModelRequest,
    ModelResponse,
    ToolDefinition,
)

#: Output limit sent when the request sets none: Anthropic requires one.
DEFAULT_MAX_TOKENS = 4096

_FINISH_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    # Output stopped because the context window filled up: the same outcome
    # as reaching max_tokens, and what OpenAI reports as "length".
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}

#: Content block types that may carry a ``cache_control`` breakpoint (of the
#: ones :func:`to_anthropic_messages` writes: not ``thinking``).
_CACHEABLE_BLOCKS = frozenset({"text", "image", "tool_use", "tool_result"})

_DATA_URL = re.compile(r"^data:(?P<media_type>[^;,]+);base64,(?P<data>.*)$", re.DOTALL)


def anthropic_client_from_env() -> AsyncAnthropic:
    """An ``AsyncAnthropic(max_retries=0)`` configured by the environment.

    The SDK reads the environment itself: ``ANTHROPIC_API_KEY`` (or
    ``ANTHROPIC_AUTH_TOKEN``, an Anthropic profile or federation variables)
    and ``ANTHROPIC_BASE_URL``.

    Raises:
        ApplicationError: Non-retryable ``ModelConfigurationError`` when no
            credential is configured or the SDK rejects the configuration.
    """
    # No key passed: one passed would stop the SDK from looking further.
    client = ANTHROPIC.client(AsyncAnthropic)
    if not (client.api_key or client.auth_token or client.credentials is not None):
        raise ANTHROPIC.missing_key()
    return client


class AnthropicChatModel(SDKChatModel[AsyncAnthropic]):
    """A :class:`~agentloop.shared.definition.activity_io.ChatModel` backed by Anthropic's Messages API,
    through an ``AsyncAnthropic`` client given or built on the first call by
    :func:`anthropic_client_from_env` (see
    :class:`~agentloop.activities.providers.sdk.SDKChatModel`)."""

    client_from_env = staticmethod(anthropic_client_from_env)

    async def complete(self, request: ModelRequest, on_delta: DeltaSink | None = None) -> ModelResponse:
        """Answer one request with one streamed Messages API call.

        Text, thinking and tool-call progress go to ``on_delta`` as the events
        arrive; the whole answer is returned once the stream ends, with the
        ``max_tokens`` the request was sent with.

        Raises:
            ApplicationError: Every failure, mapped by
                :func:`map_anthropic_error` (or ``ModelBadRequest`` when the
                conversation or settings cannot be sent), so Temporal knows
                whether to retry. A stream that breaks, reports an error (such
                as ``overloaded_error``) or ends before a ``stop_reason`` is a
                retryable ``ModelStreamBroken``.
        """
        try:
            params = to_anthropic_request(request)
        except ValueError as exc:
            raise ANTHROPIC.unsendable(exc) from exc
        response = await ANTHROPIC.stream_answer(
            self.client.messages.create(**params, stream=True),
            _EventReader(StepAccumulator(on_delta)),
        )
        return response.model_copy(update={"max_tokens": params["max_tokens"]})


# ---------------------------------------------------------------- requests


def to_anthropic_request(request: ModelRequest) -> dict[str, Any]:
    """Keyword arguments of ``messages.create`` for ``request`` (no ``stream``).

    The stable prefix is marked for prompt caching with up to three
    ``ephemeral`` breakpoints (the API allows four): on the last tool (tools
    are fixed for a run), on the system prompt, sent as one text block, and
    on the conversation's tail (see :func:`mark_conversation_tail`), so each
    step reads the previous step's prefix from the cache and writes its own.
    Without tools or a system prompt, those breakpoints are left out.

    ``max_tokens`` defaults to :data:`DEFAULT_MAX_TOKENS`. The SDK has no
    ``temperature`` argument any more, so a set temperature travels in
    ``extra_body``; unset, the model's default applies (newer models accept
    nothing else). Parallel tool calls are only mentioned to turn them off.

    Raises:
        ValueError: The conversation holds something the Messages API cannot
            express (see :func:`to_anthropic_messages`).
    """
    messages = to_anthropic_messages(request.messages)
    params: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens if request.max_tokens is not None else DEFAULT_MAX_TOKENS,
        "messages": messages,
    }
    system = to_anthropic_system(request.system_prompt, request.messages)
    if system:
        # A list of blocks, not a string, so the prompt can carry a breakpoint.
        params["system"] = [{"type": "text", "text": system, "cache_control": cache_breakpoint()}]
    if request.tools:
        tools = to_anthropic_tools(request.tools)
        tools[-1]["cache_control"] = cache_breakpoint()
        params["tools"] = tools
        choice = anthropic_tool_choice(request.tool_choice, parallel=request.parallel_tool_calls)
        if choice is not None:
            params["tool_choice"] = choice
    mark_conversation_tail(messages)
    if request.output is not None:
        # Structured outputs: the answer's text is JSON matching the schema.
        params["output_config"] = {"format": {"type": "json_schema", "schema": request.output.json_schema}}
    if request.thinking is not None:
        budget = request.thinking.anthropic_budget
        params["thinking"] = {"type": "enabled", "budget_tokens": budget}
        if params["max_tokens"] <= budget:
            # The budget counts against max_tokens: leave room for the answer.
            params["max_tokens"] = budget + DEFAULT_MAX_TOKENS
    if request.temperature is not None:
        params["extra_body"] = {"temperature": request.temperature}
    return params


def cache_breakpoint() -> dict[str, str]:
    """A prompt-cache breakpoint: ``{"type": "ephemeral"}`` (the default 5-minute TTL)."""
    return {"type": "ephemeral"}


def mark_conversation_tail(messages: list[dict[str, Any]]) -> None:
    """Put a cache breakpoint on the last cacheable block of the last message.

    The API caches everything up to and including a marked block, and looks
    back from a breakpoint for the longest prefix cached before, so marking
    the tail on every step caches the conversation incrementally. Only
    :data:`_CACHEABLE_BLOCKS` may carry ``cache_control`` (thinking blocks may
    not), so trailing thinking blocks are passed over; a last message with no
    cacheable block gets no breakpoint. ``messages`` is changed in place.
    """
    if not messages:
        return
    for block in reversed(messages[-1]["content"]):
        if block.get("type") in _CACHEABLE_BLOCKS:
            block["cache_control"] = cache_breakpoint()
            return


def to_anthropic_system(system_prompt: str, messages: list[Message]) -> str:
    """The ``system`` text: the system prompt, then any system messages' text.

    The Messages API has no system role inside the conversation, so system
    messages are moved here, in order, separated by blank lines.

    Raises:
        ValueError: A system message holds something other than text.
    """
    sections = [system_prompt] if system_prompt else []
    for index, message in enumerate(messages):
        if message.role != "system":
            continue
        if any(not isinstance(part, TextPart) for part in message.content):
            raise ValueError(f"message {index} (system): a system message can only hold text")
        if message.text:
            sections.append(message.text)
    return "\n\n".join(sections)


def to_anthropic_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Messages API messages for a conversation (system messages excluded).

    Tool results become ``tool_result`` blocks of a ``user`` message, first in
    it as the API requires. Consecutive messages of the same API role are
    merged, since the API wants turns to alternate. Thinking parts go back as
    ``thinking`` blocks when they carry Anthropic's signature (the API rejects
    unsigned ones); empty text is left out (the API rejects empty blocks), and
    so are messages left with no blocks.

    Raises:
        ValueError: A part in a role that cannot hold it (a tool call outside
            an assistant message, an image or tool result from the assistant)
            or an image the API cannot take.
    """
    converted: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if message.role == "system":
            continue
        try:
            blocks = _blocks(message)
        except ValueError as exc:
            raise ValueError(f"message {index} ({message.role}): {exc}") from None
        if not blocks:
            continue
        role = "assistant" if message.role == "assistant" else "user"
        if converted and converted[-1]["role"] == role:
            converted[-1]["content"].extend(blocks)
        else:
            converted.append({"role": role, "content": blocks})
    for turn in converted:
        if turn["role"] == "user":
            blocks = turn["content"]
            turn["content"] = [b for b in blocks if b["type"] == "tool_result"] + [
                b for b in blocks if b["type"] != "tool_result"
            ]
    return converted


def _blocks(message: Message) -> list[dict[str, Any]]:
    from_assistant = message.role == "assistant"
    blocks: list[dict[str, Any]] = []
    for part in message.content:
        match part:
            case TextPart():
                if part.text:
                    blocks.append({"type": "text", "text": part.text})
            case ThinkingPart():
                if from_assistant and part.signature:
                    blocks.append(
                        {"type": "thinking", "thinking": part.text, "signature": part.signature}
                    )
            case ImagePart():
                if from_assistant:
                    raise ValueError("the Messages API takes no images from the assistant")
                blocks.append({"type": "image", "source": anthropic_image_source(part)})
            case ToolCallPart():
                if not from_assistant:
                    raise ValueError("only assistant messages can hold tool calls")
                blocks.append(
                    {"type": "tool_use", "id": part.id, "name": part.name, "input": part.arguments}
                )
            case ToolResultPart():
                if from_assistant:
                    raise ValueError("an assistant message cannot hold tool results")
                result: dict[str, Any] = {"type": "tool_result", "tool_use_id": part.id}
                if part.images:
                    result["content"] = [*([{"type": "text", "text": part.content}] if part.content else []),
                                         *({"type": "image", "source": anthropic_image_source(image)}
                                           for image in part.images)]
                elif part.content:
                    result["content"] = part.content
                if part.is_error:
                    result["is_error"] = True
                blocks.append(result)
            case _:
                assert_never(part)
    return blocks


def anthropic_image_source(part: ImagePart) -> dict[str, Any]:
    """The ``source`` of an image block: base64 data, or a URL.

    ``data:`` URLs are unpacked into base64 sources, as the API fetches only
    http(s) URLs.

    Raises:
        ValueError: The part has neither URL nor data, data without a media
            type, or a ``data:`` URL that is not base64.
    """
    if part.data:
        if not part.media_type:
            raise ValueError("an image given as data needs a media_type (e.g. image/png)")
        return {"type": "base64", "media_type": part.media_type, "data": part.data}
    if part.url:
        if part.url.startswith("data:"):
            match = _DATA_URL.match(part.url)
            if match is None:
                raise ValueError("a data: image URL must be base64 (data:<type>;base64,...)")
            return {"type": "base64", "media_type": match["media_type"], "data": match["data"]}
        return {"type": "url", "url": part.url}
    raise ValueError("an image part needs a url or data")


def to_anthropic_tools(tools: list[ToolDefinition]) -> list[dict[str, Any]]:
    """Messages API tools for tool definitions."""
    return [tool_declaration(tool, "input_schema") for tool in tools]


# ---------------------------------------------------------------- responses


class _EventReader:
    """Feeds Messages API stream events to a
    :class:`~agentloop.activities.providers.streaming.StepAccumulator`.

    Content blocks arrive one at a time, by index: text, signed thinking and
    tool-use blocks become parts, in order; a tool call ends with its block.
    Redacted thinking and server-tool blocks have no part to go in and are
    left out (no server tools are offered). Usage comes in two halves: input
    counts in ``message_start``, cumulative output counts in ``message_delta``.
    """

    def __init__(self, accumulator: StepAccumulator) -> None:
        self.accumulator = accumulator
        self.events = 0
        self.model = ""
        self._tool_blocks: dict[int, str] = {}
        self._usage: dict[str, int] = {}

    def read(self, event: Any) -> None:
        self.events += 1
        accumulator = self.accumulator
        kind = getattr(event, "type", None)
        if kind == "message_start":
            self.model = event.message.model or ""
            self._count(event.message.usage)
        elif kind == "content_block_start":
            self._start_block(event.index, event.content_block)
        elif kind == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta":
                accumulator.add_text(delta.text)
            elif delta.type == "thinking_delta":
                accumulator.add_thinking(delta.thinking)
            elif delta.type == "signature_delta":
                accumulator.add_thinking_signature(delta.signature)
            elif delta.type == "input_json_delta" and event.index in self._tool_blocks:
                # (Server-tool blocks stream their input too; they are not ours to run.)
                accumulator.add_tool_arguments(self._tool_blocks[event.index], delta.partial_json)
        elif kind == "content_block_stop":
            call_id = self._tool_blocks.get(event.index)
            if call_id is not None:
                accumulator.end_tool_call(call_id)
            else:
                accumulator.end_part()
        elif kind == "message_delta":
            self._count(event.usage)
            raw = event.delta.stop_reason
            if raw is not None:
                accumulator.set_finish_reason(anthropic_finish_reason(raw), raw)
        # message_stop adds nothing; newer event types are ignored.

    def _start_block(self, index: int, block: Any) -> None:
        accumulator = self.accumulator
        accumulator.end_part()
        kind = getattr(block, "type", None)
        if kind == "text":
            accumulator.add_text(block.text or "")
        elif kind == "thinking":
            accumulator.add_thinking(block.thinking or "")
            accumulator.add_thinking_signature(block.signature or "")
        elif kind == "tool_use":
            self._tool_blocks[index] = block.id
            accumulator.start_tool_call(block.id, block.name)
            # The API starts with `input: {}` and streams the JSON; a proxy
            # may send it whole here instead.
            if block.input:
                accumulator.add_tool_arguments(block.id, json.dumps(block.input))

    def _count(self, usage: Any) -> None:
        for name in (
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
        ):
            value = getattr(usage, name, None)
            if isinstance(value, int):
                self._usage[name] = value
        # Passed on at once: input tokens are known from message_start, so
        # an attempt that breaks later still has its cost counted.
        self.accumulator.set_usage(anthropic_usage(**self._usage))

    def response(self) -> ModelResponse:
        accumulator = self.accumulator
        if accumulator.finish_reason is None:
            raise ANTHROPIC.stream_ended_early(f"no stop_reason after {self.events} events")
        if self._usage:
            accumulator.set_usage(anthropic_usage(**self._usage))
        return accumulator.finalize(model=self.model)


def anthropic_finish_reason(raw: str | None) -> FinishReason:
    """The normalised finish reason for Anthropic's ``stop_reason``."""
    return _FINISH_REASONS.get(raw or "", "other")


def anthropic_usage(
    *,
    input_tokens: int = 0,
    output_tokens: int = 0,
    cache_read_input_tokens: int = 0,
    cache_creation_input_tokens: int = 0,
) -> Usage:
    """:class:`Usage` of one call; input counts cache reads and writes too.

    Anthropic's ``input_tokens`` excludes cached tokens, unlike OpenAI's
    ``prompt_tokens``; adding them keeps ``input_tokens`` comparable.
    """
    return Usage(
        input_tokens=input_tokens + cache_read_input_tokens + cache_creation_input_tokens,
        output_tokens=output_tokens,
        cached_input_tokens=cache_read_input_tokens,
        requests=1,
    )


# ---------------------------------------------------------------- errors


#: Anthropic for the shared error mapping and client setup
#: (:mod:`~agentloop.activities.providers.provider_common`). Its 529 "overloaded" is a
#: server error like any 5xx; its SDK has no error code for an exhausted
#: quota, nor for a prompt too long, which only its message tells.
ANTHROPIC = Provider(
    name="Anthropic",
    key_variable="ANTHROPIC_API_KEY",
    base_url_variable="ANTHROPIC_BASE_URL",
    errors=SDKErrors.of(anthropic, base=anthropic.AnthropicError),
    # "prompt is too long: 212345 tokens > 200000 maximum", and the older
    # "input length and `max_tokens` exceed context limit: ...".
    context_length_message=re.compile(
        r"prompt is too long|exceeds? context limit|context window|maximum context length",
        re.IGNORECASE,
    ),
)


def map_anthropic_error(exc: BaseException, *, mid_stream: bool = False) -> ApplicationError:
    """The Temporal error for an Anthropic SDK failure, saying whether to retry.

    :meth:`Provider.map_error <agentloop.activities.providers.provider_common.Provider.map_error>`
    for :data:`ANTHROPIC`: HTTP 408, 409, 429 and 5xx (529 "overloaded"
    included), connection failures and timeouts are retryable, with the
    server's ``retry-after-ms``/``retry-after`` as the next delay. 401/403 and
    other 4xx are not; a prompt too long for the context window has its own
    type. Credentials are masked in every message.

    Args:
        exc: What the SDK raised (any exception is accepted).
        mid_stream: ``exc`` was raised while reading the answer's stream (the
            request itself was accepted): a dropped connection, or an
            ``error`` event such as ``overloaded_error``. Whatever it is, the
            answer is lost and the next attempt may well succeed.
    """
    return ANTHROPIC.map_error(exc, mid_stream=mid_stream)
