"""The provider contract: what OpenAIChatModel and AnthropicChatModel both
promise, written once and run for each (the ``provider`` parameter, see
:mod:`tests.helpers.provider_cases`).

Most tests go over real HTTP, through the real ``openai`` / ``anthropic``
SDKs, to a local server speaking the provider's wire format. The error
mapping is also tested on the SDKs' own exception classes, built as the SDKs
build them. What only one provider does is in test_openai_provider.py and
test_anthropic_provider.py.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import httpx2
import pytest
from temporalio.exceptions import ApplicationError

from agentloop.shared.base.errors import (
    MODEL_AUTHENTICATION_ERROR_TYPE,
    MODEL_BAD_REQUEST_ERROR_TYPE,
    MODEL_CONNECTION_ERROR_TYPE,
    MODEL_CONTEXT_LENGTH_ERROR_TYPE,
    MODEL_ERROR_TYPE,
    MODEL_RATE_LIMITED_ERROR_TYPE,
    MODEL_SERVER_ERROR_TYPE,
    MODEL_STREAM_BROKEN_ERROR_TYPE,
)
from agentloop.shared.base.messages import Message, TextPart, ToolCallPart, ToolResultPart
from agentloop.shared.base.usage import Usage
from agentloop.shared.definition.activity_io import DeltaSink, ModelRequest, StreamDelta
from tests.helpers.provider_cases import (
    ANTHROPIC_CASE,
    CASES,
    OPENAI_CASE,
    WEATHER_TOOL,
    Deltas,
    ProviderCase,
    reset_by_peer,
)
from tests.helpers.servers.provider_servers import ScriptedHTTPServer, ScriptedResponse, unused_port


@pytest.fixture(params=CASES, ids=lambda case: case.id)
def provider(request: pytest.FixtureRequest) -> ProviderCase:
    return request.param


@pytest.fixture(autouse=True)
def clean_provider_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The Anthropic SDK also finds credentials in profiles under
    # ~/.config/anthropic: an empty home keeps the developer's own out.
    for case in CASES:
        case.clean_env(monkeypatch)
    monkeypatch.setenv("HOME", str(tmp_path))


@pytest.fixture
def server(provider: ProviderCase) -> Iterator[ScriptedHTTPServer]:
    with provider.server() as running:
        yield running


@pytest.fixture
async def model(provider: ProviderCase, server: ScriptedHTTPServer) -> AsyncIterator[Any]:
    client = provider.client(server.base_url)
    yield provider.model(client)
    await client.close()


async def complete_error(
    model: Any, request: ModelRequest, on_delta: DeltaSink | None = None
) -> ApplicationError:
    with pytest.raises(ApplicationError) as caught:
        await model.complete(request, on_delta)
    return caught.value


# ---------------------------------------------------------------- request body

#: The whole body of a request that sets nothing but the model and "Hello".
MINIMAL_BODY = {
    "openai": {
        "model": "gpt-test",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "Hello"}],
        "max_completion_tokens": 4096,
    },
    "anthropic": {
        "model": "claude-test",
        "max_tokens": 4096,
        "stream": True,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Hello", "cache_control": {"type": "ephemeral"}}]}
        ],
    },
}


async def test_unset_options_are_not_sent_but_an_output_limit_is(
    provider: ProviderCase, server: ScriptedHTTPServer, model: Any
) -> None:
    server.enqueue(provider.reply(text="Hi"))

    response = await model.complete(provider.request())

    # Without a limit a local model that rambles on generates until its
    # context is full; the default bounds it, and the answer says what was sent.
    assert server.requests[0].json == MINIMAL_BODY[provider.id]
    assert provider.default_max_tokens == 4096
    assert response.max_tokens == provider.default_max_tokens


async def test_zero_temperature_and_a_zero_limit_are_sent(
    provider: ProviderCase, server: ScriptedHTTPServer, model: Any
) -> None:
    server.enqueue(provider.reply(text="Hi"))

    # Zero is a value, not "unset".
    response = await model.complete(provider.request(temperature=0.0, max_tokens=0))

    sent = server.requests[0].json
    assert sent["temperature"] == 0.0
    assert sent[provider.limit_field] == 0
    assert response.max_tokens == 0


async def test_unsendable_conversation_is_a_bad_request_and_sends_nothing(
    provider: ProviderCase, server: ScriptedHTTPServer, model: Any
) -> None:
    request = provider.request(messages=[Message(role="user", content=[ToolCallPart(id="c1", name="x")])])

    error = await complete_error(model, request)

    assert error.type == MODEL_BAD_REQUEST_ERROR_TYPE
    assert error.non_retryable
    assert f"cannot send this conversation to {provider.name}" in error.message
    assert "message 0 (user)" in error.message
    assert server.requests == []


# ---------------------------------------------------------------- responses
#
# A whole answer scripted with provider.reply() is streamed by the server as
# the provider streams it (see the servers' as_asked); the streaming section
# below scripts the events themselves.


async def test_parses_text_and_usage_with_cached_tokens(
    provider: ProviderCase, server: ScriptedHTTPServer, model: Any
) -> None:
    dated = f"{provider.model_name}-2025-01-01"
    server.enqueue(
        provider.reply(text="Hello there.", input_tokens=1200, output_tokens=30, cached_tokens=1024, model=dated)
    )

    response = await model.complete(provider.request())

    assert response.message == Message(role="assistant", content=[TextPart(text="Hello there.")])
    assert response.finish_reason == "stop"
    assert response.raw_finish_reason == provider.raw_finish["stop"]
    assert response.model == dated
    # Cached tokens are part of the input tokens, whichever way the provider counts them.
    assert response.usage == Usage(input_tokens=1200, output_tokens=30, cached_input_tokens=1024, requests=1)


async def test_parses_tool_calls(provider: ProviderCase, server: ScriptedHTTPServer, model: Any) -> None:
    server.enqueue(
        provider.reply(
            text="Let me check.",
            calls=[
                ("call_a", "get_weather", '{"city": "Paris"}'),
                ("call_b", "get_weather", '{"city": "Oslo", "units": "C"}'),
            ],
        )
    )

    response = await model.complete(provider.request(tools=[WEATHER_TOOL]))

    assert response.finish_reason == "tool_calls"
    assert response.raw_finish_reason == provider.raw_finish["tool_calls"]
    assert response.message.text == "Let me check."
    assert response.message.tool_calls == [
        ToolCallPart(id="call_a", name="get_weather", arguments={"city": "Paris"}),
        ToolCallPart(id="call_b", name="get_weather", arguments={"city": "Oslo", "units": "C"}),
    ]


async def test_tool_calls_make_the_finish_reason_tool_calls(
    provider: ProviderCase, server: ScriptedHTTPServer, model: Any
) -> None:
    # Some compatible servers say "stop" even when they return calls.
    server.enqueue(provider.reply(calls=[("c1", "get_weather", '{"city": "Rome"}')], finish="stop"))

    response = await model.complete(provider.request(tools=[WEATHER_TOOL]))

    assert response.finish_reason == "tool_calls"
    assert response.raw_finish_reason == provider.raw_finish["stop"]


FINISH_REASONS = [
    (OPENAI_CASE, "stop", "stop"),
    (OPENAI_CASE, "length", "length"),
    (OPENAI_CASE, "content_filter", "content_filter"),
    (OPENAI_CASE, "tool_calls", "tool_calls"),
    (OPENAI_CASE, "function_call", "tool_calls"),
    (OPENAI_CASE, "eos_token", "other"),
    (ANTHROPIC_CASE, "end_turn", "stop"),
    (ANTHROPIC_CASE, "stop_sequence", "stop"),
    (ANTHROPIC_CASE, "tool_use", "tool_calls"),
    (ANTHROPIC_CASE, "max_tokens", "length"),
    (ANTHROPIC_CASE, "model_context_window_exceeded", "length"),
    (ANTHROPIC_CASE, "refusal", "content_filter"),
    (ANTHROPIC_CASE, "pause_turn", "other"),
    (ANTHROPIC_CASE, "something_new", "other"),
]


@pytest.mark.parametrize(
    ("provider", "raw", "expected"), FINISH_REASONS, ids=[f"{case.id}-{raw}" for case, raw, _ in FINISH_REASONS]
)
async def test_finish_reasons(
    provider: ProviderCase, server: ScriptedHTTPServer, model: Any, raw: str, expected: str
) -> None:
    server.enqueue(provider.reply(text="x", raw_finish=raw))

    response = await model.complete(provider.request())

    assert response.finish_reason == expected
    assert response.raw_finish_reason == raw


@pytest.mark.parametrize(
    ("raw_arguments", "problem"),
    [
        ('{"city": "Paris"', "not valid JSON"),
        ('{"city": Paris}', "not valid JSON"),
        ("city=Paris", "not valid JSON"),
        ('["Paris"]', "must be a JSON object, not an array"),
        ('"Paris"', "must be a JSON object, not a string"),
        ("null", "must be a JSON object, not null"),
    ],
)
async def test_invalid_tool_arguments_are_kept_with_an_error(
    provider: ProviderCase, server: ScriptedHTTPServer, model: Any, raw_arguments: str, problem: str
) -> None:
    # The arguments arrive in pieces, as the provider streams them; a
    # compatible server (a proxy) may send what the provider never would.
    server.enqueue(provider.reply(calls=[("call_x", "get_weather", raw_arguments)]))

    response = await model.complete(provider.request(tools=[WEATHER_TOOL]))

    (call,) = response.message.tool_calls
    assert call.id == "call_x"
    assert call.name == "get_weather"
    assert call.arguments == {}
    assert call.raw_arguments == raw_arguments
    assert call.arguments_error is not None and problem in call.arguments_error
    assert response.finish_reason == "tool_calls"


async def test_empty_arguments_text_means_no_arguments(
    provider: ProviderCase, server: ScriptedHTTPServer, model: Any
) -> None:
    server.enqueue(provider.reply(calls=[("c1", "list_files", "")]))

    response = await model.complete(provider.request())

    assert response.message.tool_calls == [ToolCallPart(id="c1", name="list_files", arguments={})]


async def test_thinking_comes_before_the_text(
    provider: ProviderCase, server: ScriptedHTTPServer, model: Any
) -> None:
    server.enqueue(provider.reply(thinking="6 times 7.", text="42"))

    response = await model.complete(provider.request())

    assert response.message.content == [provider.thinking_part("6 times 7."), TextPart(text="42")]


async def test_cached_tokens_across_steps_with_the_prefix_sent_unchanged(
    provider: ProviderCase, server: ScriptedHTTPServer, model: Any
) -> None:
    # Step 1 caches the prefix; step 2 reads it back. input_tokens always
    # counts the cached ones, so the usage of the steps adds up.
    server.enqueue(
        provider.reply(calls=[("call_1", "get_weather", '{"city": "Paris"}')], input_tokens=1100, output_tokens=20),
        provider.reply(text="Sunny.", input_tokens=1140, output_tokens=3, cached_tokens=1024),
    )
    conversation = [Message.user("Weather in Paris?")]
    first = await model.complete(
        provider.request(system_prompt="Be terse.", messages=conversation, tools=[WEATHER_TOOL])
    )
    conversation += [
        first.message,
        Message(role="tool", content=[ToolResultPart(id="call_1", name="get_weather", content="sunny")]),
    ]

    second = await model.complete(
        provider.request(system_prompt="Be terse.", messages=conversation, tools=[WEATHER_TOOL])
    )

    assert first.usage == Usage(input_tokens=1100, output_tokens=20, cached_input_tokens=0, requests=1)
    assert second.usage == Usage(input_tokens=1140, output_tokens=3, cached_input_tokens=1024, requests=1)
    assert (first.usage + second.usage).cached_input_tokens == 1024
    one, two = (without_cache_markup(sent.json) for sent in server.requests)
    assert one["tools"] == two["tools"]
    assert one.get("system") == two.get("system")
    assert two["messages"][: len(one["messages"])] == one["messages"]
    assert len(two["messages"]) > len(one["messages"])


def without_cache_markup(body: Any) -> Any:
    """``body`` without Anthropic's ``cache_control`` marks (which move to the tail)."""
    if isinstance(body, dict):
        return {key: without_cache_markup(value) for key, value in body.items() if key != "cache_control"}
    if isinstance(body, list):
        return [without_cache_markup(value) for value in body]
    return body


