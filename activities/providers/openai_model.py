"""The OpenAI :class:`~agentloop.shared.definition.activity_io.ChatModel`, over Chat Completions.

Chat Completions is also what vLLM, llama.cpp, Ollama and LiteLLM serve, so
the same class reaches them when the worker's ``OPENAI_BASE_URL`` points at
one. Answers are always streamed (``stream=True`` with usage in the last
chunk): the chunks are read into a :class:`~agentloop.activities.providers.streaming.StepAccumulator`,
which passes deltas on as they come and builds the whole answer. Request
building (:func:`to_openai_request`) is a pure function.

The request goes through the SDK's client (its authentication, headers,
timeouts and error types) as the wire-format body :func:`to_openai_request`
already built, and the chunks come back as the JSON objects the server sent
(see :func:`open_stream`): under load, the SDK's generic request transform
and its per-chunk model construction took about a sixth of a worker's CPU.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Awaitable
from typing import Any, assert_never

import openai
from openai import AsyncOpenAI, AsyncStream
from temporalio.exceptions import ApplicationError

from agentloop.activities.providers.provider_common import Provider
from agentloop.activities.providers.sdk import SDKChatModel, SDKErrors, tool_declaration
from agentloop.activities.providers.streaming import StepAccumulator
from agentloop.shared.base.messages import ImagePart, Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from agentloop.shared.base.model_settings import openai_tool_choice
from agentloop.shared.base.usage import Usage
from agentloop.shared.definition.activity_io import (
    DeltaSink,
    FinishReason,
    ModelRequest,
    ModelResponse,
    ToolDefinition,
)

#: Output limit (``max_completion_tokens``) sent when the request sets none, as
#: Anthropic's provider does: without one, a local model that rambles on
#: generates until its context window is full (minutes per attempt, up to
#: ``llm_timeout_seconds``, then again on every retry) instead of stopping
#: with finish reason ``length``, which fails the run at once and names this
#: limit. The same value as ``ContextPolicy.reserve_output_tokens``. Reasoning
#: models count their reasoning in it: give them a larger ``AgentSpec.max_tokens``.
DEFAULT_MAX_TOKENS = 4096

#: Key sent to an ``OPENAI_BASE_URL`` server when ``OPENAI_API_KEY`` is unset:
#: local servers ignore it, and the SDK refuses to build a client without one.
LOCAL_SERVER_API_KEY = "agentloop-no-key"

_FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "content_filter",
}


def openai_client_from_env() -> AsyncOpenAI:
    """An ``AsyncOpenAI(max_retries=0)`` configured by the environment.

    Reads ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` as the SDK does. With
    only ``OPENAI_BASE_URL`` set (a local vLLM, llama.cpp or Ollama server),
    :data:`LOCAL_SERVER_API_KEY` is sent.

    Raises:
        ApplicationError: Non-retryable ``ModelConfigurationError`` when neither
            ``OPENAI_API_KEY`` nor ``OPENAI_BASE_URL`` is set, or the SDK
            rejects the configuration.
    """
    api_key = os.environ.get(OPENAI.key_variable) or None
    base_url = os.environ.get(OPENAI.base_url_variable) or None
    if api_key is None and base_url is None:
        raise OPENAI.missing_key()
    return OPENAI.client(AsyncOpenAI, api_key=api_key or LOCAL_SERVER_API_KEY, base_url=base_url)


class OpenAIChatModel(SDKChatModel[AsyncOpenAI]):
    """A :class:`~agentloop.shared.definition.activity_io.ChatModel` backed by OpenAI Chat Completions.

    Takes an ``AsyncOpenAI`` client, or builds one with
    :func:`openai_client_from_env` on the first call (see
    :class:`~agentloop.activities.providers.sdk.SDKChatModel`).
    """

    client_from_env = staticmethod(openai_client_from_env)

    async def complete(self, request: ModelRequest, on_delta: DeltaSink | None = None) -> ModelResponse:
        """Answer one request with one streamed Chat Completions call.

        Text, reasoning and tool-call progress go to ``on_delta`` as the
        chunks arrive; the whole answer is returned once the stream ends, with the
        ``max_completion_tokens`` the request was sent with (as ``max_tokens``).

        Raises:
            ApplicationError: Every failure, mapped by :func:`map_openai_error`
                (or ``ModelBadRequest`` when the conversation cannot be expressed
                in Chat Completions), so Temporal knows whether to retry. A
                stream that breaks, reports an error or ends before a
                ``finish_reason`` is a retryable ``ModelStreamBroken``.
        """
        try:
            params = to_openai_request(request)
        except ValueError as exc:
            raise OPENAI.unsendable(exc) from exc
        response = await OPENAI.stream_answer(open_stream(self.client, params), _ChunkReader(StepAccumulator(on_delta)))
        return response.model_copy(update={"max_tokens": params["max_completion_tokens"]})


# ---------------------------------------------------------------- requests


#: The Chat Completions endpoint, relative to the client's base URL.
CHAT_COMPLETIONS_PATH = "/chat/completions"


def open_stream(client: AsyncOpenAI, params: dict[str, Any]) -> Awaitable[AsyncStream[Any]]:
    """Open a streamed Chat Completions call for ``params`` (from
    :func:`to_openai_request`), usage in the last chunk.

    The SDK's ``client.post`` sends the body as built, where
    ``chat.completions.create`` would first walk it against the SDK's typed
    parameters (the body is already wire format, so that walk changes
    nothing); ``cast_to=object`` yields each chunk as the server's JSON object,
    not a pydantic model built field by field. Errors are the SDK's own
    (status, connection, timeout), so :func:`map_openai_error` maps them as before.
    """
    body = {**params, "stream": True, "stream_options": {"include_usage": True}}
    return client.post(CHAT_COMPLETIONS_PATH, body=body, cast_to=object, stream=True,
                       stream_cls=AsyncStream[Any])


def to_openai_request(request: ModelRequest) -> dict[str, Any]:
    """Keyword arguments of ``chat.completions.create`` for ``request`` (no ``stream``).

    The output limit goes in ``max_completion_tokens`` (the SDK marks
    ``max_tokens`` deprecated and reasoning models reject it; vLLM and
    llama.cpp's server read it too), :data:`DEFAULT_MAX_TOKENS` when the
    request sets none. Other optional settings are sent only when set, so the
    server's defaults apply otherwise.

    Raises:
        ValueError: The conversation holds something Chat Completions cannot
            express (see :func:`to_openai_messages`).
    """
    params: dict[str, Any] = {
        "model": request.model,
        "messages": to_openai_messages(request.system_prompt, request.messages),
    }
    if request.tools:
        params["tools"] = to_openai_tools(request.tools)
        # Only meaningful with tools; some servers reject it without them.
        params["parallel_tool_calls"] = request.parallel_tool_calls
        if request.tool_choice is not None:
            params["tool_choice"] = openai_tool_choice(request.tool_choice)
    if request.output is not None:
        params["response_format"] = {"type": "json_schema", "json_schema": {
            "name": request.output.name, "schema": request.output.json_schema, "strict": True}}
    if request.thinking is not None:
        params["reasoning_effort"] = request.thinking.openai_effort
    if request.temperature is not None:
        params["temperature"] = request.temperature
    params["max_completion_tokens"] = request.max_tokens if request.max_tokens is not None else DEFAULT_MAX_TOKENS
    return params


def to_openai_messages(system_prompt: str, messages: list[Message]) -> list[dict[str, Any]]:
    """Chat Completions messages for a system prompt and a conversation.

    Each tool result becomes its own ``role: tool`` message (Chat Completions
    has no other place for it), placed before any other content of the same
    message so results directly follow the assistant's calls. Thinking parts
    are dropped: Chat Completions takes no reasoning back.

    Args:
        system_prompt: Sent first as a ``system`` message, unless empty.
        messages: The conversation.

    Raises:
        ValueError: A part in a role that cannot hold it (a tool call outside
            an assistant message, an image from the assistant, text in a
            ``tool`` message) or an image with neither URL nor data.
    """
    converted: list[dict[str, Any]] = []
    if system_prompt:
        converted.append({"role": "system", "content": system_prompt})
    for index, message in enumerate(messages):
        try:
            converted.extend(_convert_message(message))
        except ValueError as exc:
            raise ValueError(f"message {index} ({message.role}): {exc}") from None
    return converted


def _convert_message(message: Message) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    tool_calls: list[dict[str, Any]] = []
    tool_messages: list[dict[str, Any]] = []
    tool_images: list[dict[str, Any]] = []
    for part in message.content:
        match part:
            case TextPart():
                content.append({"type": "text", "text": part.text})
            case ImagePart():
                content.append({"type": "image_url", "image_url": {"url": image_url(part)}})
            case ThinkingPart():
                pass
            case ToolCallPart():
                tool_calls.append(
                    {
                        "id": part.id,
                        "type": "function",
                        "function": {"name": part.name, "arguments": json.dumps(part.arguments)},
                    }
                )
            case ToolResultPart():
                tool_messages.append(
                    {"role": "tool", "tool_call_id": part.id, "content": part.content}
                )
                tool_images.extend(
                    {"type": "image_url", "image_url": {"url": image_url(image)}} for image in part.images
                )
            case _:
                assert_never(part)

    has_images = any(c["type"] == "image_url" for c in content)
    role = message.role
    if tool_calls and role != "assistant":
        raise ValueError("only assistant messages can hold tool calls")
    if tool_messages and role in ("assistant", "system"):
        raise ValueError(f"a {role} message cannot hold tool results")

    if role == "assistant":
        if has_images:
            raise ValueError("Chat Completions takes no images from the assistant")
        text = "".join(c["text"] for c in content)
        assistant: dict[str, Any] = {"role": "assistant", "content": text}
        if tool_calls:
            # null, not "", is how the API itself writes a calls-only message.
            assistant["content"] = text or None
            assistant["tool_calls"] = tool_calls
        return [assistant]
    if role == "system":
        if has_images:
            raise ValueError("a system message can only hold text")
        return [{"role": "system", "content": "".join(c["text"] for c in content)}]
    if tool_images:
        # A tool message takes text only: the images the tools returned
        # follow in a user message, right after the results.
        tool_messages.append({"role": "user", "content": [
            {"type": "text", "text": "The images the tool results above refer to:"}, *tool_images]})
    if role == "tool":
        if content:
            raise ValueError("a tool message can only hold tool results")
        return tool_messages
    if role == "user":
        if tool_messages and not content:
            return tool_messages
        user_content: str | list[dict[str, Any]]
        if len(content) == 1 and content[0]["type"] == "text":
            # A plain string is what every OpenAI-compatible server understands.
            user_content = content[0]["text"]
        elif not content:
            user_content = ""
        else:
            user_content = content
        return [*tool_messages, {"role": "user", "content": user_content}]
    assert_never(role)


def image_url(part: ImagePart) -> str:
    """The URL Chat Completions takes for an image: its own, or a ``data:`` URL.

    Raises:
        ValueError: The part has neither, or data without a media type.
    """
    if part.data:
        if not part.media_type:
            raise ValueError("an image given as data needs a media_type (e.g. image/png)")
        return f"data:{part.media_type};base64,{part.data}"
    if part.url:
        return part.url
    raise ValueError("an image part needs a url or data")


def to_openai_tools(tools: list[ToolDefinition]) -> list[dict[str, Any]]:
    """Chat Completions function tools for tool definitions."""
    return [{"type": "function", "function": tool_declaration(tool, "parameters")} for tool in tools]


# ---------------------------------------------------------------- responses


class _ChunkReader:
    """Feeds Chat Completions stream chunks (of the first choice), as the
    server's JSON objects, to a :class:`~agentloop.activities.providers.streaming.StepAccumulator`.

    A tool call is keyed by its ``index``: its first chunk carries the id and
    name, later ones pieces of the arguments. A refusal is kept as text and
    reported as ``content_filter``. Reasoning that some compatible servers
    stream (``reasoning_content`` or ``reasoning``) becomes thinking. Read
    leniently, as compatible servers differ: a field that is missing, null or
    of the wrong shape counts as absent.
    """

    def __init__(self, accumulator: StepAccumulator) -> None:
        self.accumulator = accumulator
        self.chunks = 0
        self.model = ""
        self.refused = False
        self._call_ids: dict[int | str, str] = {}
        self._last_call: int | str | None = None

    def read(self, chunk: Any) -> None:
        self.chunks += 1
        if not isinstance(chunk, dict):
            return
        model = chunk.get("model")
        if isinstance(model, str) and model:
            self.model = model
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.accumulator.set_usage(openai_usage(usage))
        for choice in _dicts(chunk.get("choices")):
            # Only one choice is asked for; servers that omit its index mean it.
            if choice.get("index") not in (0, None):
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                self._read_delta(_text(chunk.get("id")), delta)
            if choice.get("finish_reason") is not None:
                raw = str(choice["finish_reason"])
                self.accumulator.set_finish_reason(openai_finish_reason(raw), raw)

    def _read_delta(self, chunk_id: str, delta: dict[str, Any]) -> None:
        accumulator = self.accumulator
        accumulator.add_thinking(_reasoning_text(delta))
        accumulator.add_text(_text(delta.get("content")))
        refusal = _text(delta.get("refusal"))
        if refusal:
            self.refused = True
            accumulator.add_text(refusal)
        for call in _dicts(delta.get("tool_calls")):
            key = self._call_key(call)
            function = call.get("function")
            function = function if isinstance(function, dict) else {}
            call_id = self._call_ids.get(key)
            if call_id is None:
                # A server that sends no id still needs one for the result to
                # answer; the chunk id keeps it unique across steps.
                call_id = _text(call.get("id")) or f"{chunk_id or 'call'}_{key}"
                self._call_ids[key] = call_id
                accumulator.start_tool_call(call_id, _text(function.get("name")))
            arguments = _text(function.get("arguments"))
            if arguments:
                accumulator.add_tool_arguments(call_id, arguments)

    def _call_key(self, call: dict[str, Any]) -> int | str:
        # A server that omits `index` sends each call whole, or its id once
        # and then pieces.
        index = call.get("index")
        key: int | str | None = index if isinstance(index, int) and not isinstance(index, bool) else None
        if key is None:
            call_id = _text(call.get("id"))
            if call_id and call_id not in self._call_ids.values():
                key = call_id
            else:
                key = self._last_call if self._last_call is not None else 0
        self._last_call = key
        return key

    def response(self) -> ModelResponse:
        accumulator = self.accumulator
        if accumulator.finish_reason is None:
            raise OPENAI.stream_ended_early(f"no finish_reason after {self.chunks} chunks")
        if self.refused and accumulator.finish_reason == "stop":
            accumulator.set_finish_reason("content_filter", accumulator.raw_finish_reason)
        return accumulator.finalize(model=self.model)


def _dicts(value: Any) -> list[dict[str, Any]]:
    """The objects of a JSON list (none when it is not one)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _text(value: Any) -> str:
    """A JSON string field ("" when absent or not a string)."""
    return value if isinstance(value, str) else ""


def openai_finish_reason(raw: str | None) -> FinishReason:
    """The normalised finish reason for OpenAI's ``finish_reason``."""
    return _FINISH_REASONS.get(raw or "", "other")


def openai_usage(usage: dict[str, Any] | None) -> Usage:
    """:class:`Usage` of one call from OpenAI's usage block (zeros when absent)."""
    if not usage:
        return Usage(requests=1)
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return Usage(
        input_tokens=_count(usage.get("prompt_tokens")),
        output_tokens=_count(usage.get("completion_tokens")),
        cached_input_tokens=_count(cached),
        requests=1,
    )


def _count(value: Any) -> int:
    """A token count from a usage field (0 when absent or not a number)."""
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _reasoning_text(delta: dict[str, Any]) -> str:
    for name in ("reasoning_content", "reasoning"):
        value = delta.get(name)
        if isinstance(value, str) and value:
            return value
    return ""


# ---------------------------------------------------------------- errors


#: OpenAI as the shared error mapping and client setup see it
#: (:mod:`~agentloop.activities.providers.provider_common`); vLLM, llama.cpp, Ollama and
#: LiteLLM servers answer through the same SDK and are mapped alike.
OPENAI = Provider(
    name="OpenAI",
    key_variable="OPENAI_API_KEY",
    base_url_variable="OPENAI_BASE_URL",
    errors=SDKErrors.of(openai, base=openai.OpenAIError),
    # OpenAI sends code=context_length_exceeded; vLLM and most proxies only say
    # "maximum context length" in the message; llama.cpp uses exceed_context_size_error.
    context_length_codes=frozenset({"context_length_exceeded", "exceed_context_size_error"}),
    context_length_message=re.compile(
        r"maximum context length|context length exceeded|context[_ ]length[_ ]exceeded"
        r"|exceeds? the available context size|context window",
        re.IGNORECASE,
    ),
    # A 429 for an exhausted quota: waiting does not refill it.
    quota_codes=frozenset({"insufficient_quota"}),
    access_scope="this model and endpoint",
    missing_key_hint=", or set OPENAI_BASE_URL to use an OpenAI-compatible server",
)


def map_openai_error(exc: BaseException, *, mid_stream: bool = False) -> ApplicationError:
    """The Temporal error for an OpenAI SDK failure, saying whether to retry.

    :meth:`Provider.map_error <agentloop.activities.providers.provider_common.Provider.map_error>`
    for :data:`OPENAI`: HTTP 408, 409, 429 and 5xx, connection failures and
    timeouts are retryable, with the server's ``retry-after-ms``/``retry-after``
    as the next delay. Rate limits that are an exhausted quota
    (``insufficient_quota``) are not: waiting does not refill them. 401/403
    and other 4xx are not retryable; a context-length error (by code or by
    message, as vLLM and llama.cpp word it) has its own type. Credentials are
    masked in every message.

    Args:
        exc: What the SDK raised (any exception is accepted).
        mid_stream: ``exc`` was raised while reading the answer's stream (the
            request itself was accepted): whatever it is, the answer is lost
            and the next attempt may well succeed.
    """
    return OPENAI.map_error(exc, mid_stream=mid_stream)
