"""What only AnthropicChatModel does, against a local server speaking the
Messages API over real HTTP: the request body and message conversion, prompt
caching, signed and redacted thinking, the stream's own events and usage
fields. What both providers promise is in test_providers.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError

from agentloop.activities.providers.anthropic_model import (
    AnthropicChatModel,
    anthropic_image_source,
    map_anthropic_error,
    mark_conversation_tail,
    to_anthropic_messages,
    to_anthropic_system,
    to_anthropic_tools,
)
from agentloop.shared.base.errors import MODEL_BAD_REQUEST_ERROR_TYPE, MODEL_RATE_LIMITED_ERROR_TYPE
from agentloop.shared.base.messages import ImagePart, Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from agentloop.shared.base.usage import Usage
from agentloop.shared.definition.activity_io import ModelRequest, ToolDefinition
from tests.helpers.provider_cases import ANTHROPIC_CASE, WEATHER_TOOL, Deltas, whole_conversation
from tests.helpers.servers.provider_servers import (
    AnthropicServer,
    ScriptedResponse,
    anthropic_message,
    anthropic_message_events,
    anthropic_stream,
)

API_KEY = ANTHROPIC_CASE.api_key

@pytest.fixture(autouse=True)
def clean_anthropic_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The SDK also finds credentials in profiles under ~/.config/anthropic and
    # in federation variables; an empty home keeps the developer's own out.
    ANTHROPIC_CASE.clean_env(monkeypatch)
    monkeypatch.setenv("HOME", str(tmp_path))


@pytest.fixture
def server() -> Iterator[AnthropicServer]:
    with ANTHROPIC_CASE.server() as running:
        yield running


@pytest.fixture
async def model(server: AnthropicServer) -> AsyncIterator[AnthropicChatModel]:
    client = ANTHROPIC_CASE.client(server.base_url)
    yield AnthropicChatModel(client)
    await client.close()


def simple_request(**overrides: Any) -> ModelRequest:
    return ANTHROPIC_CASE.request(**overrides)


def text_reply(text: str = "Hi", **kwargs: Any) -> ScriptedResponse:
    return ScriptedResponse(json_body=anthropic_message([{"type": "text", "text": text}], **kwargs))


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


# ---------------------------------------------------------------- request body


async def test_sends_the_whole_conversation_as_messages(
    server: AnthropicServer, model: AnthropicChatModel
) -> None:
    server.enqueue(text_reply("Sunny in Paris; Oslo timed out."))
    request = whole_conversation("claude-test")

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
        "max_tokens": 256,
        "stream": True,
        "system": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Weather in Paris and Oslo?"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Two calls.", "signature": "EqQBCkYIARgC"},
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}},
                    {"type": "tool_use", "id": "call_2", "name": "get_weather", "input": {"city": "Oslo"}},
                ],
            },
            # The tool results and the next user message form one user turn,
            # results first.
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "call_1", "content": "sunny, 24C"},
                    {"type": "tool_result", "tool_use_id": "call_2", "content": "timeout", "is_error": True},
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
        "temperature": 0.2,
    }


async def test_parallel_tool_calls_allowed_sends_no_tool_choice(
    server: AnthropicServer, model: AnthropicChatModel
) -> None:
    server.enqueue(text_reply())

    await model.complete(simple_request(tools=[WEATHER_TOOL]))

    body = server.requests[0].json
    assert "tool_choice" not in body
    assert body["tools"][0]["name"] == "get_weather"


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


# ---------------------------------------------------------------- streaming


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


async def test_input_usage_is_passed_on_before_a_stream_breaks(
    server: AnthropicServer, model: AnthropicChatModel
) -> None:
    # message_start reports the input tokens; a stream that breaks later has
    # already passed them on (the rest of the break: test_providers.py).
    server.enqueue(
        anthropic_stream(
            [message_start(input_tokens=21), block_start(0, {"type": "text", "text": ""}),
             text_delta(0, "The answer ")],
            break_stream=True,
        )
    )
    deltas = Deltas()

    with pytest.raises(ApplicationError) as caught:
        await model.complete(simple_request(), deltas)

    assert caught.value.type == "ModelStreamBroken"
    assert deltas.usage and deltas.usage[-1].input_tokens == 21


# ---------------------------------------------------------------- errors


def test_quota_codes_apply_only_where_the_provider_declares_them() -> None:
    # Anthropic's SDK has no `code`: its 429s are rate limits, retried.
    error = map_anthropic_error(ANTHROPIC_CASE.status_error(429, "slow down", code="insufficient_quota"))

    assert error.type == MODEL_RATE_LIMITED_ERROR_TYPE
    assert not error.non_retryable


def test_context_length_codes_apply_only_where_the_provider_declares_them() -> None:
    error = map_anthropic_error(ANTHROPIC_CASE.status_error(400, "bad", type="context_length_exceeded"))

    assert error.type == MODEL_BAD_REQUEST_ERROR_TYPE


# ---------------------------------------------------------------- message conversion


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