# ---------------------------------------------------------------- streaming


async def test_text_split_across_many_chunks_reaches_on_delta_in_order(
    provider: ProviderCase, server: ScriptedHTTPServer, model: Any
) -> None:
    words = [f"word{i} " for i in range(40)]
    # The bytes are cut at arbitrary places too, as TCP may deliver them.
    server.enqueue(
        provider.stream(
            [("text", word) for word in words], input_tokens=100, output_tokens=40, cached_tokens=64, chunk_size=7
        )
    )
    deltas = Deltas()

    response = await model.complete(provider.request(), deltas)

    assert response.message == Message(role="assistant", content=[TextPart(text="".join(words))])
    assert [d.text for d in deltas.received] == words
    assert set(deltas.kinds()) == {"text"}
    assert response.usage == Usage(input_tokens=100, output_tokens=40, cached_input_tokens=64, requests=1)
    assert response.finish_reason == "stop"
    assert response.model == f"{provider.model_name}-2025"


async def test_tool_call_arguments_split_across_chunks(
    provider: ProviderCase, server: ScriptedHTTPServer, model: Any
) -> None:
    server.enqueue(
        provider.stream(
            [
                ("text", "Checking."),
                ("call", "call_a", "get_weather"),
                ("args", "call_a", '{"ci'),
                ("args", "call_a", 'ty": "Pa'),
                ("args", "call_a", 'ris"}'),
            ],
            finish="tool_calls",
        )
    )
    deltas = Deltas()

    response = await model.complete(provider.request(tools=[WEATHER_TOOL]), deltas)

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
        StreamDelta(kind="tool_call_end", call_id="call_a"),
    ]


