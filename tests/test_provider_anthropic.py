"""AnthropicChatModel against a local server speaking the Messages API over real HTTP."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest
from anthropic import AsyncAnthropic
from temporalio.exceptions import ApplicationError

from agentloop import AgentRunFailed, AgentSpec, OutputLimitReached
from agentloop.activities.anthropic_model import (
    DEFAULT_MAX_TOKENS,
    AnthropicChatModel,
    anthropic_image_source,
    map_anthropic_error,
    mark_conversation_tail,
    to_anthropic_messages,
    to_anthropic_request,
    to_anthropic_system,
    to_anthropic_tools,
)
from agentloop.activities.models import ModelResolver
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
from tests.helpers.provider_servers import (
    AnthropicServer,
    ErrorsSeen,
    ScriptedResponse,
    anthropic_error_body,
    anthropic_message,
    anthropic_message_events,
    anthropic_models,
    anthropic_stream,
    rechunk,
    unused_port,
)

API_KEY = "sk-ant-api03-Secret0123456789abcdefXYZ"

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
def clean_anthropic_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The SDK also finds credentials in profiles under ~/.config/anthropic and
    # in federation variables; an empty home keeps the developer's own out.
    for name in list(os.environ):
        if name.startswith("ANTHROPIC_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))


@pytest.fixture
def server() -> Iterator[AnthropicServer]:
    with AnthropicServer() as running:
        yield running


@pytest.fixture
async def client(server: AnthropicServer) -> AsyncIterator[AsyncAnthropic]:
    sdk = AsyncAnthropic(api_key=API_KEY, base_url=server.base_url, max_retries=0)
    yield sdk
    await sdk.close()


@pytest.fixture
def model(client: AsyncAnthropic) -> AnthropicChatModel:
    return AnthropicChatModel(client)


def simple_request(**overrides: Any) -> ModelRequest:
    fields: dict[str, Any] = {"model": "claude-test", "messages": [Message.user("Hello")]}
    fields.update(overrides)
    return ModelRequest(**fields)


def text_reply(text: str = "Hi", **kwargs: Any) -> ScriptedResponse:
    return ScriptedResponse(json_body=anthropic_message([{"type": "text", "text": text}], **kwargs))


async def complete_error(
    model: AnthropicChatModel, request: ModelRequest | None = None
) -> ApplicationError:
    with pytest.raises(ApplicationError) as caught:
        await model.complete(request or simple_request())
    return caught.value


async def complete_error_with(
    model: AnthropicChatModel, request: ModelRequest, on_delta: DeltaSink
) -> ApplicationError:
    with pytest.raises(ApplicationError) as caught:
        await model.complete(request, on_delta)
    return caught.value


# ---------------------------------------------------------------- request body


async def test_sends_the_whole_conversation_as_messages(
    server: AnthropicServer, model: AnthropicChatModel
) -> None:
    server.enqueue(text_reply("Sunny in Paris; Oslo timed out."))
    request = ModelRequest(
        model="claude-test",
        system_prompt="You are terse.",
        messages=[
            Message.user("Weather in Paris and Oslo?"),
            Message(
                role="assistant",
                content=[
                    ThinkingPart(text="Two calls.", signature="EqQBCkYIARgC"),
                    ThinkingPart(text="unsigned, so not sent back"),
                    TextPart(text="Checking."),
                    ToolCallPart(id="toolu_1", name="get_weather", arguments={"city": "Paris"}),
                    ToolCallPart(id="toolu_2", name="get_weather", arguments={"city": "Oslo"}),
                ],
            ),
            Message(
                role="tool",
                content=[
                    ToolResultPart(id="toolu_1", name="get_weather", content="sunny, 24C"),
                    ToolResultPart(id="toolu_2", name="get_weather", content="timeout", is_error=True),
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
        temperature=0.3,
        max_tokens=512,
        parallel_tool_calls=False,
    )

    response = await model.complete(request)

    assert response.message.text == "Sunny in Paris; Oslo timed out."
    assert len(server.requests) == 1
    sent = server.requests[0]
    assert sent.method == "POST"
    assert sent.path == "/v1/messages"
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    assert "anthropic-version" in sent.headers
    assert sent.json == {
        "model": "claude-test",
        "max_tokens": 512,
        "stream": True,
        "system": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Weather in Paris and Oslo?"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Two calls.", "signature": "EqQBCkYIARgC"},
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"city": "Oslo"}},
                ],
            },
            # The tool results and the next user message form one user turn,
            # results first.
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny, 24C"},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": "timeout", "is_error": True},
                    {"type": "text", "text": "And these pictures?"},
                    {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
                        # The conversation's tail: cached incrementally.
                        "cache_control": {"type": "ephemeral"},
                    },
                ],
            },
        ],
        "tools": [
            {
                "name": "get_weather",
                "description": "Current weather for a city.",
                "input_schema": WEATHER_TOOL.parameters,
                "cache_control": {"type": "ephemeral"},
            }
        ],
        "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
        "temperature": 0.3,
    }


async def test_defaults_max_tokens_and_sends_no_unset_options(
    server: AnthropicServer, model: AnthropicChatModel
) -> None:
    server.enqueue(text_reply())

    await model.complete(simple_request())

    assert server.requests[0].json == {
        "model": "claude-test",
        "max_tokens": DEFAULT_MAX_TOKENS,
        "stream": True,
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "Hello", "cache_control": {"type": "ephemeral"}}],
            }
        ],
    }
    assert DEFAULT_MAX_TOKENS == 4096


async def test_parallel_tool_calls_allowed_sends_no_tool_choice(
    server: AnthropicServer, model: AnthropicChatModel
) -> None:
    server.enqueue(text_reply())

    await model.complete(simple_request(tools=[WEATHER_TOOL]))

    body = server.requests[0].json
    assert "tool_choice" not in body
    assert body["tools"][0]["name"] == "get_weather"


async def test_unsendable_conversation_is_a_bad_request_and_sends_nothing(
    server: AnthropicServer, model: AnthropicChatModel
) -> None:
    request = simple_request(messages=[Message(role="user", content=[ToolCallPart(id="t", name="x")])])

    error = await complete_error(model, request)

    assert error.type == "ModelBadRequest"
    assert error.non_retryable
    assert server.requests == []


async def test_large_max_tokens_are_sent_as_the_answer_streams(
    server: AnthropicServer, model: AnthropicChatModel
) -> None:
    # The SDK refuses such limits only for non-streaming calls (its 10-minute rule).
    server.enqueue(text_reply())

    await model.complete(simple_request(max_tokens=100_000))

    assert server.requests[0].json["max_tokens"] == 100_000


# ---------------------------------------------------------------- prompt caching

EPHEMERAL = {"type": "ephemeral"}

SEARCH_TOOL = ToolDefinition(
    name="search",
    description="Search the web.",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}},
)


def breakpoints(body: Any, where: str = "") -> list[str]:
    """Where in ``body`` a ``cache_control`` is set, as paths like ``tools[1]``, sorted."""
    found: list[str] = []
    if isinstance(body, dict):
        if "cache_control" in body:
            found.append(where)
        for key, value in body.items():
            found += breakpoints(value, f"{where}.{key}" if where else key)
    elif isinstance(body, list):
        for index, value in enumerate(body):
            found += breakpoints(value, f"{where}[{index}]")
    return sorted(found)


async def test_cache_breakpoints_on_last_tool_system_and_conversation_tail(
    server: AnthropicServer, model: AnthropicChatModel
) -> None:
    server.enqueue(text_reply())
    request = ModelRequest(
        model="claude-test",
        system_prompt="You are terse.",
        messages=[
            Message.user("Weather in Paris?"),
            Message(
                role="assistant",
                content=[
                    ThinkingPart(text="One call.", signature="sig-1"),
                    ToolCallPart(id="toolu_1", name="get_weather", arguments={"city": "Paris"}),
                ],
            ),
            Message(
                role="tool",
                content=[ToolResultPart(id="toolu_1", name="get_weather", content="sunny, 24C")],
            ),
        ],
        tools=[SEARCH_TOOL, WEATHER_TOOL],
    )

    await model.complete(request)

    body = server.requests[0].json
    # At most 4 are allowed; tools, system and the tail use 3.
    assert breakpoints(body) == ["messages[2].content[0]", "system[0]", "tools[1]"]
    assert body["system"] == [{"type": "text", "text": "You are terse.", "cache_control": EPHEMERAL}]
    assert body["tools"][1]["cache_control"] == EPHEMERAL
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny, 24C", "cache_control": EPHEMERAL}
    ]


async def test_no_system_or_tool_breakpoints_without_them(
    server: AnthropicServer, model: AnthropicChatModel
) -> None:
    server.enqueue(text_reply())

    await model.complete(simple_request(system_prompt=""))

    body = server.requests[0].json
    assert "system" not in body
    assert "tools" not in body
    assert breakpoints(body) == ["messages[0].content[0]"]


async def test_system_messages_alone_still_get_a_system_breakpoint(
    server: AnthropicServer, model: AnthropicChatModel
) -> None:
    server.enqueue(text_reply())

    await model.complete(simple_request(messages=[Message.system("Rule one."), Message.user("hi")]))

    body = server.requests[0].json
    assert body["system"] == [{"type": "text", "text": "Rule one.", "cache_control": EPHEMERAL}]
    assert breakpoints(body) == ["messages[0].content[0]", "system[0]"]


@pytest.mark.parametrize(
    ("content", "marked"),
    [
        # Trailing thinking is passed over for the last block that may carry one.
        (
            [
                ThinkingPart(text="First.", signature="sig-1"),
                TextPart(text="Checking."),
                ThinkingPart(text="Then.", signature="sig-2"),
            ],
            1,
        ),
        (
            [
                TextPart(text="Checking."),
                ToolCallPart(id="toolu_1", name="get_weather", arguments={"city": "Oslo"}),
                ThinkingPart(text="Done.", signature="sig-3"),
            ],
            1,
        ),
        ([ThinkingPart(text="Only thinking.", signature="sig-4")], None),
    ],
    ids=["text-before-thinking", "tool-use-before-thinking", "thinking-only"],
)
async def test_tail_breakpoint_never_lands_on_a_thinking_block(
    server: AnthropicServer, model: AnthropicChatModel, content: list[Any], marked: int | None
) -> None:
    server.enqueue(text_reply())
    request = simple_request(
        messages=[Message.user("Weather in Oslo?"), Message(role="assistant", content=content)]
    )

    await model.complete(request)

    body = server.requests[0].json
    last = body["messages"][-1]
    assert last["role"] == "assistant"
    expected = [] if marked is None else [f"messages[1].content[{marked}]"]
    assert breakpoints(body) == expected
    for block in last["content"]:
        if block["type"] == "thinking":
            assert "cache_control" not in block


async def test_tail_breakpoint_on_a_trailing_image(
    server: AnthropicServer, model: AnthropicChatModel
) -> None:
    server.enqueue(text_reply())
    request = simple_request(
        messages=[
            Message(
                role="user",
                content=[TextPart(text="What is this?"), ImagePart(url="https://example.com/cat.png")],
            )
        ]
    )

    await model.complete(request)

    body = server.requests[0].json
    assert breakpoints(body) == ["messages[0].content[1]"]
    assert body["messages"][0]["content"][1]["type"] == "image"


async def test_breakpoint_moves_to_the_new_tail_and_the_prefix_stays_the_same(
    server: AnthropicServer, model: AnthropicChatModel
) -> None:
    # Step 1 writes the cache; step 2 reads that prefix back and writes the rest.
    server.enqueue(
        ScriptedResponse(
            json_body=anthropic_message(
                [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}],
                stop_reason="tool_use",
                input_tokens=4,
                output_tokens=20,
                cache_read_input_tokens=0,
                cache_creation_input_tokens=1500,
            )
        )
    )
    server.enqueue(
        text_reply(
            "Sunny.",
            input_tokens=3,
            output_tokens=6,
            cache_read_input_tokens=1500,
            cache_creation_input_tokens=40,
        )
    )
    conversation = [Message.user("Weather in Paris?")]
    first = await model.complete(
        ModelRequest(model="claude-test", system_prompt="Be terse.", messages=conversation, tools=[WEATHER_TOOL])
    )
    conversation += [
        first.message,
        Message(role="tool", content=[ToolResultPart(id="toolu_1", name="get_weather", content="sunny")]),
    ]

    second = await model.complete(
        ModelRequest(model="claude-test", system_prompt="Be terse.", messages=conversation, tools=[WEATHER_TOOL])
    )

    assert first.usage == Usage(input_tokens=1504, output_tokens=20, cached_input_tokens=0, requests=1)
    assert second.usage == Usage(input_tokens=1543, output_tokens=6, cached_input_tokens=1500, requests=1)
    one, two = (sent.json for sent in server.requests)
    assert breakpoints(one) == ["messages[0].content[0]", "system[0]", "tools[0]"]
    assert breakpoints(two) == ["messages[2].content[0]", "system[0]", "tools[0]"]
    assert one["tools"] == two["tools"]
    assert one["system"] == two["system"]
    # Apart from the moved breakpoint, step 1's conversation is step 2's prefix.
    del one["messages"][0]["content"][0]["cache_control"]
    assert two["messages"][:1] == one["messages"]


async def test_cache_read_only_usage_in_a_stream(
    server: AnthropicServer, model: AnthropicChatModel
) -> None:
    server.enqueue(
        anthropic_stream(
            [
                message_start(input_tokens=7, cache_read_input_tokens=2048, cache_creation_input_tokens=0),
                block_start(0, {"type": "text", "text": ""}),
                text_delta(0, "Hi"),
                block_stop(0),
                *message_end(output_tokens=2),
            ]
        )
    )

    response = await model.complete(simple_request())

    assert response.usage == Usage(input_tokens=2055, output_tokens=2, cached_input_tokens=2048, requests=1)


def test_mark_conversation_tail_without_messages_does_nothing() -> None:
    messages: list[dict[str, Any]] = []

    mark_conversation_tail(messages)

    assert messages == []


# ---------------------------------------------------------------- responses
#
# A whole answer scripted with anthropic_message() is streamed by the server
# as api.anthropic.com streams it (see AnthropicServer.as_asked); the
# streaming section below scripts the events themselves.


async def test_parses_text_thinking_tool_calls_and_usage(
    server: AnthropicServer, model: AnthropicChatModel
) -> None:
    server.enqueue(
        ScriptedResponse(
            json_body=anthropic_message(
                [
                    {"type": "thinking", "thinking": "Need the weather.", "signature": "sig-abc"},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "text", "text": "Let me check."},
                    {
                        "type": "tool_use",
                        "id": "toolu_01",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    },
                ],
                stop_reason="tool_use",
                model="claude-test-20250101",
                input_tokens=50,
                output_tokens=40,
                cache_read_input_tokens=1000,
                cache_creation_input_tokens=200,
            )
        )
    )

    response = await model.complete(simple_request(tools=[WEATHER_TOOL]))

    assert response.message == Message(
        role="assistant",
        content=[
            ThinkingPart(text="Need the weather.", signature="sig-abc"),
            TextPart(text="Let me check."),
            ToolCallPart(id="toolu_01", name="get_weather", arguments={"city": "Paris"}),
        ],
    )
    assert response.finish_reason == "tool_calls"
    assert response.raw_finish_reason == "tool_use"
    assert response.model == "claude-test-20250101"
    assert response.usage == Usage(
        input_tokens=1250, output_tokens=40, cached_input_tokens=1000, requests=1
    )


async def test_usage_without_cache_fields(server: AnthropicServer, model: AnthropicChatModel) -> None:
    server.enqueue(text_reply(input_tokens=21, output_tokens=3))

    response = await model.complete(simple_request())

    assert response.usage == Usage(input_tokens=21, output_tokens=3, cached_input_tokens=0, requests=1)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("tool_use", "tool_calls"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("refusal", "content_filter"),
        ("pause_turn", "other"),
        ("something_new", "other"),
    ],
)
async def test_finish_reasons(
    server: AnthropicServer, model: AnthropicChatModel, raw: str, expected: str
) -> None:
    server.enqueue(text_reply(stop_reason=raw))

    response = await model.complete(simple_request())

    assert response.finish_reason == expected
    assert response.raw_finish_reason == raw


async def test_non_object_tool_input_is_kept_with_an_error(
    server: AnthropicServer, model: AnthropicChatModel
) -> None:
    # A compatible server (proxy) may send what Anthropic never would.
    server.enqueue(
        ScriptedResponse(
            json_body=anthropic_message(
                [{"type": "tool_use", "id": "toolu_9", "name": "get_weather", "input": ["Paris"]}],
                stop_reason="tool_use",
            )
        )
    )

    response = await model.complete(simple_request(tools=[WEATHER_TOOL]))

    (call,) = response.message.tool_calls
    assert call.arguments == {}
    assert call.arguments_error == "the arguments must be a JSON object, not an array"
    assert call.raw_arguments == '["Paris"]'


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


def message_start(input_tokens: int = 13, **usage: int) -> dict[str, Any]:
    return anthropic_message_events(anthropic_message([], input_tokens=input_tokens, **usage))[0]


def message_end(stop_reason: str = "end_turn", output_tokens: int = 5) -> list[dict[str, Any]]:
    return [
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens},
        },
        {"type": "message_stop"},
    ]


def text_delta(index: int, text: str) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}}


def json_delta(index: int, partial_json: str) -> dict[str, Any]:
    return {
        "type": "content_block_delta",
        "index": index,
        "delta": {"type": "input_json_delta", "partial_json": partial_json},
    }


def block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def block_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


async def test_text_split_across_many_events_reaches_on_delta_in_order(
    server: AnthropicServer, model: AnthropicChatModel
) -> None:
    words = [f"word{i} " for i in range(40)]
    events = [message_start(), block_start(0, {"type": "text", "text": ""}), {"type": "ping"}]
    events += [text_delta(0, w) for w in words] + [block_stop(0), *message_end()]
    streamed = anthropic_stream(events)
    # Cut the bytes at arbitrary places too, as TCP may deliver them.
    server.enqueue(ScriptedResponse(body_chunks=rechunk(streamed.body_chunks or [], 7)))
    deltas = Deltas()

    response = await model.complete(simple_request(), deltas)

    assert response.message == Message(role="assistant", content=[TextPart(text="".join(words))])
    assert [d.text for d in deltas.received] == words
    assert set(deltas.kinds()) == {"text"}
    assert response.finish_reason == "stop"
    assert response.model == "claude-test-2025"


async def test_thinking_deltas_and_signatures(server: AnthropicServer, model: AnthropicChatModel) -> None:
    server.enqueue(
        ScriptedResponse(
            json_body=anthropic_message(
                [
                    {"type": "thinking", "thinking": "First, the city.", "signature": "sig-one"},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "thinking", "thinking": "Then the units.", "signature": "sig-two"},
                    {"type": "text", "text": "Paris, in Celsius."},
                ]
            )
        )
    )
    deltas = Deltas()

    response = await model.complete(simple_request(), deltas)

    assert response.message.content == [
        ThinkingPart(text="First, the city.", signature="sig-one"),
        ThinkingPart(text="Then the units.", signature="sig-two"),
        TextPart(text="Paris, in Celsius."),
    ]
    assert deltas.text("thinking") == "First, the city.Then the units."
    assert deltas.text() == "Paris, in Celsius."
    # Signatures are opaque: they are kept, not streamed.
    assert all("sig-" not in d.text for d in deltas.received)


async def test_signed_thinking_without_text_is_kept(
    server: AnthropicServer, model: AnthropicChatModel
) -> None:
    # Models that omit their thinking still sign the empty block; it must go back.
    server.enqueue(
        anthropic_stream(
            [
                message_start(),
                block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "signature_delta", "signature": "sig"},
                },
                block_stop(0),
                block_start(1, {"type": "text", "text": ""}),
                text_delta(1, "Done."),
                block_stop(1),
                *message_end(),
            ]
        )
    )

    response = await model.complete(simple_request())

    assert response.message.content == [ThinkingPart(text="", signature="sig"), TextPart(text="Done.")]


async def test_tool_call_arguments_split_across_events(
    server: AnthropicServer, model: AnthropicChatModel
) -> None:
    server.enqueue(
        anthropic_stream(
            [
                message_start(),
                block_start(0, {"type": "text", "text": ""}),
                text_delta(0, "Checking."),
                block_stop(0),
                block_start(1, {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}),
                json_delta(1, ""),
                json_delta(1, '{"ci'),
                json_delta(1, 'ty": "Pa'),
                json_delta(1, 'ris"}'),
                block_stop(1),
                *message_end("tool_use"),
            ]
        )
    )
    deltas = Deltas()

    response = await model.complete(simple_request(tools=[WEATHER_TOOL]), deltas)

    assert response.message.content == [
        TextPart(text="Checking."),
        ToolCallPart(id="toolu_1", name="get_weather", arguments={"city": "Paris"}),
    ]
    assert response.finish_reason == "tool_calls"
    assert deltas.received == [
        StreamDelta(kind="text", text="Checking."),
        StreamDelta(kind="tool_call_start", call_id="toolu_1", name="get_weather"),
        StreamDelta(kind="tool_call_delta", call_id="toolu_1", text='{"ci'),
        StreamDelta(kind="tool_call_delta", call_id="toolu_1", text='ty": "Pa'),
        StreamDelta(kind="tool_call_delta", call_id="toolu_1", text='ris"}'),
        StreamDelta(kind="tool_call_end", call_id="toolu_1"),
    ]


async def test_tool_call_without_block_stop_is_still_returned(
    server: AnthropicServer, model: AnthropicChatModel
) -> None:
    server.enqueue(
        anthropic_stream(
            [
                message_start(),
                block_start(0, {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}),
                json_delta(0, '{"city": "Oslo"}'),
                block_start(1, {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {}}),
                json_delta(1, '{"city": "Rome"}'),
                block_stop(1),
                *message_end("tool_use"),
            ]
        )
    )
    deltas = Deltas()

    response = await model.complete(simple_request(tools=[WEATHER_TOOL]), deltas)

    assert response.message.tool_calls == [
        ToolCallPart(id="toolu_1", name="get_weather", arguments={"city": "Oslo"}),
        ToolCallPart(id="toolu_2", name="get_weather", arguments={"city": "Rome"}),
    ]
    assert [d.call_id for d in deltas.received if d.kind == "tool_call_end"] == ["toolu_2", "toolu_1"]


async def test_invalid_json_arguments_are_kept_with_an_error(
    server: AnthropicServer, model: AnthropicChatModel
) -> None:
    server.enqueue(
        ScriptedResponse(
            json_body=anthropic_message(
                [{"type": "tool_use", "id": "toolu_9", "name": "get_weather", "input": '{"city": Paris}'}],
                stop_reason="tool_use",
            )
        )
    )

    response = await model.complete(simple_request(tools=[WEATHER_TOOL]))

    (call,) = response.message.tool_calls
    assert call.arguments == {}
    assert call.raw_arguments == '{"city": Paris}'
    assert call.arguments_error is not None and "not valid JSON" in call.arguments_error


async def test_stream_cut_off_mid_answer_is_retryable_and_keeps_the_deltas_sent(
    server: AnthropicServer, model: AnthropicChatModel
) -> None:
    server.enqueue(
        anthropic_stream(
            [
                message_start(),
                block_start(0, {"type": "text", "text": ""}),
                text_delta(0, "The answer "),
                text_delta(0, "is "),
            ],
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
    ]
    # The input tokens message_start reported were passed on before the break.
    assert deltas.usage and deltas.usage[-1].input_tokens > 0


async def test_overloaded_error_event_mid_stream_is_retryable(
    server: AnthropicServer, model: AnthropicChatModel
) -> None:
    server.enqueue(
        anthropic_stream(
            [
                message_start(),
                block_start(0, {"type": "text", "text": ""}),
                text_delta(0, "Partial"),
                {"type": "error", "error": {"type": "overloaded_error", "message": f"Overloaded {API_KEY}"}},
            ]
        )
    )
    deltas = Deltas()

    error = await complete_error_with(model, simple_request(), deltas)

    assert error.type == "ModelStreamBroken"
    assert not error.non_retryable
    assert error.__cause__ is None
    assert "overloaded_error" in error.message and "Overloaded" in error.message
    assert API_KEY not in error.message
    assert deltas.text() == "Partial"


async def test_stream_without_a_stop_reason_is_retryable(
    server: AnthropicServer, model: AnthropicChatModel
) -> None:
    server.enqueue(
        anthropic_stream(
            [message_start(), block_start(0, {"type": "text", "text": ""}), text_delta(0, "Half")]
        )
    )

    error = await complete_error(model)

    assert error.type == "ModelStreamBroken"
    assert not error.non_retryable
    assert "no stop_reason" in error.message


async def test_usage_from_message_start_and_the_last_message_delta(
    server: AnthropicServer, model: AnthropicChatModel
) -> None:
    server.enqueue(
        anthropic_stream(
            [
                message_start(input_tokens=50, cache_read_input_tokens=1000, cache_creation_input_tokens=200),
                block_start(0, {"type": "text", "text": ""}),
                text_delta(0, "Hi"),
                block_stop(0),
                # Newer servers repeat cumulative counts in message_delta.
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": 40, "input_tokens": 60, "cache_read_input_tokens": 1000},
                },
                {"type": "message_stop"},
            ]
        )
    )

    response = await model.complete(simple_request())

    assert response.usage == Usage(input_tokens=1260, output_tokens=40, cached_input_tokens=1000, requests=1)


async def test_deltas_add_up_to_the_final_message(
    server: AnthropicServer, model: AnthropicChatModel
) -> None:
    server.enqueue(
        ScriptedResponse(
            json_body=anthropic_message(
                [
                    {"type": "thinking", "thinking": "Two cities, two calls.", "signature": "sig"},
                    {"type": "text", "text": "Let me check the weather in both cities for you."},
                    {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {"city": "Paris"}},
                    {"type": "tool_use", "id": "toolu_b", "name": "get_weather", "input": {"city": "Oslo"}},
                ],
                stop_reason="tool_use",
            )
        )
    )
    deltas = Deltas()

    response = await model.complete(simple_request(tools=[WEATHER_TOOL]), deltas)

    message = response.message
    assert deltas.text() == message.text == "Let me check the weather in both cities for you."
    assert deltas.text("thinking") == "".join(p.text for p in message.content if isinstance(p, ThinkingPart))
    assert [(d.call_id, d.name) for d in deltas.received if d.kind == "tool_call_start"] == [
        (c.id, c.name) for c in message.tool_calls
    ]
    for call in message.tool_calls:
        assert json.loads(deltas.arguments(call.id)) == call.arguments
    assert [d.call_id for d in deltas.received if d.kind == "tool_call_end"] == ["toolu_a", "toolu_b"]


# ---------------------------------------------------------------- errors over HTTP


async def test_429_with_retry_after_seconds(server: AnthropicServer, model: AnthropicChatModel) -> None:
    server.enqueue(
        ScriptedResponse(
            status=429,
            headers={"retry-after": "7", "request-id": "req_011"},
            json_body=anthropic_error_body(
                "rate_limit_error", "This request would exceed the rate limit for your organization."
            ),
        )
    )

    error = await complete_error(model)

    assert error.type == "ModelRateLimited"
    assert not error.non_retryable
    assert error.next_retry_delay == timedelta(seconds=7)
    assert "exceed the rate limit" in error.message
    assert "req_011" in error.message
    assert error.__cause__ is None  # the SDK message is not recorded in history


async def test_429_with_retry_after_ms(server: AnthropicServer, model: AnthropicChatModel) -> None:
    server.enqueue(
        ScriptedResponse(
            status=429,
            headers={"retry-after-ms": "2500"},
            json_body=anthropic_error_body("rate_limit_error", "slow down"),
        )
    )

    error = await complete_error(model)

    assert error.next_retry_delay == timedelta(milliseconds=2500)


@pytest.mark.parametrize("status", [500, 503, 529, 408, 409])
async def test_server_side_statuses_are_retryable(
    server: AnthropicServer, model: AnthropicChatModel, status: int
) -> None:
    server.enqueue(
        ScriptedResponse(status=status, json_body=anthropic_error_body("overloaded_error", "Overloaded"))
    )

    error = await complete_error(model)

    assert error.type == "ModelServerError"
    assert not error.non_retryable
    assert str(status) in error.message and "Overloaded" in error.message


async def test_503_with_retry_after_is_delayed(server: AnthropicServer, model: AnthropicChatModel) -> None:
    server.enqueue(
        ScriptedResponse(
            status=503,
            headers={"retry-after": "30"},
            json_body=anthropic_error_body("api_error", "Internal server error"),
        )
    )

    error = await complete_error(model)

    assert error.type == "ModelServerError"
    assert error.next_retry_delay == timedelta(seconds=30)


async def test_401_says_what_to_fix_and_hides_the_key(
    server: AnthropicServer, model: AnthropicChatModel
) -> None:
    server.enqueue(
        ScriptedResponse(
            status=401,
            json_body=anthropic_error_body("authentication_error", f"invalid x-api-key {API_KEY}"),
        )
    )

    error = await complete_error(model)

    assert error.type == "ModelAuthenticationError"
    assert error.non_retryable
    assert error.next_retry_delay is None
    assert "Anthropic rejected the API key (401)" in error.message
    assert "check ANTHROPIC_API_KEY in the worker's environment" in error.message
    assert "invalid x-api-key" in error.message
    assert API_KEY not in error.message and API_KEY not in str(error)
    assert "Secret0123" not in error.message


async def test_403_is_an_authentication_error(server: AnthropicServer, model: AnthropicChatModel) -> None:
    server.enqueue(
        ScriptedResponse(
            status=403,
            json_body=anthropic_error_body("permission_error", "Your API key does not have permission."),
        )
    )

    error = await complete_error(model)

    assert error.type == "ModelAuthenticationError"
    assert error.non_retryable
    assert "403" in error.message


async def test_400_is_a_bad_request_with_the_provider_message(
    server: AnthropicServer, model: AnthropicChatModel
) -> None:
    server.enqueue(
        ScriptedResponse(
            status=400,
            json_body=anthropic_error_body(
                "invalid_request_error",
                "messages.1.content.0: unexpected `tool_use_id` found in `tool_result` blocks",
            ),
        )
    )

    error = await complete_error(model)

    assert error.type == "ModelBadRequest"
    assert error.non_retryable
    assert "400" in error.message
    assert "unexpected `tool_use_id` found" in error.message


async def test_prompt_too_long_is_a_context_length_error(
    server: AnthropicServer, model: AnthropicChatModel
) -> None:
    server.enqueue(
        ScriptedResponse(
            status=400,
            json_body=anthropic_error_body(
                "invalid_request_error", "prompt is too long: 212345 tokens > 200000 maximum"
            ),
        )
    )

    error = await complete_error(model)

    assert error.type == "ModelContextLengthExceeded"
    assert error.non_retryable
    assert "212345 tokens" in error.message


async def test_connection_refused_is_a_retryable_connection_error() -> None:
    base_url = f"http://127.0.0.1:{unused_port()}"
    client = AsyncAnthropic(api_key=API_KEY, base_url=base_url, max_retries=0)
    try:
        error = await complete_error(AnthropicChatModel(client))
    finally:
        await client.close()

    assert error.type == "ModelConnectionError"
    assert not error.non_retryable
    assert f"{base_url}/v1/messages" in error.message
    assert API_KEY not in error.message


async def test_dropped_connection_is_a_retryable_connection_error(
    server: AnthropicServer, model: AnthropicChatModel
) -> None:
    server.enqueue(ScriptedResponse(drop_connection=True))

    error = await complete_error(model)

    assert error.type == "ModelConnectionError"
    assert not error.non_retryable


def test_timeout_is_a_retryable_connection_error() -> None:
    request = httpx2.Request(
        "POST", "https://api.anthropic.com/v1/messages", headers={"authorization": f"Bearer {API_KEY}"}
    )

    error = map_anthropic_error(anthropic.APITimeoutError(request=request))

    assert error.type == "ModelConnectionError"
    assert not error.non_retryable
    assert "timed out" in error.message


# ---------------------------------------------------------------- from_env


async def test_from_env_without_key_is_a_configuration_error() -> None:
    with pytest.raises(ApplicationError) as caught:
        AnthropicChatModel.from_env()

    error = caught.value
    assert error.type == "ModelConfigurationError"
    assert error.non_retryable
    assert "ANTHROPIC_API_KEY" in error.message
    assert "worker's environment" in error.message


async def test_from_env_reads_key_and_base_url(
    server: AnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
    server.enqueue(text_reply("from env"))

    model = AnthropicChatModel.from_env()
    try:
        response = await model.complete(simple_request())
    finally:
        await model.client.close()

    assert response.message.text == "from env"
    assert model.client.max_retries == 0
    assert server.requests[0].headers["authorization"] == f"Bearer {API_KEY}"


async def test_from_env_with_key_defaults_to_api_anthropic_com(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)

    model = AnthropicChatModel.from_env()

    assert str(model.client.base_url).startswith("https://api.anthropic.com")
    await model.client.close()


async def test_model_without_client_reports_missing_configuration_on_first_call() -> None:
    error = await complete_error(AnthropicChatModel())

    assert error.type == "ModelConfigurationError"
    assert error.non_retryable


# ---------------------------------------------------------------- pure functions


def test_consecutive_same_role_messages_are_merged() -> None:
    messages = to_anthropic_messages(
        [
            Message.user("one"),
            Message.user("two"),
            Message.assistant("three"),
            Message.assistant("four"),
        ]
    )

    assert messages == [
        {"role": "user", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "three"}, {"type": "text", "text": "four"}],
        },
    ]


def test_tool_results_lead_their_user_turn() -> None:
    messages = to_anthropic_messages(
        [
            Message.assistant(tool_calls=[ToolCallPart(id="t1", name="x", arguments={"a": 1})]),
            Message(role="user", content=[TextPart(text="note"), ToolResultPart(id="t1", content="")]),
        ]
    )

    assert messages == [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {"a": 1}}]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1"}, {"type": "text", "text": "note"}],
        },
    ]


def test_empty_text_and_empty_messages_are_left_out() -> None:
    messages = to_anthropic_messages(
        [
            Message.user("hi"),
            Message(role="assistant", content=[TextPart(text=""), ThinkingPart(text="no signature")]),
            Message.user("again"),
        ]
    )

    assert messages == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "again"}]}
    ]


def test_system_messages_join_the_system_prompt() -> None:
    conversation = [Message.system("Rule two."), Message.user("hi"), Message.system("Rule three.")]

    assert to_anthropic_system("Rule one.", conversation) == "Rule one.\n\nRule two.\n\nRule three."
    assert to_anthropic_system("", [Message.user("hi")]) == ""
    assert to_anthropic_messages(conversation) == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    ]
    with pytest.raises(ValueError, match="only hold text"):
        to_anthropic_system("", [Message(role="system", content=[ImagePart(url="https://x/y.png")])])


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        (Message(role="user", content=[ToolCallPart(id="c", name="t")]), "only assistant"),
        (Message(role="tool", content=[ToolCallPart(id="c", name="t")]), "only assistant"),
        (Message(role="assistant", content=[ToolResultPart(id="c", content="x")]), "cannot hold tool results"),
        (Message(role="assistant", content=[ImagePart(url="https://x/y.png")]), "no images"),
        (Message(role="user", content=[ImagePart()]), "needs a url or data"),
    ],
)
def test_to_anthropic_messages_rejects_what_it_cannot_express(message: Message, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        to_anthropic_messages([message])


def test_image_sources() -> None:
    assert anthropic_image_source(ImagePart(url="data:image/jpeg;base64,/9j/4AAQ")) == {
        "type": "base64",
        "media_type": "image/jpeg",
        "data": "/9j/4AAQ",
    }
    assert anthropic_image_source(ImagePart(url="https://x/y.png")) == {"type": "url", "url": "https://x/y.png"}
    with pytest.raises(ValueError, match="must be base64"):
        anthropic_image_source(ImagePart(url="data:text/plain,hello"))
    with pytest.raises(ValueError, match="media_type"):
        anthropic_image_source(ImagePart(data="AAAA"))


def test_to_anthropic_tools_omits_empty_description() -> None:
    assert to_anthropic_tools([ToolDefinition(name="noop")]) == [
        {"name": "noop", "input_schema": {"type": "object", "properties": {}}}
    ]


def test_to_anthropic_request_temperature_zero_is_sent() -> None:
    params = to_anthropic_request(simple_request(temperature=0.0, max_tokens=10))

    assert params["extra_body"] == {"temperature": 0.0}
    assert params["max_tokens"] == 10


# ---------------------------------------------------------------- attempts, in a real run


async def test_a_broken_stream_says_whether_the_step_is_retried_and_why(agent_client, worker) -> None:
    # A TCP reset mid-stream: the transport's error has no text of its own,
    # its reason ("Connection reset by peer") is deep in its cause chain.
    events = [message_start(), block_start(0, {"type": "text", "text": ""}), text_delta(0, "The answer ")]
    broken = anthropic_stream(events, reset_stream=True)
    with AnthropicServer() as server:
        server.enqueue(broken, broken)
        url = f"{server.origin}/v1/messages"
        seen = ErrorsSeen(AnthropicChatModel(AsyncAnthropic(base_url=server.origin, api_key="k", max_retries=0)))
        async with worker(models=ModelResolver({"anthropic": lambda provider, name: seen})):
            with pytest.raises(AgentRunFailed) as failed:
                await agent_client.run(AgentSpec(model="anthropic:claude-test", llm_max_attempts=2), "hello")

    broke = (
        f"Anthropic's stream from {url} broke off mid-answer: "
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
    # The spec sets no max_tokens: Anthropic's provider sent its 4096, and the
    # run's error names it (it said "max_tokens=None" before).
    with AnthropicServer() as server:
        server.enqueue(ScriptedResponse(json_body=anthropic_message(
            [{"type": "text", "text": "On and on"}], stop_reason="max_tokens")))
        async with worker(models=anthropic_models(server)):
            with pytest.raises(OutputLimitReached) as failed:
                await agent_client.run(AgentSpec(model="anthropic:claude-test"), "ramble")
    assert server.requests[0].json["max_tokens"] == DEFAULT_MAX_TOKENS == 4096
    assert failed.value.result is not None
    assert failed.value.result.error == (
        "the model stopped because it reached its output token limit (max_tokens=4096, the provider's "
        "default while AgentSpec.max_tokens is unset); raise AgentSpec.max_tokens (agentloop run "
        "--max-tokens) or ask for less"
    )
