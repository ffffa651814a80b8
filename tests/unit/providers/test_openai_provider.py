"""What only OpenAIChatModel does, against a local server speaking Chat
Completions over real HTTP: the request body and message conversion, what
compatible servers (vLLM, llama.cpp, Ollama) send differently, refusals,
quota errors. What both providers promise is in test_providers.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import openai
import pytest
from temporalio.exceptions import ApplicationError

from agentloop.activities.providers.openai_model import (
    LOCAL_SERVER_API_KEY,
    OpenAIChatModel,
    map_openai_error,
    to_openai_messages,
    to_openai_tools,
)
from agentloop.shared.base.errors import MODEL_RATE_LIMITED_ERROR_TYPE
from agentloop.shared.base.messages import ImagePart, Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from agentloop.shared.base.usage import Usage
from agentloop.shared.definition.activity_io import ModelRequest, ToolDefinition
from tests.helpers.provider_cases import OPENAI_CASE, WEATHER_TOOL, Deltas, whole_conversation
from tests.helpers.servers.provider_servers import (
    OpenAIServer,
    ScriptedResponse,
    openai_chunk,
    openai_completion,
    openai_error_body,
    openai_stream,
)

API_KEY = OPENAI_CASE.api_key

@pytest.fixture(autouse=True)
def clean_openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    OPENAI_CASE.clean_env(monkeypatch)


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OPENAI_CASE.server() as running:
        yield running


@pytest.fixture
async def model(server: OpenAIServer) -> AsyncIterator[OpenAIChatModel]:
    client = OPENAI_CASE.client(server.base_url)
    yield OpenAIChatModel(client)
    await client.close()


def simple_request(**overrides: Any) -> ModelRequest:
    return OPENAI_CASE.request(**overrides)


async def complete_error(model: OpenAIChatModel, request: ModelRequest | None = None) -> ApplicationError:
    with pytest.raises(ApplicationError) as caught:
        await model.complete(request or simple_request())
    return caught.value


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


# ---------------------------------------------------------------- request body


async def test_sends_the_whole_conversation_as_chat_completions(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.enqueue(ScriptedResponse(json_body=openai_completion(content="It is sunny in both.")))
    request = whole_conversation("gpt-test")

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
                    {"type": "text", "text": "And these pictures?"},
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


# ---------------------------------------------------------------- responses


async def test_refusal_is_kept_as_text_and_reported_as_content_filter(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.enqueue(ScriptedResponse(json_body=openai_completion(refusal="I can't help with that.")))

    response = await model.complete(simple_request())

    assert response.message.text == "I can't help with that."
    assert response.finish_reason == "content_filter"
    assert response.raw_finish_reason == "stop"


async def test_missing_usage_counts_the_request(server: OpenAIServer, model: OpenAIChatModel) -> None:
    server.enqueue(ScriptedResponse(json_body=openai_completion(content="x", usage=False)))

    response = await model.complete(simple_request())

    assert response.usage == Usage(requests=1)


@pytest.mark.parametrize(
    "details",
    [None, {}, {"cached_tokens": None}, {"audio_tokens": 0}, "absent"],
    ids=["null-details", "empty-details", "null-cached", "no-cached-field", "no-details-field"],
)
async def test_usage_without_cached_tokens_counts_none_cached(
    server: OpenAIServer, model: OpenAIChatModel, details: dict[str, Any] | str | None
) -> None:
    # vLLM, llama.cpp and Ollama send no (or partial) prompt_tokens_details.
    usage: dict[str, Any] = {"prompt_tokens": 90, "completion_tokens": 4, "total_tokens": 94}
    if details != "absent":
        usage["prompt_tokens_details"] = details
    server.enqueue(openai_stream([content("ok"), finish(), openai_chunk(choices=False, usage=usage)]))

    response = await model.complete(simple_request())

    assert response.usage == Usage(input_tokens=90, output_tokens=4, cached_input_tokens=0, requests=1)


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


async def test_stream_with_done_but_no_finish_reason_is_retryable(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    # Without [DONE] too: test_providers.py.
    server.enqueue(openai_stream([content("Half an ans")], done=True))

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


# ---------------------------------------------------------------- errors


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


def test_an_exhausted_openai_quota_is_not_retried() -> None:
    error = map_openai_error(
        OPENAI_CASE.status_error(429, "You exceeded your current quota", code="insufficient_quota")
    )

    assert error.type == MODEL_RATE_LIMITED_ERROR_TYPE
    assert error.non_retryable
    assert error.next_retry_delay is None
    assert "check the plan and billing of the key in OPENAI_API_KEY" in error.message


def test_an_openai_error_event_names_its_code() -> None:
    request = OPENAI_CASE.sdk_request()
    body = {"message": "The server had an error", "type": "server_error", "code": "internal"}

    error = map_openai_error(openai.APIError("x", request, body=body), mid_stream=True)

    assert error.message.startswith("OpenAI sent an error mid-answer (internal): The server had an error;")


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


# ---------------------------------------------------------------- from_env


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


# ---------------------------------------------------------------- message conversion


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