async def test_stream_cut_off_mid_answer_is_retryable_and_keeps_the_deltas_sent(
    provider: ProviderCase, server: ScriptedHTTPServer, model: Any
) -> None:
    server.enqueue(
        provider.stream(
            [("text", "The answer "), ("text", "is "), ("call", "call_a", "get_weather")],
            finish=None,
            break_stream=True,
        )
    )
    deltas = Deltas()

    error = await complete_error(model, provider.request(), deltas)

    assert error.type == MODEL_STREAM_BROKEN_ERROR_TYPE
    assert not error.non_retryable
    assert error.__cause__ is None
    assert "broke off mid-answer" in error.message and "retried" in error.message
    assert provider.api_key not in error.message
    assert deltas.received == [
        StreamDelta(kind="text", text="The answer "),
        StreamDelta(kind="text", text="is "),
        StreamDelta(kind="tool_call_start", call_id="call_a", name="get_weather"),
    ]


async def test_error_event_mid_stream_is_retryable_and_redacted(
    provider: ProviderCase, server: ScriptedHTTPServer, model: Any
) -> None:
    said = f"The server had an error ({provider.api_key})"
    server.enqueue(provider.stream([("text", "Partial"), ("error", provider.error_event_type, said)], finish=None))
    deltas = Deltas()

    error = await complete_error(model, provider.request(), deltas)

    assert error.type == MODEL_STREAM_BROKEN_ERROR_TYPE
    assert not error.non_retryable
    assert error.__cause__ is None
    assert f"{provider.name} sent an error mid-answer ({provider.error_event_type})" in error.message
    assert "The server had an error" in error.message
    assert provider.api_key not in error.message
    assert deltas.text() == "Partial"


