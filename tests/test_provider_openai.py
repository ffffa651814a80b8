"""OpenAIChatModel against a local server speaking Chat Completions over real HTTP."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from openai import AsyncOpenAI
from temporalio.exceptions import ApplicationError

from agentloop import AgentRunFailed, AgentSpec, OutputLimitReached
from agentloop.activities.http_headers import (
    credential_values,
    error_body_message,
    redact,
    retry_after_delay,
)
from agentloop.activities.models import ModelResolver
from agentloop.workers.devserver import DevServer
from agentloop.activities.openai_model import (
    DEFAULT_MAX_TOKENS,
    LOCAL_SERVER_API_KEY,
    OpenAIChatModel,
    map_openai_error,
    to_openai_messages,
    to_openai_request,
    to_openai_tools,
)
from agentloop.shared.activity_io import DeltaSink, ModelRequest, StreamDelta, ToolDefinition
from agentloop.shared.messages import (
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from agentloop.shared.report import Usage
from agentloop.activities.streaming import parse_tool_arguments
from tests.helpers.provider_servers import (
    ErrorsSeen,
    OpenAIServer,
    ScriptedResponse,
    openai_chunk,
    openai_completion,
    openai_error_body,
    openai_models,
    openai_stream,
    openai_tool_call,
    openai_usage,
    rechunk,
    sse_event,
    unused_port,
)

API_KEY = "sk-test-Secret0123456789abcdefXYZ"

WEATHER_TOOL = ToolDefinition(
    name="get_weather",
    description="Current weather for a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)


@pytest.fixture(autouse=True)
def clean_openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OPENAI_ORG_ID",
        "OPENAI_PROJECT_ID",
        "OPENAI_ADMIN_KEY",
        "OPENAI_CUSTOM_HEADERS",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as running:
        yield running


@pytest.fixture
async def client(server: OpenAIServer) -> AsyncIterator[AsyncOpenAI]:
    sdk = AsyncOpenAI(api_key=API_KEY, base_url=server.base_url, max_retries=0)
    yield sdk
    await sdk.close()


@pytest.fixture
def model(client: AsyncOpenAI) -> OpenAIChatModel:
    return OpenAIChatModel(client)


def simple_request(**overrides: Any) -> ModelRequest:
    fields: dict[str, Any] = {"model": "gpt-test", "messages": [Message.user("Hello")]}
    fields.update(overrides)
    return ModelRequest(**fields)


async def complete_error(model: OpenAIChatModel, request: ModelRequest | None = None) -> ApplicationError:
    with pytest.raises(ApplicationError) as caught:
        await model.complete(request or simple_request())
    return caught.value


async def complete_error_with(
    model: OpenAIChatModel, request: ModelRequest, on_delta: DeltaSink
) -> ApplicationError:
    with pytest.raises(ApplicationError) as caught:
        await model.complete(request, on_delta)
    return caught.value


# ---------------------------------------------------------------- request body


async def test_sends_the_whole_conversation_as_chat_completions(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.enqueue(ScriptedResponse(json_body=openai_completion(content="It is sunny in both.")))
    request = ModelRequest(
        model="gpt-test",
        system_prompt="You are terse.",
        messages=[
            Message.user("Weather in Paris and Oslo?"),
            Message(
                role="assistant",
                content=[
                    ThinkingPart(text="I should call the tool twice.", signature="sig"),
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
                    TextPart(text="And this picture?"),
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

    response = await model.complete(request)

    assert response.message.text == "It is sunny in both."
    assert response.max_tokens == 256
    assert len(server.requests) == 1
    sent = server.requests[0]
    assert sent.method == "POST"
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    assert sent.json == {
        "model": "gpt-test",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Weather in Paris and Oslo?"},
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 24C"},
            {"role": "tool", "tool_call_id": "call_2", "content": "timeout"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "And this picture?"},
                    {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                ],
            },
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Current weather for a city.",
                    "parameters": WEATHER_TOOL.parameters,
                },
            }
        ],
        "parallel_tool_calls": False,
        "temperature": 0.2,
        "max_completion_tokens": 256,
    }


async def test_unset_options_are_not_sent_but_an_output_limit_is(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.enqueue(ScriptedResponse(json_body=openai_completion(content="Hi")))

    response = await model.complete(simple_request())

    # Without a limit a local model that rambles on generates until its
    # context is full; the default bounds it, and the answer says what was sent.
    assert server.requests[0].json == {
        "model": "gpt-test",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "Hello"}],
        "max_completion_tokens": DEFAULT_MAX_TOKENS,
    }
    assert DEFAULT_MAX_TOKENS == 4096
    assert response.max_tokens == DEFAULT_MAX_TOKENS


async def test_parallel_tool_calls_sent_with_tools(server: OpenAIServer, model: OpenAIChatModel) -> None:
    server.enqueue(ScriptedResponse(json_body=openai_completion(content="Hi")))

    await model.complete(simple_request(tools=[WEATHER_TOOL]))

    body = server.requests[0].json
    assert body["parallel_tool_calls"] is True
    assert "temperature" not in body and "max_tokens" not in body


async def test_calls_only_assistant_message_has_null_content(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.enqueue(ScriptedResponse(json_body=openai_completion(content="Done")))
    request = simple_request(
        messages=[
            Message.user("Go"),
            Message.assistant(tool_calls=[ToolCallPart(id="c1", name="get_weather", arguments={})]),
            Message(role="tool", content=[ToolResultPart(id="c1", content="ok")]),
        ]
    )

    await model.complete(request)

    messages = server.requests[0].json["messages"]
    assert messages[1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
        ],
    }
    assert messages[2] == {"role": "tool", "tool_call_id": "c1", "content": "ok"}


async def test_unsendable_conversation_is_a_bad_request_and_sends_nothing(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    request = simple_request(
        messages=[Message(role="user", content=[ToolCallPart(id="c1", name="x")])]
    )

    error = await complete_error(model, request)

    assert error.type == "ModelBadRequest"
    assert error.non_retryable
    assert "message 0 (user)" in error.message
    assert server.requests == []


# ---------------------------------------------------------------- responses
#
# A whole answer scripted with openai_completion() is streamed by the server
# as api.openai.com streams it (see OpenAIServer.as_asked); the streaming
# section below scripts the chunks themselves.


async def test_parses_text_and_usage_with_cached_tokens(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.enqueue(
        ScriptedResponse(
            json_body=openai_completion(
                content="Hello there.",
                prompt_tokens=1200,
                completion_tokens=30,
                cached_tokens=1024,
                model="gpt-test-2025-01-01",
            )
        )
    )

    response = await model.complete(simple_request())

    assert response.message == Message(role="assistant", content=[TextPart(text="Hello there.")])
    assert response.finish_reason == "stop"
    assert response.raw_finish_reason == "stop"
    assert response.model == "gpt-test-2025-01-01"
    assert response.usage == Usage(
        input_tokens=1200, output_tokens=30, cached_input_tokens=1024, requests=1
    )


async def test_parses_tool_calls(server: OpenAIServer, model: OpenAIChatModel) -> None:
    server.enqueue(
        ScriptedResponse(
            json_body=openai_completion(
                content="Let me check.",
                tool_calls=[
                    openai_tool_call("call_a", "get_weather", '{"city": "Paris"}'),
                    openai_tool_call("call_b", "get_weather", '{"city": "Oslo", "units": "C"}'),
                ],
                finish_reason="tool_calls",
            )
        )
    )

    response = await model.complete(simple_request(tools=[WEATHER_TOOL]))

    assert response.finish_reason == "tool_calls"
    assert response.message.text == "Let me check."
    assert response.message.tool_calls == [
        ToolCallPart(id="call_a", name="get_weather", arguments={"city": "Paris"}),
        ToolCallPart(id="call_b", name="get_weather", arguments={"city": "Oslo", "units": "C"}),
    ]


async def test_tool_calls_make_the_finish_reason_tool_calls(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    # Some compatible servers say "stop" even when they return calls.
    server.enqueue(
        ScriptedResponse(
            json_body=openai_completion(
                tool_calls=[openai_tool_call("c1", "get_weather", '{"city": "Rome"}')],
                finish_reason="stop",
            )
        )
    )

    response = await model.complete(simple_request(tools=[WEATHER_TOOL]))

    assert response.finish_reason == "tool_calls"
    assert response.raw_finish_reason == "stop"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("stop", "stop"),
        ("length", "length"),
        ("content_filter", "content_filter"),
        ("tool_calls", "tool_calls"),
        ("function_call", "tool_calls"),
        ("eos_token", "other"),
    ],
)
async def test_finish_reasons(
    server: OpenAIServer, model: OpenAIChatModel, raw: str | None, expected: str
) -> None:
    server.enqueue(ScriptedResponse(json_body=openai_completion(content="x", finish_reason=raw)))

    response = await model.complete(simple_request())

    assert response.finish_reason == expected
    assert response.raw_finish_reason == raw


@pytest.mark.parametrize(
    ("raw_arguments", "problem"),
    [
        ('{"city": "Paris"', "not valid JSON"),
        ("city=Paris", "not valid JSON"),
        ('["Paris"]', "must be a JSON object, not an array"),
        ('"Paris"', "must be a JSON object, not a string"),
        ("null", "must be a JSON object, not null"),
    ],
)
async def test_invalid_tool_arguments_are_kept_with_an_error(
    server: OpenAIServer, model: OpenAIChatModel, raw_arguments: str, problem: str
) -> None:
    server.enqueue(
        ScriptedResponse(
            json_body=openai_completion(
                tool_calls=[openai_tool_call("call_x", "get_weather", raw_arguments)],
                finish_reason="tool_calls",
            )
        )
    )

    response = await model.complete(simple_request(tools=[WEATHER_TOOL]))

    (call,) = response.message.tool_calls
    assert call.id == "call_x"
    assert call.name == "get_weather"
    assert call.arguments == {}
    assert call.raw_arguments == raw_arguments
    assert call.arguments_error is not None and problem in call.arguments_error
    assert response.finish_reason == "tool_calls"


async def test_empty_arguments_text_means_no_arguments(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.enqueue(
        ScriptedResponse(
            json_body=openai_completion(
                tool_calls=[openai_tool_call("c1", "list_files", "")], finish_reason="tool_calls"
            )
        )
    )

    response = await model.complete(simple_request())

    assert response.message.tool_calls == [ToolCallPart(id="c1", name="list_files", arguments={})]


async def test_refusal_is_kept_as_text_and_reported_as_content_filter(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.enqueue(ScriptedResponse(json_body=openai_completion(refusal="I can't help with that.")))

    response = await model.complete(simple_request())

    assert response.message.text == "I can't help with that."
    assert response.finish_reason == "content_filter"
    assert response.raw_finish_reason == "stop"


async def test_reasoning_from_compatible_servers_becomes_thinking(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.enqueue(
        ScriptedResponse(
            json_body=openai_completion(
                content="42", extra_message_fields={"reasoning_content": "6 times 7."}
            )
        )
    )

    response = await model.complete(simple_request())

    assert response.message.content == [ThinkingPart(text="6 times 7."), TextPart(text="42")]


async def test_missing_usage_counts_the_request(server: OpenAIServer, model: OpenAIChatModel) -> None:
    server.enqueue(ScriptedResponse(json_body=openai_completion(content="x", usage=False)))

    response = await model.complete(simple_request())

    assert response.usage == Usage(requests=1)


@pytest.mark.parametrize(
    "details",
    [None, {}, {"cached_tokens": None}, {"audio_tokens": 0}],
    ids=["null-details", "empty-details", "null-cached", "no-cached-field"],
)
async def test_usage_without_cached_tokens_counts_none_cached(
    server: OpenAIServer, model: OpenAIChatModel, details: dict[str, Any] | None
) -> None:
    # vLLM, llama.cpp and Ollama send no (or partial) prompt_tokens_details.
    usage = {"prompt_tokens": 90, "completion_tokens": 4, "total_tokens": 94, "prompt_tokens_details": details}
    server.enqueue(openai_stream([content("ok"), finish(), openai_chunk(choices=False, usage=usage)]))

    response = await model.complete(simple_request())

    assert response.usage == Usage(input_tokens=90, output_tokens=4, cached_input_tokens=0, requests=1)


async def test_usage_without_prompt_tokens_details_field(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    usage = {"prompt_tokens": 90, "completion_tokens": 4, "total_tokens": 94}
    server.enqueue(openai_stream([content("ok"), finish(), openai_chunk(choices=False, usage=usage)]))

    response = await model.complete(simple_request())

    assert response.usage == Usage(input_tokens=90, output_tokens=4, cached_input_tokens=0, requests=1)


async def test_cached_tokens_are_part_of_the_prompt_tokens_across_steps(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    # OpenAI caches a repeated prefix by itself: prompt_tokens counts the
    # cached ones, so input_tokens is taken as is, never added to.
    server.enqueue(
        ScriptedResponse(
            json_body=openai_completion(
                tool_calls=[openai_tool_call("call_1", "get_weather", '{"city": "Paris"}')],
                finish_reason="tool_calls",
                prompt_tokens=1100,
                completion_tokens=20,
                cached_tokens=None,
            )
        )
    )
    server.enqueue(
        ScriptedResponse(
            json_body=openai_completion(
                content="Sunny.", prompt_tokens=1140, completion_tokens=3, cached_tokens=1024
            )
        )
    )
    conversation = [Message.user("Weather in Paris?")]
    first = await model.complete(
        simple_request(system_prompt="Be terse.", messages=conversation, tools=[WEATHER_TOOL])
    )
    conversation += [
        first.message,
        Message(role="tool", content=[ToolResultPart(id="call_1", name="get_weather", content="sunny")]),
    ]

    second = await model.complete(
        simple_request(system_prompt="Be terse.", messages=conversation, tools=[WEATHER_TOOL])
    )

    assert first.usage == Usage(input_tokens=1100, output_tokens=20, cached_input_tokens=0, requests=1)
    assert second.usage == Usage(input_tokens=1140, output_tokens=3, cached_input_tokens=1024, requests=1)
    assert (first.usage + second.usage).cached_input_tokens == 1024
    one, two = (sent.json for sent in server.requests)
    # The cacheable prefix is sent unchanged, with no markup (that is Anthropic's).
    assert one["tools"] == two["tools"]
    assert two["messages"][: len(one["messages"])] == one["messages"]
    assert "cache_control" not in json.dumps(two)


async def test_no_choices_is_a_retryable_broken_stream(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    body = openai_completion(content="x")
    body["choices"] = []
    server.enqueue(ScriptedResponse(json_body=body))

    error = await complete_error(model)

    assert error.type == "ModelStreamBroken"
    assert not error.non_retryable


# ---------------------------------------------------------------- streaming


class Deltas:
    """An on_delta sink that records what it is given."""

    def __init__(self) -> None:
        self.received: list[StreamDelta] = []
        self.usage: list = []  # usage reported so far, in order (kept apart from content)

    def __call__(self, delta: StreamDelta) -> None:
        if delta.kind == "usage":
            self.usage.append(delta.usage)
        else:
            self.received.append(delta)

    def text(self, kind: str = "text") -> str:
        return "".join(d.text for d in self.received if d.kind == kind)

    def arguments(self, call_id: str) -> str:
        return "".join(
            d.text for d in self.received if d.kind == "tool_call_delta" and d.call_id == call_id
        )

    def kinds(self) -> list[str]:
        return [d.kind for d in self.received]


def content(text: str) -> dict[str, Any]:
    return openai_chunk({"content": text})


def call_start(index: int, id: str | None, name: str | None, arguments: str = "") -> dict[str, Any]:
    call: dict[str, Any] = {"index": index, "type": "function", "function": {"arguments": arguments}}
    if id is not None:
        call["id"] = id
    if name is not None:
        call["function"]["name"] = name
    return openai_chunk({"tool_calls": [call]})


def call_arguments(index: int, fragment: str) -> dict[str, Any]:
    return openai_chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})


def finish(reason: str = "stop") -> dict[str, Any]:
    return openai_chunk({}, finish_reason=reason)


async def test_text_split_across_many_chunks_reaches_on_delta_in_order(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    words = [f"word{i} " for i in range(40)]
    chunks = [openai_chunk({"role": "assistant", "content": ""})]
    chunks += [content(w) for w in words] + [finish()]
    chunks.append(openai_chunk(choices=False, usage=openai_usage(100, 40, cached_tokens=64)))
    # Cut the bytes at arbitrary places too, as TCP may deliver them.
    streamed = openai_stream(chunks)
    server.enqueue(ScriptedResponse(body_chunks=rechunk(streamed.body_chunks or [], 7)))
    deltas = Deltas()

    response = await model.complete(simple_request(), deltas)

    assert response.message == Message(role="assistant", content=[TextPart(text="".join(words))])
    assert [d.text for d in deltas.received] == words
    assert set(deltas.kinds()) == {"text"}
    assert response.usage == Usage(input_tokens=100, output_tokens=40, cached_input_tokens=64, requests=1)
    assert response.finish_reason == "stop"
    assert response.model == "gpt-test-2025"


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_deltas_become_thinking(
    server: OpenAIServer, model: OpenAIChatModel, field: str
) -> None:
    server.enqueue(
        openai_stream(
            [
                openai_chunk({field: "6 times "}),
                openai_chunk({field: "7."}),
                content("4"),
                content("2"),
                finish(),
            ]
        )
    )
    deltas = Deltas()

    response = await model.complete(simple_request(), deltas)

    assert response.message.content == [ThinkingPart(text="6 times 7."), TextPart(text="42")]
    assert [(d.kind, d.text) for d in deltas.received] == [
        ("thinking", "6 times "),
        ("thinking", "7."),
        ("text", "4"),
        ("text", "2"),
    ]


async def test_tool_call_arguments_split_across_chunks(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.enqueue(
        openai_stream(
            [
                content("Checking."),
                call_start(0, "call_a", "get_weather"),
                call_arguments(0, '{"ci'),
                call_arguments(0, 'ty": "Pa'),
                call_arguments(0, 'ris"}'),
                finish("tool_calls"),
            ]
        )
    )
    deltas = Deltas()

    response = await model.complete(simple_request(tools=[WEATHER_TOOL]), deltas)

    assert response.message.content == [
        TextPart(text="Checking."),
        ToolCallPart(id="call_a", name="get_weather", arguments={"city": "Paris"}),
    ]
    assert response.finish_reason == "tool_calls"
    assert deltas.received == [
        StreamDelta(kind="text", text="Checking."),
        StreamDelta(kind="tool_call_start", call_id="call_a", name="get_weather"),
        StreamDelta(kind="tool_call_delta", call_id="call_a", text='{"ci'),
        StreamDelta(kind="tool_call_delta", call_id="call_a", text='ty": "Pa'),
        StreamDelta(kind="tool_call_delta", call_id="call_a", text='ris"}'),
        # Chat Completions never says a call ended: the end of the stream does.
        StreamDelta(kind="tool_call_end", call_id="call_a"),
    ]


async def test_parallel_tool_calls_interleaved_by_index(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.enqueue(
        openai_stream(
            [
                call_start(0, "call_a", "get_weather"),
                call_start(1, "call_b", "get_weather"),
                call_arguments(1, '{"city": '),
                call_arguments(0, '{"city": '),
                call_arguments(0, '"Paris"}'),
                call_arguments(1, '"Oslo"}'),
                finish("tool_calls"),
            ]
        )
    )
    deltas = Deltas()

    response = await model.complete(simple_request(tools=[WEATHER_TOOL]), deltas)

    assert response.message.tool_calls == [
        ToolCallPart(id="call_a", name="get_weather", arguments={"city": "Paris"}),
        ToolCallPart(id="call_b", name="get_weather", arguments={"city": "Oslo"}),
    ]
    assert deltas.arguments("call_a") == '{"city": "Paris"}'
    assert deltas.arguments("call_b") == '{"city": "Oslo"}'
    assert [d.call_id for d in deltas.received if d.kind == "tool_call_end"] == ["call_a", "call_b"]


async def test_servers_that_repeat_or_omit_the_call_id(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    # One server repeats id and name on every chunk; another never sends an id.
    server.enqueue(
        openai_stream(
            [
                call_start(0, "call_a", "get_weather", '{"city"'),
                call_start(0, "call_a", "get_weather", ': "Rome"}'),
                call_start(1, None, "list_files", ""),
                finish("tool_calls"),
            ]
        )
    )

    response = await model.complete(simple_request(tools=[WEATHER_TOOL]))

    assert response.message.tool_calls == [
        ToolCallPart(id="call_a", name="get_weather", arguments={"city": "Rome"}),
        ToolCallPart(id="chatcmpl-test123_1", name="list_files", arguments={}),
    ]


async def test_tool_call_cut_short_by_the_finish_is_still_returned(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    # finish_reason "length" in the middle of the arguments: the call is kept,
    # with its broken arguments, for the loop to answer with an error.
    server.enqueue(
        openai_stream(
            [call_start(0, "call_a", "get_weather"), call_arguments(0, '{"city": "Par'), finish("length")]
        )
    )
    deltas = Deltas()

    response = await model.complete(simple_request(tools=[WEATHER_TOOL]), deltas)

    (call,) = response.message.tool_calls
    assert call.id == "call_a" and call.arguments == {}
    assert call.raw_arguments == '{"city": "Par'
    assert call.arguments_error is not None and "not valid JSON" in call.arguments_error
    assert response.finish_reason == "tool_calls"
    assert response.raw_finish_reason == "length"
    assert deltas.kinds() == ["tool_call_start", "tool_call_delta", "tool_call_end"]


async def test_invalid_json_arguments_across_chunks_are_kept_with_an_error(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.enqueue(
        openai_stream(
            [
                call_start(0, "call_x", "get_weather"),
                call_arguments(0, "{city: "),
                call_arguments(0, "Paris}"),
                finish("tool_calls"),
            ]
        )
    )

    response = await model.complete(simple_request(tools=[WEATHER_TOOL]))

    (call,) = response.message.tool_calls
    assert call.arguments == {}
    assert call.raw_arguments == "{city: Paris}"
    assert call.arguments_error is not None and "not valid JSON" in call.arguments_error


async def test_stream_cut_off_mid_answer_is_retryable_and_keeps_the_deltas_sent(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.enqueue(
        openai_stream(
            [content("The answer "), content("is "), call_start(0, "call_a", "get_weather")],
            break_stream=True,
        )
    )
    deltas = Deltas()

    error = await complete_error_with(model, simple_request(), deltas)

    assert error.type == "ModelStreamBroken"
    assert not error.non_retryable
    assert error.__cause__ is None
    assert "broke off mid-answer" in error.message and "retried" in error.message
    assert API_KEY not in error.message
    assert deltas.received == [
        StreamDelta(kind="text", text="The answer "),
        StreamDelta(kind="text", text="is "),
        StreamDelta(kind="tool_call_start", call_id="call_a", name="get_weather"),
    ]


async def test_error_event_mid_stream_is_retryable_and_redacted(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.enqueue(
        ScriptedResponse(
            body_chunks=[
                sse_event(content("Partial")),
                sse_event(
                    {"error": {"message": f"The server had an error ({API_KEY})", "type": "server_error"}}
                ),
            ]
        )
    )
    deltas = Deltas()

    error = await complete_error_with(model, simple_request(), deltas)

    assert error.type == "ModelStreamBroken"
    assert not error.non_retryable
    assert error.__cause__ is None
    assert "The server had an error" in error.message and "server_error" in error.message
    assert API_KEY not in error.message
    assert deltas.text() == "Partial"


@pytest.mark.parametrize("done", [True, False])
async def test_stream_without_a_finish_reason_is_retryable(
    server: OpenAIServer, model: OpenAIChatModel, done: bool
) -> None:
    server.enqueue(openai_stream([content("Half an ans")], done=done))

    error = await complete_error(model)

    assert error.type == "ModelStreamBroken"
    assert not error.non_retryable
    assert "no finish_reason" in error.message


async def test_stream_ending_without_done_after_the_finish_is_accepted(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.enqueue(openai_stream([content("ok"), finish()], done=False))

    response = await model.complete(simple_request())

    assert response.message.text == "ok"
    assert response.usage == Usage(requests=1)


async def test_deltas_add_up_to_the_final_message(server: OpenAIServer, model: OpenAIChatModel) -> None:
    server.enqueue(
        ScriptedResponse(
            json_body=openai_completion(
                content="Let me check the weather in both cities for you.",
                tool_calls=[
                    openai_tool_call("call_a", "get_weather", '{"city": "Paris", "units": "metric"}'),
                    openai_tool_call("call_b", "get_weather", '{"city": "Oslo"}'),
                ],
                finish_reason="tool_calls",
                extra_message_fields={"reasoning_content": "Two cities, two calls."},
            )
        )
    )
    deltas = Deltas()

    response = await model.complete(simple_request(tools=[WEATHER_TOOL]), deltas)

    message = response.message
    assert deltas.text() == message.text == "Let me check the weather in both cities for you."
    assert deltas.text("thinking") == "Two cities, two calls."
    assert [(d.call_id, d.name) for d in deltas.received if d.kind == "tool_call_start"] == [
        (c.id, c.name) for c in message.tool_calls
    ]
    for call in message.tool_calls:
        assert json.loads(deltas.arguments(call.id)) == call.arguments
    assert [d.call_id for d in deltas.received if d.kind == "tool_call_end"] == ["call_a", "call_b"]
    assert len(deltas.received) > 10


async def test_complete_without_on_delta_returns_the_same_answer(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    body = openai_completion(
        content="Same either way.",
        tool_calls=[openai_tool_call("call_a", "get_weather", '{"city": "Paris"}')],
        finish_reason="tool_calls",
    )
    server.enqueue(ScriptedResponse(json_body=body), ScriptedResponse(json_body=body))

    streamed = await model.complete(simple_request(), Deltas())
    plain = await model.complete(simple_request())

    assert streamed == plain


# ---------------------------------------------------------------- errors over HTTP


async def test_429_with_retry_after_seconds(server: OpenAIServer, model: OpenAIChatModel) -> None:
    server.enqueue(
        ScriptedResponse(
            status=429,
            headers={"retry-after": "7", "x-request-id": "req_abc"},
            json_body=openai_error_body(
                "Rate limit reached for gpt-test on tokens per min.", type="tokens", code="rate_limit_exceeded"
            ),
        )
    )

    error = await complete_error(model)

    assert error.type == "ModelRateLimited"
    assert not error.non_retryable
    assert error.next_retry_delay == timedelta(seconds=7)
    assert "Rate limit reached for gpt-test" in error.message
    assert "req_abc" in error.message
    assert error.__cause__ is None  # the SDK message is not recorded in history


async def test_429_with_retry_after_ms(server: OpenAIServer, model: OpenAIChatModel) -> None:
    server.enqueue(
        ScriptedResponse(
            status=429,
            headers={"retry-after-ms": "1500", "retry-after": "2"},
            json_body=openai_error_body("slow down", type="requests", code="rate_limit_exceeded"),
        )
    )

    error = await complete_error(model)

    assert error.type == "ModelRateLimited"
    assert error.next_retry_delay == timedelta(milliseconds=1500)


async def test_429_insufficient_quota_is_not_retried(server: OpenAIServer, model: OpenAIChatModel) -> None:
    server.enqueue(
        ScriptedResponse(
            status=429,
            json_body=openai_error_body(
                "You exceeded your current quota, please check your plan and billing details.",
                type="insufficient_quota",
                code="insufficient_quota",
            ),
        )
    )

    error = await complete_error(model)

    assert error.type == "ModelRateLimited"
    assert error.non_retryable
    assert "billing" in error.message


@pytest.mark.parametrize("status", [500, 502, 503, 504, 408, 409])
async def test_server_side_statuses_are_retryable(
    server: OpenAIServer, model: OpenAIChatModel, status: int
) -> None:
    server.enqueue(
        ScriptedResponse(
            status=status, json_body=openai_error_body("The server had an error.", type="server_error")
        )
    )

    error = await complete_error(model)

    assert error.type == "ModelServerError"
    assert not error.non_retryable
    assert error.next_retry_delay is None
    assert str(status) in error.message
    assert "The server had an error." in error.message


async def test_503_with_retry_after_http_date(server: OpenAIServer, model: OpenAIChatModel) -> None:
    when = datetime.now(timezone.utc) + timedelta(seconds=120)
    server.enqueue(
        ScriptedResponse(
            status=503,
            headers={"retry-after": format_datetime(when, usegmt=True)},
            json_body=openai_error_body("overloaded", type="server_error"),
        )
    )

    error = await complete_error(model)

    assert error.type == "ModelServerError"
    assert error.next_retry_delay is not None
    assert timedelta(seconds=100) < error.next_retry_delay <= timedelta(seconds=120)


async def test_proxy_html_error_page(server: OpenAIServer, model: OpenAIChatModel) -> None:
    server.enqueue(
        ScriptedResponse(
            status=502,
            headers={"content-type": "text/html"},
            raw_body=b"<html><body>502 Bad Gateway</body></html>",
        )
    )

    error = await complete_error(model)

    assert error.type == "ModelServerError"
    assert not error.non_retryable
    assert "502 Bad Gateway" in error.message


async def test_401_says_what_to_fix_and_hides_the_key(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    masked = API_KEY[:8] + "*" * 20 + API_KEY[-4:]
    server.enqueue(
        ScriptedResponse(
            status=401,
            json_body=openai_error_body(
                f"Incorrect API key provided: {masked}. You can find your API key at "
                f"https://platform.openai.com/account/api-keys. (sent: {API_KEY})",
                code="invalid_api_key",
            ),
        )
    )

    error = await complete_error(model)

    assert error.type == "ModelAuthenticationError"
    assert error.non_retryable
    assert error.next_retry_delay is None
    assert "OpenAI rejected the API key (401)" in error.message
    assert "check OPENAI_API_KEY in the worker's environment" in error.message
    assert "Incorrect API key provided" in error.message
    assert API_KEY not in error.message and API_KEY not in str(error)
    assert masked not in error.message
    assert API_KEY[8:20] not in error.message


async def test_403_is_an_authentication_error(server: OpenAIServer, model: OpenAIChatModel) -> None:
    server.enqueue(
        ScriptedResponse(
            status=403,
            json_body=openai_error_body("Project does not have access to model gpt-test"),
        )
    )

    error = await complete_error(model)

    assert error.type == "ModelAuthenticationError"
    assert error.non_retryable
    assert "403" in error.message and "does not have access" in error.message


async def test_400_is_a_bad_request_with_the_provider_message(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.enqueue(
        ScriptedResponse(
            status=400,
            json_body=openai_error_body(
                "Invalid 'messages[1].tool_calls[0].id': string too long.",
                param="messages[1].tool_calls[0].id",
                code="string_above_max_length",
            ),
        )
    )

    error = await complete_error(model)

    assert error.type == "ModelBadRequest"
    assert error.non_retryable
    assert error.next_retry_delay is None
    assert "400" in error.message
    assert "Invalid 'messages[1].tool_calls[0].id': string too long." in error.message


async def test_unknown_model_404_is_a_bad_request(server: OpenAIServer, model: OpenAIChatModel) -> None:
    server.enqueue(
        ScriptedResponse(
            status=404,
            json_body=openai_error_body(
                "The model `gpt-nope` does not exist or you do not have access to it.",
                code="model_not_found",
            ),
        )
    )

    error = await complete_error(model)

    assert error.type == "ModelBadRequest"
    assert error.non_retryable
    assert "404" in error.message and "gpt-nope" in error.message


async def test_context_length_error_by_code(server: OpenAIServer, model: OpenAIChatModel) -> None:
    server.enqueue(
        ScriptedResponse(
            status=400,
            json_body=openai_error_body(
                "Your input exceeds the context window of this model.",
                param="messages",
                code="context_length_exceeded",
            ),
        )
    )

    error = await complete_error(model)

    assert error.type == "ModelContextLengthExceeded"
    assert error.non_retryable


async def test_context_length_error_by_message(server: OpenAIServer, model: OpenAIChatModel) -> None:
    # vLLM's wording, without a code.
    server.enqueue(
        ScriptedResponse(
            status=400,
            json_body={
                "object": "error",
                "message": "This model's maximum context length is 4096 tokens. However, you "
                "requested 5000 tokens in the messages.",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            },
        )
    )

    error = await complete_error(model)

    assert error.type == "ModelContextLengthExceeded"
    assert error.non_retryable
    assert "maximum context length is 4096" in error.message


async def test_connection_refused_is_a_retryable_connection_error() -> None:
    base_url = f"http://127.0.0.1:{unused_port()}/v1"
    client = AsyncOpenAI(api_key=API_KEY, base_url=base_url, max_retries=0)
    try:
        error = await complete_error(OpenAIChatModel(client))
    finally:
        await client.close()

    assert error.type == "ModelConnectionError"
    assert not error.non_retryable
    assert f"{base_url}/chat/completions" in error.message
    assert API_KEY not in error.message


async def test_dropped_connection_is_a_retryable_connection_error(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.enqueue(ScriptedResponse(drop_connection=True))

    error = await complete_error(model)

    assert error.type == "ModelConnectionError"
    assert not error.non_retryable


def test_timeout_is_a_retryable_connection_error() -> None:
    request = httpx2.Request(
        "POST",
        "https://user:pw@api.example.com/v1/chat/completions?api-key=zzz",
        headers={"Authorization": f"Bearer {API_KEY}"},
    )

    error = map_openai_error(openai.APITimeoutError(request=request))

    assert error.type == "ModelConnectionError"
    assert not error.non_retryable
    assert "timed out" in error.message
    assert "https://api.example.com/v1/chat/completions" in error.message
    assert "zzz" not in error.message and "pw" not in error.message


def test_unexpected_exception_is_retryable_and_redacted() -> None:
    error = map_openai_error(RuntimeError(f"boom with {API_KEY}"))

    assert error.type == "ModelError"
    assert not error.non_retryable
    assert "boom" in error.message
    assert API_KEY not in error.message


# ---------------------------------------------------------------- from_env


async def test_from_env_without_key_or_base_url_is_a_configuration_error() -> None:
    with pytest.raises(ApplicationError) as caught:
        OpenAIChatModel.from_env()

    error = caught.value
    assert error.type == "ModelConfigurationError"
    assert error.non_retryable
    assert "OPENAI_API_KEY" in error.message
    assert "worker's environment" in error.message


async def test_from_env_with_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)

    model = OpenAIChatModel.from_env()

    assert model.client.api_key == API_KEY
    assert model.client.max_retries == 0
    assert str(model.client.base_url).startswith("https://api.openai.com/v1")
    await model.client.close()


async def test_from_env_with_base_url_only_talks_to_a_local_server(
    server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    server.enqueue(ScriptedResponse(json_body=openai_completion(content="local reply")))

    model = OpenAIChatModel.from_env()
    try:
        response = await model.complete(simple_request(model="qwen2.5-7b-instruct"))
    finally:
        await model.client.close()

    assert response.message.text == "local reply"
    assert model.client.max_retries == 0
    sent = server.requests[0]
    assert sent.headers["authorization"] == f"Bearer {LOCAL_SERVER_API_KEY}"
    assert sent.json["model"] == "qwen2.5-7b-instruct"


async def test_from_env_with_key_and_base_url(server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    server.enqueue(ScriptedResponse(json_body=openai_completion(content="ok")))

    model = OpenAIChatModel.from_env()
    try:
        await model.complete(simple_request())
    finally:
        await model.client.close()

    assert server.requests[0].headers["authorization"] == f"Bearer {API_KEY}"


async def test_model_without_client_reports_missing_configuration_on_first_call() -> None:
    model = OpenAIChatModel()

    error = await complete_error(model)

    assert error.type == "ModelConfigurationError"
    assert error.non_retryable


# ---------------------------------------------------------------- pure functions


def test_to_openai_messages_system_prompt_and_roles() -> None:
    messages = to_openai_messages(
        "Be brief.",
        [
            Message.system("Extra rule."),
            Message.user("Hi"),
            Message.assistant("Hello!"),
            Message(role="assistant", content=[ThinkingPart(text="hidden")]),
        ],
    )

    assert messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "system", "content": "Extra rule."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "assistant", "content": ""},
    ]


def test_to_openai_messages_without_system_prompt() -> None:
    assert to_openai_messages("", [Message.user("Hi")]) == [{"role": "user", "content": "Hi"}]


def test_tool_results_in_a_user_message_come_first() -> None:
    messages = to_openai_messages(
        "",
        [
            Message(
                role="user",
                content=[TextPart(text="Also, hurry."), ToolResultPart(id="c9", content="done")],
            )
        ],
    )

    assert messages == [
        {"role": "tool", "tool_call_id": "c9", "content": "done"},
        {"role": "user", "content": "Also, hurry."},
    ]


def test_multiple_text_parts_stay_parts() -> None:
    messages = to_openai_messages(
        "", [Message(role="user", content=[TextPart(text="a"), TextPart(text="b")])]
    )

    assert messages == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    ]


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        (Message(role="user", content=[ToolCallPart(id="c", name="t")]), "only assistant"),
        (Message(role="assistant", content=[ToolResultPart(id="c", content="x")]), "cannot hold tool results"),
        (Message(role="assistant", content=[ImagePart(url="https://x/y.png")]), "no images"),
        (Message(role="tool", content=[TextPart(text="loose text")]), "only hold tool results"),
        (Message(role="system", content=[ImagePart(url="https://x/y.png")]), "only hold text"),
        (Message(role="user", content=[ImagePart()]), "needs a url or data"),
        (Message(role="user", content=[ImagePart(data="AAAA")]), "needs a media_type"),
    ],
)
def test_to_openai_messages_rejects_what_it_cannot_express(message: Message, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        to_openai_messages("", [message])


def test_to_openai_tools_omits_empty_description() -> None:
    tools = to_openai_tools([ToolDefinition(name="noop")])

    assert tools == [
        {"type": "function", "function": {"name": "noop", "parameters": {"type": "object", "properties": {}}}}
    ]


def test_to_openai_request_uses_max_completion_tokens() -> None:
    params = to_openai_request(simple_request(max_tokens=0, temperature=0.0))

    assert params["max_completion_tokens"] == 0
    assert params["temperature"] == 0.0
    assert "max_tokens" not in params


def test_parse_tool_arguments() -> None:
    assert parse_tool_arguments('{"a": 1}') == ({"a": 1}, None)
    assert parse_tool_arguments("  ") == ({}, None)
    arguments, problem = parse_tool_arguments("[1]")
    assert arguments == {} and problem == "the arguments must be a JSON object, not an array"


# ---------------------------------------------------------------- http_headers


def test_retry_after_delay_forms() -> None:
    now = datetime(2025, 6, 1, 12, 0, 0, tzinfo=timezone.utc)

    assert retry_after_delay({"Retry-After": "7"}) == timedelta(seconds=7)
    assert retry_after_delay({"retry-after": "0.5"}) == timedelta(seconds=0.5)
    assert retry_after_delay({"retry-after-ms": "250", "retry-after": "9"}) == timedelta(milliseconds=250)
    assert retry_after_delay({"retry-after": "Sun, 01 Jun 2025 12:00:30 GMT"}, now=now) == timedelta(
        seconds=30
    )
    assert retry_after_delay({"retry-after": "Sun, 01 Jun 2025 11:59:00 GMT"}, now=now) is None
    assert retry_after_delay({"retry-after": "soon"}) is None
    assert retry_after_delay({"retry-after": "-3"}) is None
    assert retry_after_delay({"retry-after-ms": "nan"}) is None
    assert retry_after_delay({}) is None
    assert retry_after_delay(None) is None


def test_redaction() -> None:
    secrets = credential_values({"Authorization": f"Bearer {API_KEY}", "x-api-key": "short"})

    assert secrets == [API_KEY]
    assert redact(f"key {API_KEY} leaked", secrets) == "key [redacted] leaked"
    assert redact("Incorrect API key provided: sk-proj-********abcd.") == (
        "Incorrect API key provided: sk-proj-[redacted]."
    )
    assert redact("plain words stay") == "plain words stay"


def test_error_body_message_shapes() -> None:
    assert error_body_message({"message": "inner"}) == "inner"
    assert error_body_message({"error": {"message": "nested"}}) == "nested"
    assert error_body_message({"type": "error", "error": {"type": "x", "message": "anthropic"}}) == "anthropic"
    assert error_body_message({"detail": "fastapi"}) == "fastapi"
    assert error_body_message({"error": "plain"}) == "plain"
    assert error_body_message("text body") == "text body"
    assert error_body_message({"code": 1}) is None
    assert error_body_message("x" * 2000, limit=10) == "x" * 10 + "..."


# ---------------------------------------------------------------- attempts, in a real run


async def test_a_broken_stream_says_whether_the_step_is_retried_and_why(agent_client, worker) -> None:
    # A TCP reset mid-stream: the transport's error has no text of its own,
    # its reason ("Connection reset by peer") is deep in its cause chain.
    broken = openai_stream([content("The answer "), content("is ")], reset_stream=True)
    with OpenAIServer() as server:
        server.enqueue(broken, broken)
        url = f"{server.base_url}/chat/completions"
        seen = ErrorsSeen(OpenAIChatModel(AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0)))
        async with worker(models=ModelResolver({"openai": lambda provider, name: seen})):
            with pytest.raises(AgentRunFailed) as failed:
                await agent_client.run(AgentSpec(model="openai:gpt-test", llm_max_attempts=2), "hello")

    broke = (
        f"OpenAI's stream from {url} broke off mid-answer: "
        "ReadError: ConnectionResetError: [Errno 104] Connection reset by peer"
    )
    assert [error.message for error in seen.errors] == [
        f"{broke}; the step is retried (attempt 1 of 2 failed)",
        f"{broke}; this was the last attempt (2 of 2), so the step fails",
    ]
    error = failed.value.result.error
    assert error == f"LLM step 1 failed after 2 attempts: {broke}; this was the last attempt (2 of 2), so the step fails"
    assert "retried" not in error


async def test_a_length_failure_names_the_limit_that_was_sent(agent_client, worker) -> None:
    # The spec sets no max_tokens: the provider's default went out, and the
    # run's error names it (it said "max_tokens=None" before).
    with OpenAIServer() as server:
        server.enqueue(ScriptedResponse(json_body=openai_completion(content="On and on", finish_reason="length")))
        async with worker(models=openai_models(server)):
            with pytest.raises(OutputLimitReached) as failed:
                await agent_client.run(AgentSpec(model="openai:gpt-test"), "ramble")
    assert server.requests[0].json["max_completion_tokens"] == DEFAULT_MAX_TOKENS
    assert failed.value.result is not None
    assert failed.value.result.error == (
        "the model stopped because it reached its output token limit (max_tokens=4096, the provider's "
        "default while AgentSpec.max_tokens is unset); raise AgentSpec.max_tokens (agentloop run "
        "--max-tokens) or ask for less"
    )


async def test_agentloop_run_max_tokens_is_the_limit_sent_and_named(
    tmp_path: Path, workspace: Path, dev_server: DevServer, task_queue: str
) -> None:
    from tests.test_cli import agentloop, clean_env

    with OpenAIServer() as server:
        server.enqueue(ScriptedResponse(json_body=openai_completion(content="On and", finish_reason="length")))
        env = clean_env(
            tmp_path, TEMPORAL_ADDRESS=dev_server.address, AGENTLOOP_TASK_QUEUE=task_queue,
            OPENAI_API_KEY="sk-test-fake", OPENAI_BASE_URL=server.base_url,
        )
        proc = await asyncio.to_thread(
            agentloop, "run", "Ramble", "--model", "openai:gpt-test", "--workspace", str(workspace),
            "--max-tokens", "77", "--local-worker", env=env, cwd=tmp_path,
        )
    assert proc.returncode == 1, proc.stderr
    assert server.requests[0].json["max_completion_tokens"] == 77
    assert "(max_tokens=77, from AgentSpec.max_tokens); raise AgentSpec.max_tokens" in proc.stdout + proc.stderr
