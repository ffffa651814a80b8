"""One adapter per provider, so the provider contract tests are written once.

A :class:`ProviderCase` says how to build a provider's model on the real SDK
against its local server (:mod:`tests.helpers.servers.provider_servers`), how to
script that server in the provider's wire format, how to read the request it
received, and how to build the SDK's own exceptions (for the error mapping
tested without a server). The tests parametrize over :data:`CASES`::

    async def test_text(provider, server, model):
        server.enqueue(provider.reply(text="Hi"))
        response = await model.complete(provider.request())

A stream is scripted as a list of pieces, each a tuple, that each adapter
writes in its own events:

- ``("text", "Hel")``, ``("thinking", "6 times ")``: a delta of the answer
  text or of the model's reasoning;
- ``("call", "call_a", "get_weather")``: a tool call starts;
- ``("args", "call_a", '{"ci')``: a piece of that call's arguments;
- ``("error", "server_error", "message")``: the provider's error event.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from anthropic import AsyncAnthropic
from openai import AsyncOpenAI

from agentloop.activities.providers import anthropic_model, openai_model
from agentloop.activities.providers.models import ModelResolver
from agentloop.activities.providers.provider_common import Provider
from agentloop.shared.base.messages import ImagePart, Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from agentloop.shared.definition.activity_io import ModelRequest, StreamDelta, ToolDefinition
from tests.helpers.servers.provider_servers import (
    AnthropicServer,
    OpenAIServer,
    ScriptedHTTPServer,
    ScriptedResponse,
    anthropic_error_body,
    anthropic_message,
    anthropic_message_events,
    anthropic_models,
    anthropic_stream,
    openai_chunk,
    openai_completion,
    openai_error_body,
    openai_models,
    openai_stream,
    openai_tool_call,
    openai_usage,
    rechunk,
    slow_anthropic_stream,
    slow_openai_stream,
)

__all__ = [
    "ANTHROPIC_CASE",
    "CASES",
    "OPENAI_CASE",
    "WEATHER_TOOL",
    "AnthropicCase",
    "Deltas",
    "OpenAICase",
    "ProviderCase",
    "reset_by_peer",
    "whole_conversation",
]

#: A tool call as tests script it: id, name and the raw arguments text.
Call = tuple[str, str, str]


WEATHER_TOOL = ToolDefinition(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def whole_conversation(model: str) -> ModelRequest:
    """A request with all a conversation can hold: a system prompt; an
    assistant turn with signed and unsigned thinking, text and two tool
    calls; their results, one an error; a user's text and images by URL and
    by data; a tool; and every option set."""
    return ModelRequest(
        model=model,
        system_prompt="You are terse.",
        messages=[
            Message.user("Weather in Paris and Oslo?"),
            Message(
                role="assistant",
                content=[
                    ThinkingPart(text="Two calls.", signature="EqQBCkYIARgC"),
                    ThinkingPart(text="unsigned, so not sent back"),
                    TextPart(text="Checking."),
                    ToolCallPart(id="call_1", name="get_weather", arguments={"city": "Paris"}),
                    ToolCallPart(id="call_2", name="get_weather", arguments={"city": "Oslo"}),
                ],
            ),
            Message(
                role="tool",
                content=[
                    ToolResultPart(id="call_1", name="get_weather", content="sunny, 24C"),
                    ToolResultPart(id="call_2", name="get_weather", content="timeout", is_error=True),
                ],
            ),
            Message(
                role="user",
                content=[
                    TextPart(text="And these pictures?"),
                    ImagePart(url="https://example.com/cat.png"),
                    ImagePart(data="iVBORw0KGgo=", media_type="image/png"),
                ],
            ),
        ],
        tools=[WEATHER_TOOL],
        temperature=0.2,
        max_tokens=256,
        parallel_tool_calls=False,
    )


@dataclass(frozen=True)
class Answer:
    """A whole answer to script (see :meth:`ProviderCase.reply`)."""

    text: str | None
    thinking: str | None
    calls: list[Call]
    raw_finish: str
    input_tokens: int
    output_tokens: int
    cached_tokens: int | None
    model: str | None


@dataclass(frozen=True)
class StreamEnd:
    """How a scripted stream ends (see :meth:`ProviderCase.stream`):
    ``raw_finish`` None for a stream that stops without a finish."""

    raw_finish: str | None
    input_tokens: int
    output_tokens: int
    cached_tokens: int


def reset_by_peer(request: httpx2.Request | None) -> httpx2.ReadError:
    """A connection reset as httpx2 raises it: no text of its own, the
    reason deep in its causes."""
    error = httpx2.ReadError("", request=request) if request is not None else httpx2.ReadError("")
    try:
        try:
            raise ConnectionResetError(104, "Connection reset by peer")
        except ConnectionResetError as reset:
            raise error from reset
    except httpx2.ReadError as raised:
        return raised


class Deltas:
    """An ``on_delta`` sink that records what it is given."""

    def __init__(self) -> None:
        self.received: list[StreamDelta] = []
        self.usage: list[Any] = []  # usage reported so far, in order (kept apart from content)

    def __call__(self, delta: StreamDelta) -> None:
        if delta.kind == "usage":
            self.usage.append(delta.usage)
        else:
            self.received.append(delta)

    def text(self, kind: str = "text") -> str:
        return "".join(d.text for d in self.received if d.kind == kind)

    def arguments(self, call_id: str) -> str:
        return "".join(d.text for d in self.received if d.kind == "tool_call_delta" and d.call_id == call_id)

    def kinds(self) -> list[str]:
        return [d.kind for d in self.received]


@dataclass(frozen=True)
class ProviderCase(abc.ABC):
    """What the contract tests need to know of one provider.

    Attributes:
        id: The test id and the ``provider:`` prefix of a spec's model.
        provider: The application's description of the provider.
        sdk: The SDK module (its exception classes).
        model_class: The ChatModel class.
        map_error: The provider's public error mapping function.
        default_max_tokens: The output limit sent when the request sets none.
        api_key: The key the tests' clients send.
        model_name: The model the tests' requests name.
        endpoint: The path the SDK posts to.
        public_api: The base URL of the provider's own API.
        limit_field: The request field that carries the output limit.
        key_header: The request header that carries the key.
        request_id_header: The response header that carries the request id.
        raw_finish: The provider's words for ``stop``, ``tool_calls`` and ``length``.
        missing_finish: What the error of a stream without an end names.
        error_event_type: The type of the error event a stream sends.
    """

    id: str
    provider: Provider
    sdk: ModuleType
    model_class: type[Any]
    map_error: Callable[..., Any]
    default_max_tokens: int
    api_key: str
    model_name: str
    endpoint: str
    public_api: str
    limit_field: str
    key_header: str
    request_id_header: str
    raw_finish: dict[str, str]
    missing_finish: str
    error_event_type: str

    @property
    def name(self) -> str:
        return self.provider.name

    @property
    def url(self) -> str:
        """The public endpoint's URL (SDK exceptions built without a server carry it)."""
        return self.public_api.removesuffix("/v1") + self.endpoint

    def __repr__(self) -> str:
        return self.id

    # ------------------------------------------------------------ client and model

    @abc.abstractmethod
    def server(self) -> ScriptedHTTPServer:
        ...

    @abc.abstractmethod
    def sdk_base_url(self, origin: str) -> str:
        """The base URL an SDK client is given for a server at ``origin``."""
        ...

    @abc.abstractmethod
    def client(self, base_url: str, api_key: str | None = None) -> Any:
        ...

    def model(self, client: Any) -> Any:
        return self.model_class(client)

    @abc.abstractmethod
    def models(self, server: Any) -> ModelResolver:
        """A worker's ModelResolver whose models of this provider are served by ``server``."""
        ...

    def spec_model(self) -> str:
        return f"{self.id}:{self.model_name}"

    def request(self, **overrides: Any) -> ModelRequest:
        fields: dict[str, Any] = {"model": self.model_name, "messages": [Message.user("Hello")]}
        fields.update(overrides)
        return ModelRequest(**fields)

    def clean_env(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Remove the developer's own configuration of this provider."""
        prefix = self.provider.key_variable.split("_", 1)[0] + "_"
        for name in list(os.environ):
            if name.startswith(prefix):
                monkeypatch.delenv(name)

    # ------------------------------------------------------------ scripting answers

    def reply(
        self,
        *,
        text: str | None = None,
        thinking: str | None = None,
        calls: list[Call] | None = None,
        finish: str | None = None,
        raw_finish: str | None = None,
        input_tokens: int = 11,
        output_tokens: int = 7,
        cached_tokens: int | None = None,
        model: str | None = None,
    ) -> ScriptedResponse:
        """A whole answer, which the server streams as the provider would.

        Args:
            finish: The normalised reason (``stop``, ``tool_calls``, ``length``);
                by default ``tool_calls`` with calls, else ``stop``.
            raw_finish: The provider's own reason, sent as is.
            input_tokens: All input tokens, cached ones included.
            cached_tokens: Of those, read from the provider's cache.
        """
        if raw_finish is None:
            raw_finish = self.raw_finish[finish or ("tool_calls" if calls else "stop")]
        answer = Answer(text, thinking, list(calls or []), raw_finish, input_tokens, output_tokens, cached_tokens,
                        model)
        return ScriptedResponse(json_body=self.answer_body(answer))

    @abc.abstractmethod
    def answer_body(self, answer: Answer) -> dict[str, Any]:
        """The provider's whole response body for ``answer``."""
        ...

    @abc.abstractmethod
    def thinking_part(self, text: str) -> ThinkingPart:
        """The part a :meth:`reply` with ``thinking`` gives."""
        ...

    def stream(
        self,
        pieces: list[tuple[str, ...]],
        *,
        finish: str | None = "stop",
        input_tokens: int = 13,
        output_tokens: int = 5,
        cached_tokens: int = 0,
        break_stream: bool = False,
        reset_stream: bool = False,
        chunk_size: int | None = None,
    ) -> ScriptedResponse:
        """A stream of ``pieces`` (see the module's docstring) in the
        provider's events, ended with ``finish`` (the normalised reason; None
        for a stream that stops without one) and the usage.

        Args:
            chunk_size: Cut the bytes into pieces of this size, across event
                boundaries, as TCP may deliver them.
        """
        raw_finish = None if finish is None else self.raw_finish[finish]
        end = StreamEnd(raw_finish, input_tokens, output_tokens, cached_tokens)
        streamed = self.stream_response(pieces, end, break_stream=break_stream, reset_stream=reset_stream)
        if chunk_size:
            streamed.body_chunks = rechunk(list(streamed.body_chunks or []), chunk_size)
        return streamed

    @abc.abstractmethod
    def stream_response(
        self, pieces: list[tuple[str, ...]], end: StreamEnd, *, break_stream: bool, reset_stream: bool
    ) -> ScriptedResponse:
        """The provider's stream of ``pieces``, ended as ``end`` says."""
        ...

    @abc.abstractmethod
    def slow_stream(self, *, seconds: float) -> ScriptedResponse:
        """A stream of text, one piece every 0.2 s for ``seconds``."""
        ...

    # ------------------------------------------------------------ scripting errors

    @abc.abstractmethod
    def error_body(self, message: str, *, type: str = "invalid_request_error") -> Any:
        ...

    def error(
        self, status: int, message: str, *, type: str = "invalid_request_error", headers: dict[str, str] | None = None
    ) -> ScriptedResponse:
        """An HTTP error with the provider's error body."""
        return ScriptedResponse(status=status, headers=dict(headers or {}),
                                json_body=self.error_body(message, type=type))

    @abc.abstractmethod
    def context_length_error(self) -> tuple[ScriptedResponse, str]:
        """A 400 saying the conversation does not fit, in a wording this
        provider (or a server speaking its API) uses, and a part of that wording."""
        ...

    # ------------------------------------------------------------ SDK exceptions

    def sdk_request(self, key: str | None = None) -> httpx2.Request:
        """A request to the public API as the SDK sends it, with the key."""
        return httpx2.Request("POST", self.url, headers={self.key_header: self.key_value(key or self.api_key)})

    def key_value(self, key: str) -> str:
        return f"Bearer {key}" if self.key_header == "authorization" else key

    def status_error(
        self, status: int, message: str = "nope", *, headers: dict[str, str] | None = None, **error: Any
    ) -> Exception:
        """The SDK's exception for an HTTP error status, as the SDK builds it."""
        body = self.status_error_body(message, error)
        response = httpx2.Response(status, request=self.sdk_request(), headers=headers or {}, json=body)
        return self.sdk.APIStatusError(f"Error code: {status}", response=response, body=body)

    @abc.abstractmethod
    def status_error_body(self, message: str, error: dict[str, Any]) -> Any:
        ...

    @abc.abstractmethod
    def error_event(self, error_type: str, message: str) -> Exception:
        """What the SDK raises for an ``error`` event in a stream."""
        ...


class OpenAICase(ProviderCase):
    def server(self) -> OpenAIServer:
        return OpenAIServer()

    def sdk_base_url(self, origin: str) -> str:
        return f"{origin}/v1"

    def client(self, base_url: str, api_key: str | None = None) -> AsyncOpenAI:
        return AsyncOpenAI(api_key=api_key or self.api_key, base_url=base_url, max_retries=0)

    def models(self, server: Any) -> ModelResolver:
        return openai_models(server)

    def answer_body(self, answer: Answer) -> dict[str, Any]:
        return openai_completion(
            content=answer.text,
            tool_calls=[openai_tool_call(*call) for call in answer.calls],
            finish_reason=answer.raw_finish,
            prompt_tokens=answer.input_tokens,
            completion_tokens=answer.output_tokens,
            cached_tokens=answer.cached_tokens,
            extra_message_fields={"reasoning_content": answer.thinking} if answer.thinking else None,
            **({"model": answer.model} if answer.model else {}),
        )

    def thinking_part(self, text: str) -> ThinkingPart:
        return ThinkingPart(text=text)

    def stream_response(
        self, pieces: list[tuple[str, ...]], end: StreamEnd, *, break_stream: bool, reset_stream: bool
    ) -> ScriptedResponse:
        chunks: list[dict[str, Any]] = [openai_chunk({"role": "assistant", "content": ""})]
        indexes: dict[str, int] = {}
        for kind, *rest in pieces:
            if kind == "text":
                chunks.append(openai_chunk({"content": rest[0]}))
            elif kind == "thinking":
                chunks.append(openai_chunk({"reasoning_content": rest[0]}))
            elif kind == "call":
                call_id, name = rest
                indexes[call_id] = len(indexes)
                start = {"index": indexes[call_id], "id": call_id, "type": "function",
                         "function": {"name": name, "arguments": ""}}
                chunks.append(openai_chunk({"tool_calls": [start]}))
            elif kind == "args":
                call_id, fragment = rest
                chunks.append(openai_chunk(
                    {"tool_calls": [{"index": indexes[call_id], "function": {"arguments": fragment}}]}))
            elif kind == "error":
                chunks.append({"error": {"message": rest[1], "type": rest[0]}})
            else:
                raise ValueError(f"unknown piece {kind!r}")
        if end.raw_finish is not None:
            chunks.append(openai_chunk({}, finish_reason=end.raw_finish))
            usage = openai_usage(end.input_tokens, end.output_tokens, end.cached_tokens)
            chunks.append(openai_chunk(choices=False, usage=usage))
        done = end.raw_finish is not None
        return openai_stream(chunks, done=done, break_stream=break_stream, reset_stream=reset_stream)

    def slow_stream(self, *, seconds: float) -> ScriptedResponse:
        return slow_openai_stream(seconds=seconds)

    def error_body(self, message: str, *, type: str = "invalid_request_error") -> Any:
        return openai_error_body(message, type=type)

    def context_length_error(self) -> tuple[ScriptedResponse, str]:
        # vLLM's wording, without a code.
        body = {
            "object": "error",
            "message": "This model's maximum context length is 4096 tokens. However, you "
            "requested 5000 tokens in the messages.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
        return ScriptedResponse(status=400, json_body=body), "maximum context length is 4096"

    def status_error_body(self, message: str, error: dict[str, Any]) -> Any:
        return {"message": message, **error}  # the OpenAI SDK keeps the inner object

    def error_event(self, error_type: str, message: str) -> Exception:
        return openai.APIError(message, self.sdk_request(), body={"type": error_type, "message": message})


class AnthropicCase(ProviderCase):
    def server(self) -> AnthropicServer:
        return AnthropicServer()

    def sdk_base_url(self, origin: str) -> str:
        return origin

    def client(self, base_url: str, api_key: str | None = None) -> AsyncAnthropic:
        return AsyncAnthropic(api_key=api_key or self.api_key, base_url=base_url, max_retries=0)

    def models(self, server: Any) -> ModelResolver:
        return anthropic_models(server)

    def answer_body(self, answer: Answer) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if answer.thinking:
            content.append({"type": "thinking", "thinking": answer.thinking, "signature": "sig-think"})
        if answer.text:
            content.append({"type": "text", "text": answer.text})
        # A string input is streamed as is (see anthropic_block_events).
        content += [{"type": "tool_use", "id": i, "name": n, "input": raw} for i, n, raw in answer.calls]
        return anthropic_message(
            content,
            stop_reason=answer.raw_finish,
            # Anthropic counts cache reads apart from input_tokens.
            input_tokens=answer.input_tokens - (answer.cached_tokens or 0),
            output_tokens=answer.output_tokens,
            cache_read_input_tokens=answer.cached_tokens,
            **({"model": answer.model} if answer.model else {}),
        )

    def thinking_part(self, text: str) -> ThinkingPart:
        return ThinkingPart(text=text, signature="sig-think")

    def stream_response(
        self, pieces: list[tuple[str, ...]], end: StreamEnd, *, break_stream: bool, reset_stream: bool
    ) -> ScriptedResponse:
        start = anthropic_message(
            [], input_tokens=end.input_tokens - end.cached_tokens, cache_read_input_tokens=end.cached_tokens
        )
        events: list[dict[str, Any]] = [anthropic_message_events(start)[0], {"type": "ping"}]
        index, open_kind = -1, None

        def open_block(kind: str, block: dict[str, Any]) -> None:
            nonlocal index, open_kind
            if open_kind is not None:
                events.append({"type": "content_block_stop", "index": index})
            index, open_kind = index + 1, kind
            events.append({"type": "content_block_start", "index": index, "content_block": block})

        def delta(payload: dict[str, Any]) -> None:
            events.append({"type": "content_block_delta", "index": index, "delta": payload})

        for kind, *rest in pieces:
            if kind == "text":
                if open_kind != "text":
                    open_block("text", {"type": "text", "text": ""})
                delta({"type": "text_delta", "text": rest[0]})
            elif kind == "thinking":
                if open_kind != "thinking":
                    open_block("thinking", {"type": "thinking", "thinking": "", "signature": ""})
                delta({"type": "thinking_delta", "thinking": rest[0]})
            elif kind == "call":
                call_id, name = rest
                open_block("tool_use", {"type": "tool_use", "id": call_id, "name": name, "input": {}})
                delta({"type": "input_json_delta", "partial_json": ""})
            elif kind == "args":
                delta({"type": "input_json_delta", "partial_json": rest[1]})
            elif kind == "error":
                events.append({"type": "error", "error": {"type": rest[0], "message": rest[1]}})
            else:
                raise ValueError(f"unknown piece {kind!r}")
        if end.raw_finish is not None:
            if open_kind is not None:
                events.append({"type": "content_block_stop", "index": index})
            events.append(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": end.raw_finish, "stop_sequence": None},
                    "usage": {"output_tokens": end.output_tokens},
                }
            )
            events.append({"type": "message_stop"})
        return anthropic_stream(events, break_stream=break_stream, reset_stream=reset_stream)

    def slow_stream(self, *, seconds: float) -> ScriptedResponse:
        return slow_anthropic_stream(seconds=seconds)

    def error_body(self, message: str, *, type: str = "invalid_request_error") -> Any:
        return anthropic_error_body(type, message)

    def context_length_error(self) -> tuple[ScriptedResponse, str]:
        body = anthropic_error_body("invalid_request_error", "prompt is too long: 212345 tokens > 200000 maximum")
        return ScriptedResponse(status=400, json_body=body), "212345 tokens"

    def status_error_body(self, message: str, error: dict[str, Any]) -> Any:
        return {"type": "error", "error": {"message": message, **error}}

    def error_event(self, error_type: str, message: str) -> Exception:
        # Anthropic's SDK raises it as a status error of the (200) response.
        body = {"type": "error", "error": {"type": error_type, "message": message}}
        response = httpx2.Response(200, request=self.sdk_request(), json=body)
        return anthropic.APIStatusError(str(body), response=response, body=body)


OPENAI_CASE = OpenAICase(
    id="openai",
    provider=openai_model.OPENAI,
    sdk=openai,
    model_class=openai_model.OpenAIChatModel,
    map_error=openai_model.map_openai_error,
    default_max_tokens=openai_model.DEFAULT_MAX_TOKENS,
    api_key="sk-test-Secret0123456789abcdefXYZ",
    model_name="gpt-test",
    endpoint="/v1/chat/completions",
    public_api="https://api.openai.com/v1",
    limit_field="max_completion_tokens",
    key_header="authorization",
    request_id_header="x-request-id",
    raw_finish={"stop": "stop", "tool_calls": "tool_calls", "length": "length"},
    missing_finish="no finish_reason",
    error_event_type="server_error",
)

ANTHROPIC_CASE = AnthropicCase(
    id="anthropic",
    provider=anthropic_model.ANTHROPIC,
    sdk=anthropic,
    model_class=anthropic_model.AnthropicChatModel,
    map_error=anthropic_model.map_anthropic_error,
    default_max_tokens=anthropic_model.DEFAULT_MAX_TOKENS,
    api_key="sk-ant-api03-Secret0123456789abcdefXYZ",
    model_name="claude-test",
    endpoint="/v1/messages",
    public_api="https://api.anthropic.com",
    limit_field="max_tokens",
    key_header="x-api-key",
    request_id_header="request-id",
    raw_finish={"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"},
    missing_finish="no stop_reason",
    error_event_type="overloaded_error",
)

CASES = [OPENAI_CASE, ANTHROPIC_CASE]