async def test_stream_without_a_finish_is_retryable(
    provider: ProviderCase, server: ScriptedHTTPServer, model: Any
) -> None:
    server.enqueue(provider.stream([("text", "Half an ans")], finish=None))

    error = await complete_error(model, provider.request())

    assert error.type == MODEL_STREAM_BROKEN_ERROR_TYPE
    assert not error.non_retryable
    assert f"{provider.name}'s stream ended before the answer did ({provider.missing_finish}" in error.message


async def test_deltas_add_up_to_the_final_message(
    provider: ProviderCase, server: ScriptedHTTPServer, model: Any
) -> None:
    server.enqueue(
        provider.reply(
            thinking="Two cities, two calls.",
            text="Let me check the weather in both cities for you.",
            calls=[
                ("call_a", "get_weather", '{"city": "Paris", "units": "metric"}'),
                ("call_b", "get_weather", '{"city": "Oslo"}'),
            ],
        )
    )
    deltas = Deltas()

    response = await model.complete(provider.request(tools=[WEATHER_TOOL]), deltas)

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
    provider: ProviderCase, server: ScriptedHTTPServer, model: Any
) -> None:
    reply = provider.reply(text="Same either way.", calls=[("call_a", "get_weather", '{"city": "Paris"}')])
    server.enqueue(reply, reply)

    streamed = await model.complete(provider.request(), Deltas())
    plain = await model.complete(provider.request())

    assert streamed == plain
    assert plain.message.text == "Same either way."


# ---------------------------------------------------------------- errors over HTTP


async def test_429_with_retry_after_seconds(provider: ProviderCase, server: ScriptedHTTPServer, model: Any) -> None:
    server.enqueue(
        provider.error(
            429,
            "Rate limit reached for the model on tokens per min.",
            type="rate_limit_error",
            headers={"retry-after": "7", provider.request_id_header: "req_abc"},
        )
    )

    error = await complete_error(model, provider.request())

    assert error.type == MODEL_RATE_LIMITED_ERROR_TYPE
    assert not error.non_retryable
    assert error.next_retry_delay == timedelta(seconds=7)
    assert "Rate limit reached for the model" in error.message
    assert "req_abc" in error.message
    assert error.__cause__ is None  # the SDK message is not recorded in history


async def test_429_with_retry_after_ms(provider: ProviderCase, server: ScriptedHTTPServer, model: Any) -> None:
    server.enqueue(
        provider.error(
            429, "slow down", type="rate_limit_error", headers={"retry-after-ms": "1500", "retry-after": "2"}
        )
    )

    error = await complete_error(model, provider.request())

    assert error.type == MODEL_RATE_LIMITED_ERROR_TYPE
    assert error.next_retry_delay == timedelta(milliseconds=1500)


@pytest.mark.parametrize("status", [408, 409, 500, 502, 503, 504, 529])
async def test_server_side_statuses_are_retryable(
    provider: ProviderCase, server: ScriptedHTTPServer, model: Any, status: int
) -> None:
    server.enqueue(provider.error(status, "The server had an error.", type="api_error"))

    error = await complete_error(model, provider.request())

    assert error.type == MODEL_SERVER_ERROR_TYPE
    assert not error.non_retryable
    assert error.next_retry_delay is None
    assert f"{provider.name} server error ({status})" in error.message
    assert "The server had an error." in error.message


async def test_503_with_retry_after_is_delayed(provider: ProviderCase, server: ScriptedHTTPServer, model: Any) -> None:
    server.enqueue(provider.error(503, "Internal server error", type="api_error", headers={"retry-after": "30"}))

    error = await complete_error(model, provider.request())

    assert error.type == MODEL_SERVER_ERROR_TYPE
    assert error.next_retry_delay == timedelta(seconds=30)


async def test_503_with_retry_after_http_date(provider: ProviderCase, server: ScriptedHTTPServer, model: Any) -> None:
    when = datetime.now(UTC) + timedelta(hours=1)
    server.enqueue(
        provider.error(503, "overloaded", type="api_error", headers={"retry-after": format_datetime(when, usegmt=True)})
    )

    error = await complete_error(model, provider.request())

    assert error.type == MODEL_SERVER_ERROR_TYPE
    assert error.next_retry_delay is not None
    # The date has whole seconds; the slack only allows for a slow machine.
    assert timedelta(minutes=50) < error.next_retry_delay <= timedelta(hours=1)


async def test_proxy_html_error_page(provider: ProviderCase, server: ScriptedHTTPServer, model: Any) -> None:
    server.enqueue(
        ScriptedResponse(
            status=502, headers={"content-type": "text/html"}, raw_body=b"<html><body>502 Bad Gateway</body></html>"
        )
    )

    error = await complete_error(model, provider.request())

    assert error.type == MODEL_SERVER_ERROR_TYPE
    assert not error.non_retryable
    assert "502 Bad Gateway" in error.message


async def test_401_says_what_to_fix_and_hides_the_key(
    provider: ProviderCase, server: ScriptedHTTPServer, model: Any
) -> None:
    key = provider.api_key
    masked = key[:8] + "*" * 20 + key[-4:]
    server.enqueue(
        provider.error(
            401, f"Incorrect API key provided: {masked}. (sent: {key})", type="authentication_error"
        )
    )

    error = await complete_error(model, provider.request())

    assert error.type == MODEL_AUTHENTICATION_ERROR_TYPE
    assert error.non_retryable
    assert error.next_retry_delay is None
    assert f"{provider.name} rejected the API key (401)" in error.message
    assert f"check {provider.provider.key_variable} in the worker's environment" in error.message
    assert "Incorrect API key provided" in error.message
    assert key not in error.message and key not in str(error)
    assert masked not in error.message
    assert "Secret0123" not in error.message


async def test_403_is_an_authentication_error(provider: ProviderCase, server: ScriptedHTTPServer, model: Any) -> None:
    server.enqueue(provider.error(403, "Your key does not have access to this model", type="permission_error"))

    error = await complete_error(model, provider.request())

    assert error.type == MODEL_AUTHENTICATION_ERROR_TYPE
    assert error.non_retryable
    assert "403" in error.message and "does not have access" in error.message


async def test_400_is_a_bad_request_with_the_provider_message(
    provider: ProviderCase, server: ScriptedHTTPServer, model: Any
) -> None:
    server.enqueue(provider.error(400, "messages.1.content.0: unexpected `tool_use_id` found in `tool_result` blocks"))

    error = await complete_error(model, provider.request())

    assert error.type == MODEL_BAD_REQUEST_ERROR_TYPE
    assert error.non_retryable
    assert error.next_retry_delay is None
    assert f"{provider.name} rejected the request (400)" in error.message
    assert "unexpected `tool_use_id` found" in error.message


async def test_unknown_model_404_is_a_bad_request(
    provider: ProviderCase, server: ScriptedHTTPServer, model: Any
) -> None:
    server.enqueue(provider.error(404, "The model `nope-1` does not exist", type="not_found_error"))

    error = await complete_error(model, provider.request())

    assert error.type == MODEL_BAD_REQUEST_ERROR_TYPE
    assert error.non_retryable
    assert "404" in error.message and "nope-1" in error.message


async def test_context_length_error_by_message(provider: ProviderCase, server: ScriptedHTTPServer, model: Any) -> None:
    response, wording = provider.context_length_error()
    server.enqueue(response)

    error = await complete_error(model, provider.request())

    assert error.type == MODEL_CONTEXT_LENGTH_ERROR_TYPE
    assert error.non_retryable
    assert wording in error.message


async def test_connection_refused_is_a_retryable_connection_error(provider: ProviderCase) -> None:
    origin = f"http://127.0.0.1:{unused_port()}"
    client = provider.client(provider.sdk_base_url(origin))
    try:
        error = await complete_error(provider.model(client), provider.request())
    finally:
        await client.close()

    assert error.type == MODEL_CONNECTION_ERROR_TYPE
    assert not error.non_retryable
    assert f"cannot reach {provider.name} at {origin}{provider.endpoint}" in error.message
    assert provider.api_key not in error.message


async def test_dropped_connection_is_a_retryable_connection_error(
    provider: ProviderCase, server: ScriptedHTTPServer, model: Any
) -> None:
    server.enqueue(ScriptedResponse(drop_connection=True))

    error = await complete_error(model, provider.request())

    assert error.type == MODEL_CONNECTION_ERROR_TYPE
    assert not error.non_retryable


# ---------------------------------------------------------------- from_env


async def test_from_env_without_key_is_a_configuration_error(provider: ProviderCase) -> None:
    with pytest.raises(ApplicationError) as caught:
        provider.model_class.from_env()

    error = caught.value
    assert error.type == "ModelConfigurationError"
    assert error.non_retryable
    assert provider.provider.key_variable in error.message
    assert "worker's environment" in error.message


async def test_from_env_with_key_talks_to_the_providers_api(
    provider: ProviderCase, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(provider.provider.key_variable, provider.api_key)

    model = provider.model_class.from_env()

    assert model.client.api_key == provider.api_key
    assert model.client.max_retries == 0
    assert str(model.client.base_url).startswith(provider.public_api)
    await model.client.close()


async def test_from_env_with_key_and_base_url(
    provider: ProviderCase, server: ScriptedHTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(provider.provider.key_variable, provider.api_key)
    monkeypatch.setenv(provider.provider.base_url_variable, server.base_url)
    server.enqueue(provider.reply(text="from env"))

    model = provider.model_class.from_env()
    try:
        response = await model.complete(provider.request())
    finally:
        await model.client.close()

    assert response.message.text == "from env"
    assert model.client.max_retries == 0
    assert server.requests[0].headers["authorization"] == f"Bearer {provider.api_key}"


async def test_model_without_client_reports_missing_configuration_on_first_call(provider: ProviderCase) -> None:
    error = await complete_error(provider.model_class(), provider.request())

    assert error.type == "ModelConfigurationError"
    assert error.non_retryable


# ---------------------------------------------------------------- error mapping, on the SDKs' own exceptions
#
# Built as the SDKs build them (an httpx2 request and response): every
# status, header form and failure without a status, beyond what the server
# above is scripted with.


def test_timeout_is_a_retryable_connection_error(provider: ProviderCase) -> None:
    url = f"https://user:pw@api.example.com{provider.endpoint}?api-key=zzz"
    request = httpx2.Request("POST", url, headers={provider.key_header: provider.key_value(provider.api_key)})

    error = provider.map_error(provider.sdk.APITimeoutError(request=request))

    assert error.type == MODEL_CONNECTION_ERROR_TYPE
    assert not error.non_retryable
    assert error.message == f"{provider.name} request to https://api.example.com{provider.endpoint} timed out"


def test_unexpected_exception_is_retryable_and_redacted(provider: ProviderCase) -> None:
    error = provider.map_error(RuntimeError(f"boom with {provider.api_key}"))

    assert error.type == MODEL_ERROR_TYPE
    assert not error.non_retryable
    assert "boom" in error.message
    assert provider.api_key not in error.message


STATUS_TABLE = [
    # status, type, retryable
    (400, MODEL_BAD_REQUEST_ERROR_TYPE, False),
    (401, MODEL_AUTHENTICATION_ERROR_TYPE, False),
    (403, MODEL_AUTHENTICATION_ERROR_TYPE, False),
    (404, MODEL_BAD_REQUEST_ERROR_TYPE, False),
    (408, MODEL_SERVER_ERROR_TYPE, True),
    (409, MODEL_SERVER_ERROR_TYPE, True),
    (413, MODEL_BAD_REQUEST_ERROR_TYPE, False),
    (422, MODEL_BAD_REQUEST_ERROR_TYPE, False),
    (429, MODEL_RATE_LIMITED_ERROR_TYPE, True),
    (500, MODEL_SERVER_ERROR_TYPE, True),
    (502, MODEL_SERVER_ERROR_TYPE, True),
    (503, MODEL_SERVER_ERROR_TYPE, True),
    (529, MODEL_SERVER_ERROR_TYPE, True),  # Anthropic's "overloaded"
    (302, MODEL_SERVER_ERROR_TYPE, True),  # not an error status: a proxy's doing
]


@pytest.mark.parametrize(("status", "error_type", "retryable"), STATUS_TABLE)
def test_status_code_table(provider: ProviderCase, status: int, error_type: str, retryable: bool) -> None:
    headers = {"retry-after-ms": "1500", provider.request_id_header: "req_42"}

    error = provider.map_error(provider.status_error(status, "the server said no", headers=headers))

    assert error.type == error_type
    assert error.non_retryable is not retryable
    # The server's retry-after is the next delay, but only where a retry comes.
    assert error.next_retry_delay == (timedelta(milliseconds=1500) if retryable else None)
    assert "the server said no" in error.message
    assert error.message.startswith(provider.name) or error.message.startswith("the conversation")
    assert error.message.endswith(" [request id req_42]")


def test_authentication_errors_name_the_workers_variable(provider: ProviderCase) -> None:
    unauthorized = provider.map_error(provider.status_error(401, "invalid x-api-key"))
    forbidden = provider.map_error(provider.status_error(403, "not allowed"))

    name, variable = provider.name, provider.provider.key_variable
    assert unauthorized.message == (
        f"{name} rejected the API key (401): check {variable} in the worker's environment "
        f"({name} said: invalid x-api-key)"
    )
    assert forbidden.message == (
        f"{name} refused access (403): check that the key in {variable} on the worker may use "
        f"{provider.provider.access_scope} ({name} said: not allowed)"
    )


CONTEXT_LENGTH = [
    (OPENAI_CASE, "too long", {"code": "context_length_exceeded"}),
    (OPENAI_CASE, "too long", {"type": "exceed_context_size_error"}),  # llama.cpp
    (OPENAI_CASE, "This model's maximum context length is 8192 tokens", {}),  # vLLM
    (ANTHROPIC_CASE, "prompt is too long: 212345 tokens > 200000 maximum", {}),
    (ANTHROPIC_CASE, "input length and `max_tokens` exceed context limit: 1 + 2 > 3", {}),
]


@pytest.mark.parametrize(
    ("provider", "message", "error"),
    CONTEXT_LENGTH,
    ids=["openai-code", "openai-llama.cpp-type", "openai-vllm-message", "anthropic-message", "anthropic-older-message"],
)
def test_context_length_has_its_own_type(provider: ProviderCase, message: str, error: dict[str, str]) -> None:
    mapped = provider.map_error(provider.status_error(400, message, **error))

    assert mapped.type == MODEL_CONTEXT_LENGTH_ERROR_TYPE
    assert mapped.non_retryable
    assert mapped.message.startswith(
        f"the conversation does not fit the model's context window ({provider.name} 400)"
    )


@pytest.mark.parametrize(
    ("headers", "delay"),
    [
        ({"retry-after-ms": "250"}, timedelta(milliseconds=250)),
        ({"Retry-After": "7"}, timedelta(seconds=7)),
        ({"retry-after-ms": "250", "retry-after": "9"}, timedelta(milliseconds=250)),
        ({"retry-after": "0.5"}, timedelta(seconds=0.5)),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "-3"}, None),
        ({"retry-after-ms": "nan"}, None),
        ({"retry-after": "Sun, 01 Jun 2025 11:59:00 GMT"}, None),  # a date already past
        ({}, None),
    ],
)
def test_retry_after_is_the_next_delay(
    provider: ProviderCase, headers: dict[str, str], delay: timedelta | None
) -> None:
    for status in (429, 503):
        error = provider.map_error(provider.status_error(status, headers=headers))

        assert not error.non_retryable
        assert error.next_retry_delay == delay


def test_the_key_is_masked_in_every_mapped_message(provider: ProviderCase) -> None:
    key = provider.api_key
    request = provider.sdk_request()
    connection = provider.sdk.APIConnectionError(request=request)
    connection.__cause__ = OSError(f"proxy refused {key}")
    failures = [
        (provider.status_error(401, f"Incorrect API key provided: {key}"), False),
        (provider.status_error(500, f"upstream got {key}"), False),
        (connection, False),
        (connection, True),
        (provider.error_event("overloaded_error", f"echo {key}"), True),
        (httpx2.ReadError(f"reset while sending {key}", request=request), True),
        (RuntimeError(f"boom with {key}"), False),  # no request: the key's shape gives it away
        (RuntimeError(f"boom with {key}"), True),
    ]
    for exc, mid_stream in failures:
        message = provider.map_error(exc, mid_stream=mid_stream).message

        assert key not in message, message
        assert "[redacted]" in message, message


def test_a_key_without_the_sk_shape_is_masked_when_it_travelled_with_the_request(provider: ProviderCase) -> None:
    key = "plainsecretvalue123"
    request = provider.sdk_request(key)
    response = httpx2.Response(500, request=request, json={})
    exc = provider.sdk.APIStatusError("x", response=response, body={"message": f"echo {key}"})

    error = provider.map_error(exc)

    assert key not in error.message
    assert "echo [redacted]" in error.message


def test_errors_without_a_status(provider: ProviderCase) -> None:
    name, sdk = provider.name, provider.sdk
    request = httpx2.Request("POST", "https://user:pw@proxy.example/v1/x?key=zzz")
    connection = sdk.APIConnectionError(request=request)
    connection.__cause__ = httpx2.ConnectError("[Errno 111] Connection refused")
    invalid = sdk.APIResponseValidationError(httpx2.Response(200, request=request), body=None)

    timed_out = provider.map_error(sdk.APITimeoutError(request=request))
    unreachable = provider.map_error(connection)
    unfit = provider.map_error(invalid)
    other = provider.map_error(KeyError("what"))

    assert timed_out.message == f"{name} request to https://proxy.example/v1/x timed out"
    assert unreachable.message == (
        f"cannot reach {name} at https://proxy.example/v1/x: [Errno 111] Connection refused; check "
        f"{provider.provider.base_url_variable} and the network on the worker"
    )
    assert unfit.message == f"{name} returned a response that does not fit its API (200)"
    assert other.message == f"{name} call failed: KeyError: 'what'"
    assert [e.type for e in (timed_out, unreachable, unfit, other)] == [
        MODEL_CONNECTION_ERROR_TYPE,
        MODEL_CONNECTION_ERROR_TYPE,
        MODEL_SERVER_ERROR_TYPE,
        MODEL_ERROR_TYPE,
    ]
    assert not any(e.non_retryable for e in (timed_out, unreachable, unfit, other))


def test_whatever_breaks_mid_stream_is_a_retryable_broken_stream(provider: ProviderCase) -> None:
    name, url, sdk = provider.name, provider.url, provider.sdk
    request = provider.sdk_request()
    connection = sdk.APIConnectionError(request=request)
    connection.__cause__ = reset_by_peer(request)
    bare_connection = sdk.APIConnectionError(request=request)
    event_error = provider.error_event("overloaded_error", "Overloaded")
    reason = "ReadError: ConnectionResetError: [Errno 104] Connection reset by peer"
    cases = [
        (sdk.APITimeoutError(request=request), f"{name}'s stream from {url} timed out mid-answer"),
        (connection, f"{name}'s stream from {url} broke off mid-answer: {reason}"),
        (bare_connection, f"{name}'s stream from {url} broke off mid-answer: connection error"),
        (event_error, f"{name} sent an error mid-answer (overloaded_error): Overloaded"),
        (reset_by_peer(request), f"{name}'s stream from {url} broke off mid-answer: {reason}"),
        (reset_by_peer(None), f"{name}'s stream broke off mid-answer: {reason}"),
        (httpx2.ReadTimeout("", request=request), f"{name}'s stream from {url} timed out mid-answer (ReadTimeout)"),
        (ValueError("bad chunk"), f"{name}'s stream broke off mid-answer: ValueError: bad chunk"),
    ]
    for exc, what in cases:
        error = provider.map_error(exc, mid_stream=True)

        assert error.message == f"{what}; the step can be retried"
        assert error.type == MODEL_STREAM_BROKEN_ERROR_TYPE
        assert not error.non_retryable
        assert error.next_retry_delay is None
