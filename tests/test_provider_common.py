"""The plumbing both providers share (activities/provider_common.py), for
both SDKs' exception classes: the status-code table, retry-after as the next
delay, secrets masked in every message, errors mid-stream, the client from
the environment and the streamed call.

Errors are the SDKs' own classes, built as the SDKs build them (an httpx2
request and response); what a real server makes the SDKs raise is covered
end to end in test_provider_openai.py and test_provider_anthropic.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from types import ModuleType
from typing import Any, Self

import anthropic
import httpx2
import openai
import pytest
from anthropic import AsyncAnthropic
from openai import AsyncOpenAI
from temporalio.exceptions import ApplicationError

from agentloop.activities.anthropic_model import ANTHROPIC, map_anthropic_error
from agentloop.activities.openai_model import OPENAI, map_openai_error
from agentloop.activities.provider_common import Provider, SDKErrors, tool_declaration, transport_reason
from agentloop.shared.activity_io import ModelResponse, ToolDefinition
from agentloop.shared.errors import (
    MODEL_AUTHENTICATION_ERROR_TYPE,
    MODEL_BAD_REQUEST_ERROR_TYPE,
    MODEL_CONFIGURATION_ERROR_TYPE,
    MODEL_CONNECTION_ERROR_TYPE,
    MODEL_CONTEXT_LENGTH_ERROR_TYPE,
    MODEL_ERROR_TYPE,
    MODEL_RATE_LIMITED_ERROR_TYPE,
    MODEL_SERVER_ERROR_TYPE,
    MODEL_STREAM_BROKEN_ERROR_TYPE,
)
from agentloop.shared.messages import Message

API_KEY = "sk-test-Secret0123456789abcdefXYZ"


@dataclass(frozen=True)
class SDK:
    """One provider as these tests drive it: its description, its SDK module,
    its public mapping function, and where its requests carry the key and
    its responses the request id."""

    provider: Provider
    module: ModuleType
    map_error: Any
    url: str
    key_header: str
    request_id_header: str

    def request(self) -> httpx2.Request:
        return httpx2.Request("POST", self.url, headers={self.key_header: self.key_value})

    @property
    def key_value(self) -> str:
        return f"Bearer {API_KEY}" if self.key_header == "authorization" else API_KEY

    def status_error(
        self, status: int, message: str = "nope", *, headers: dict[str, str] | None = None, **error: Any
    ) -> Exception:
        body = {"type": "error", "error": {"message": message, **error}}
        if self.module is openai:
            body = {"message": message, **error}  # the OpenAI SDK keeps the inner object
        response = httpx2.Response(status, request=self.request(), headers=headers or {}, json=body)
        return self.module.APIStatusError(f"Error code: {status}", response=response, body=body)

    def error_event(self, error_type: str, message: str) -> Exception:
        """What the SDK raises for an ``error`` event in a stream."""
        error = {"type": error_type, "message": message}
        if self.module is openai:
            return openai.APIError(message, self.request(), body=error)
        # Anthropic's SDK raises it as a status error of the (200) response.
        body = {"type": "error", "error": error}
        response = httpx2.Response(200, request=self.request(), json=body)
        return anthropic.APIStatusError(str(body), response=response, body=body)


OPENAI_SDK = SDK(
    OPENAI, openai, map_openai_error, "https://api.openai.com/v1/chat/completions", "authorization", "x-request-id"
)
ANTHROPIC_SDK = SDK(
    ANTHROPIC, anthropic, map_anthropic_error, "https://api.anthropic.com/v1/messages", "x-api-key", "request-id"
)
BOTH = pytest.mark.parametrize("sdk", [OPENAI_SDK, ANTHROPIC_SDK], ids=["openai", "anthropic"])


# ---------------------------------------------------------------- the status-code table


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


@BOTH
@pytest.mark.parametrize(("status", "error_type", "retryable"), STATUS_TABLE)
def test_status_code_table(sdk: SDK, status: int, error_type: str, retryable: bool) -> None:
    headers = {"retry-after-ms": "1500", sdk.request_id_header: "req_42"}

    error = sdk.map_error(sdk.status_error(status, "the server said no", headers=headers))

    assert error.type == error_type
    assert error.non_retryable is not retryable
    # The server's retry-after is the next delay, but only where a retry comes.
    assert error.next_retry_delay == (timedelta(milliseconds=1500) if retryable else None)
    assert "the server said no" in error.message
    assert error.message.startswith(sdk.provider.name) or error.message.startswith("the conversation")
    assert error.message.endswith(" [request id req_42]")


@BOTH
def test_authentication_errors_name_the_workers_variable(sdk: SDK) -> None:
    unauthorized = sdk.map_error(sdk.status_error(401, "invalid x-api-key"))
    forbidden = sdk.map_error(sdk.status_error(403, "not allowed"))

    name, variable = sdk.provider.name, sdk.provider.key_variable
    assert unauthorized.message == (
        f"{name} rejected the API key (401): check {variable} in the worker's environment "
        f"({name} said: invalid x-api-key)"
    )
    assert forbidden.message == (
        f"{name} refused access (403): check that the key in {variable} on the worker may use "
        f"{sdk.provider.access_scope} ({name} said: not allowed)"
    )


def test_an_exhausted_openai_quota_is_not_retried() -> None:
    error = map_openai_error(
        OPENAI_SDK.status_error(429, "You exceeded your current quota", code="insufficient_quota")
    )

    assert error.type == MODEL_RATE_LIMITED_ERROR_TYPE
    assert error.non_retryable
    assert error.next_retry_delay is None
    assert "check the plan and billing of the key in OPENAI_API_KEY" in error.message


def test_quota_codes_apply_only_where_the_provider_declares_them() -> None:
    # Anthropic's SDK has no `code`: its 429s are rate limits, retried.
    error = map_anthropic_error(ANTHROPIC_SDK.status_error(429, "slow down", code="insufficient_quota"))

    assert error.type == MODEL_RATE_LIMITED_ERROR_TYPE
    assert not error.non_retryable


@pytest.mark.parametrize(
    ("sdk", "message", "error"),
    [
        (OPENAI_SDK, "too long", {"code": "context_length_exceeded"}),
        (OPENAI_SDK, "too long", {"type": "exceed_context_size_error"}),  # llama.cpp
        (OPENAI_SDK, "This model's maximum context length is 8192 tokens", {}),  # vLLM
        (ANTHROPIC_SDK, "prompt is too long: 212345 tokens > 200000 maximum", {}),
        (ANTHROPIC_SDK, "input length and `max_tokens` exceed context limit: 1 + 2 > 3", {}),
    ],
    ids=["openai-code", "llama.cpp-type", "vllm-message", "anthropic-message", "anthropic-older-message"],
)
def test_context_length_has_its_own_type(sdk: SDK, message: str, error: dict[str, str]) -> None:
    mapped = sdk.map_error(sdk.status_error(400, message, **error))

    assert mapped.type == MODEL_CONTEXT_LENGTH_ERROR_TYPE
    assert mapped.non_retryable
    assert mapped.message.startswith(f"the conversation does not fit the model's context window ({sdk.provider.name} 400)")


def test_context_length_codes_apply_only_where_the_provider_declares_them() -> None:
    error = map_anthropic_error(ANTHROPIC_SDK.status_error(400, "bad", type="context_length_exceeded"))

    assert error.type == MODEL_BAD_REQUEST_ERROR_TYPE


# ---------------------------------------------------------------- retry-after


@BOTH
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
def test_retry_after_is_the_next_delay(sdk: SDK, headers: dict[str, str], delay: timedelta | None) -> None:
    for status in (429, 503):
        error = sdk.map_error(sdk.status_error(status, headers=headers))

        assert not error.non_retryable
        assert error.next_retry_delay == delay


@BOTH
def test_retry_after_as_an_http_date_in_the_future(sdk: SDK) -> None:
    when = datetime.now(UTC) + timedelta(hours=1)

    error = sdk.map_error(sdk.status_error(429, headers={"retry-after": format_datetime(when, usegmt=True)}))

    assert error.next_retry_delay is not None
    assert timedelta(minutes=50) < error.next_retry_delay <= timedelta(hours=1)


# ---------------------------------------------------------------- secrets


@BOTH
def test_the_key_is_masked_in_every_mapped_message(sdk: SDK) -> None:
    request = sdk.request()
    cause = OSError(f"proxy refused {API_KEY}")
    connection = sdk.module.APIConnectionError(request=request)
    connection.__cause__ = cause
    failures = [
        (sdk.status_error(401, f"Incorrect API key provided: {API_KEY}"), False),
        (sdk.status_error(500, f"upstream got {API_KEY}"), False),
        (connection, False),
        (connection, True),
        (sdk.error_event("overloaded_error", f"echo {API_KEY}"), True),
        (httpx2.ReadError(f"reset while sending {API_KEY}", request=request), True),
        (RuntimeError(f"boom with {API_KEY}"), False),  # no request: the key's shape gives it away
        (RuntimeError(f"boom with {API_KEY}"), True),
    ]
    for exc, mid_stream in failures:
        message = sdk.map_error(exc, mid_stream=mid_stream).message

        assert API_KEY not in message, message
        assert "[redacted]" in message, message


@BOTH
def test_a_key_without_the_sk_shape_is_masked_when_it_travelled_with_the_request(sdk: SDK) -> None:
    key = "plainsecretvalue123"
    request = httpx2.Request("POST", sdk.url, headers={sdk.key_header: key})
    response = httpx2.Response(500, request=request, json={})
    exc = sdk.module.APIStatusError("x", response=response, body={"message": f"echo {key}"})

    error = sdk.map_error(exc)

    assert key not in error.message
    assert "echo [redacted]" in error.message


# ---------------------------------------------------------------- no status


@BOTH
def test_errors_without_a_status(sdk: SDK) -> None:
    name = sdk.provider.name
    request = httpx2.Request("POST", "https://user:pw@proxy.example/v1/x?key=zzz")
    connection = sdk.module.APIConnectionError(request=request)
    connection.__cause__ = httpx2.ConnectError("[Errno 111] Connection refused")
    invalid = sdk.module.APIResponseValidationError(httpx2.Response(200, request=request), body=None)

    timed_out = sdk.map_error(sdk.module.APITimeoutError(request=request))
    unreachable = sdk.map_error(connection)
    unfit = sdk.map_error(invalid)
    other = sdk.map_error(KeyError("what"))

    assert timed_out.message == f"{name} request to https://proxy.example/v1/x timed out"
    assert unreachable.message == (
        f"cannot reach {name} at https://proxy.example/v1/x: [Errno 111] Connection refused; check "
        f"{sdk.provider.base_url_variable} and the network on the worker"
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


# ---------------------------------------------------------------- mid-stream


def reset_by_peer(request: httpx2.Request | None) -> httpx2.ReadError:
    # As httpx2 raises it: no text of its own, the reason deep in its causes.
    error = httpx2.ReadError("", request=request) if request is not None else httpx2.ReadError("")
    try:
        try:
            raise ConnectionResetError(104, "Connection reset by peer")
        except ConnectionResetError as reset:
            raise error from reset
    except httpx2.ReadError as raised:
        return raised


@BOTH
def test_whatever_breaks_mid_stream_is_a_retryable_broken_stream(sdk: SDK) -> None:
    name, url = sdk.provider.name, sdk.url
    request = sdk.request()
    connection = sdk.module.APIConnectionError(request=request)
    connection.__cause__ = reset_by_peer(request)
    bare_connection = sdk.module.APIConnectionError(request=request)
    event_error = sdk.error_event("overloaded_error", "Overloaded")
    reason = "ReadError: ConnectionResetError: [Errno 104] Connection reset by peer"
    cases = [
        (sdk.module.APITimeoutError(request=request), f"{name}'s stream from {url} timed out mid-answer"),
        (connection, f"{name}'s stream from {url} broke off mid-answer: {reason}"),
        (bare_connection, f"{name}'s stream from {url} broke off mid-answer: connection error"),
        (event_error, f"{name} sent an error mid-answer (overloaded_error): Overloaded"),
        (reset_by_peer(request), f"{name}'s stream from {url} broke off mid-answer: {reason}"),
        (reset_by_peer(None), f"{name}'s stream broke off mid-answer: {reason}"),
        (httpx2.ReadTimeout("", request=request), f"{name}'s stream from {url} timed out mid-answer (ReadTimeout)"),
        (ValueError("bad chunk"), f"{name}'s stream broke off mid-answer: ValueError: bad chunk"),
    ]
    for exc, what in cases:
        error = sdk.map_error(exc, mid_stream=True)

        assert error.message == f"{what}; the step can be retried"
        assert error.type == MODEL_STREAM_BROKEN_ERROR_TYPE
        assert not error.non_retryable
        assert error.next_retry_delay is None


def test_an_openai_error_event_names_its_code() -> None:
    request = OPENAI_SDK.request()
    body = {"message": "The server had an error", "type": "server_error", "code": "internal"}

    error = map_openai_error(openai.APIError("x", request, body=body), mid_stream=True)

    assert error.message.startswith("OpenAI sent an error mid-answer (internal): The server had an error;")


# ---------------------------------------------------------------- transport_reason


def raised(exc: BaseException, *, cause: BaseException | None = None, context: BaseException | None = None) -> Any:
    if cause is not None:
        exc.__cause__ = cause  # (which also sets __suppress_context__, as `raise ... from` does)
    exc.__context__ = context
    return exc


def test_transport_reason_reads_down_the_cause_chain() -> None:
    deep = raised(httpx2.ReadError(""), cause=raised(RuntimeError(""), cause=ConnectionResetError("reset")))

    assert transport_reason(deep) == "ReadError: ConnectionResetError: reset"
    assert transport_reason(ValueError("own text")) == "ValueError: own text"
    assert transport_reason(raised(KeyError(), context=OSError("from context"))) == "KeyError: OSError: from context"
    suppressed = raised(KeyError(), context=OSError("hidden"))
    suppressed.__suppress_context__ = True
    assert transport_reason(suppressed) == "KeyError"


def test_transport_reason_skips_a_cancel_scopes_message_and_ends_on_a_cycle() -> None:
    cancelled = raised(asyncio.CancelledError("Cancelled via cancel scope 1234"), cause=OSError("reset"))
    first, second = ValueError(""), ValueError("")
    first.__cause__, second.__cause__ = second, first

    assert transport_reason(raised(httpx2.ReadError(""), cause=cancelled)) == "ReadError: OSError: reset"
    assert transport_reason(first) == "ValueError"


# ---------------------------------------------------------------- the client


class RejectingClient:
    """An SDK client whose constructor rejects its configuration."""

    def __init__(self, *, error: Exception, api_key: str, max_retries: int) -> None:
        raise error


@BOTH
def test_a_client_the_sdk_rejects_is_a_configuration_error_with_the_key_masked(sdk: SDK) -> None:
    for error in (sdk.provider.errors.base(f"bad key {API_KEY}!"), ValueError(f"bad key {API_KEY}!")):
        with pytest.raises(ApplicationError) as caught:
            sdk.provider.client(RejectingClient, error=error, api_key=API_KEY)

        assert caught.value.type == MODEL_CONFIGURATION_ERROR_TYPE
        assert caught.value.non_retryable
        assert caught.value.message == (
            f"cannot configure the {sdk.provider.name} client from the worker's environment: bad key [redacted]!"
        )


async def test_clients_are_built_with_sdk_retries_off() -> None:
    clients = [
        OPENAI.client(AsyncOpenAI, api_key="k", base_url="http://127.0.0.1:9/v1"),
        ANTHROPIC.client(AsyncAnthropic, api_key="k"),
    ]
    try:
        assert [client.max_retries for client in clients] == [0, 0]
    finally:
        for client in clients:
            await client.close()


@BOTH
def test_missing_key(sdk: SDK) -> None:
    error = sdk.provider.missing_key()

    assert error.type == MODEL_CONFIGURATION_ERROR_TYPE
    assert error.non_retryable
    assert error.message == (
        f"{sdk.provider.key_variable} is not set: set it in the worker's environment (the worker calls "
        f"{sdk.provider.name}, not the client that started the run){sdk.provider.missing_key_hint}"
    )


def test_sdk_errors_of_reads_the_classes_both_sdks_name_alike() -> None:
    assert SDKErrors.of(anthropic, base=anthropic.AnthropicError) == ANTHROPIC.errors
    assert OPENAI.errors.status is openai.APIStatusError
    assert OPENAI.errors.timeout is openai.APITimeoutError
    assert ANTHROPIC.errors.connection is anthropic.APIConnectionError
    assert ANTHROPIC.errors.response_validation is anthropic.APIResponseValidationError


# ---------------------------------------------------------------- a streamed call


class FakeStream:
    """An SDK stream: an async context manager and iterator over ``items``,
    raising ``error`` after them when given."""

    def __init__(self, items: list[Any], error: BaseException | None = None) -> None:
        self.items, self.error, self.closed = items, error, False

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.closed = True

    async def __aiter__(self) -> AsyncIterator[Any]:
        for item in self.items:
            yield item
        if self.error is not None:
            raise self.error


class ListReader:
    def __init__(self, ends: bool = True) -> None:
        self.items: list[Any] = []
        self.ends = ends

    def read(self, item: Any) -> None:
        self.items.append(item)

    def response(self) -> ModelResponse:
        if not self.ends:
            raise OPENAI.stream_ended_early(f"no finish_reason after {len(self.items)} chunks")
        return ModelResponse(message=Message.assistant(" ".join(self.items)), finish_reason="stop")


async def opened(stream: FakeStream) -> FakeStream:
    return stream


async def test_stream_answer_reads_every_item_and_closes_the_stream() -> None:
    stream, reader = FakeStream(["an", "answer"]), ListReader()

    response = await OPENAI.stream_answer(opened(stream), reader)

    assert response.message.text == "an answer"
    assert stream.closed


@BOTH
async def test_stream_answer_maps_an_error_mid_stream_and_closes_the_stream(sdk: SDK) -> None:
    stream, reader = FakeStream(["an"], error=reset_by_peer(None)), ListReader()

    with pytest.raises(ApplicationError) as caught:
        await sdk.provider.stream_answer(opened(stream), reader)

    assert caught.value.type == MODEL_STREAM_BROKEN_ERROR_TYPE
    assert caught.value.__cause__ is None  # the SDK's unredacted message stays out of history
    assert reader.items == ["an"]
    assert stream.closed


@BOTH
async def test_stream_answer_maps_an_error_opening_the_stream(sdk: SDK) -> None:
    async def refused() -> FakeStream:
        raise sdk.status_error(429, "slow down", headers={"retry-after": "3"})

    with pytest.raises(ApplicationError) as caught:
        await sdk.provider.stream_answer(refused(), ListReader())

    assert caught.value.type == MODEL_RATE_LIMITED_ERROR_TYPE
    assert caught.value.next_retry_delay == timedelta(seconds=3)
    assert caught.value.__cause__ is None


async def test_a_stream_that_ends_too_soon_is_retryable() -> None:
    with pytest.raises(ApplicationError) as caught:
        await OPENAI.stream_answer(opened(FakeStream(["a", "b", "c"])), ListReader(ends=False))

    assert caught.value.message == (
        "OpenAI's stream ended before the answer did (no finish_reason after 3 chunks); the step can be retried"
    )
    assert caught.value.type == MODEL_STREAM_BROKEN_ERROR_TYPE
    assert not caught.value.non_retryable


@BOTH
def test_a_conversation_the_api_cannot_express_is_a_bad_request(sdk: SDK) -> None:
    error = sdk.provider.unsendable(ValueError("message 2 (user): only assistant messages can hold tool calls"))

    assert error.message == (
        f"cannot send this conversation to {sdk.provider.name}: message 2 (user): only assistant messages "
        "can hold tool calls"
    )
    assert error.type == MODEL_BAD_REQUEST_ERROR_TYPE
    assert error.non_retryable


def test_tool_declaration() -> None:
    described = ToolDefinition(name="get_weather", description="Weather now", parameters={"type": "object"})
    bare = ToolDefinition(name="noop")

    assert tool_declaration(described, "input_schema") == {
        "name": "get_weather",
        "input_schema": {"type": "object"},
        "description": "Weather now",
    }
    assert tool_declaration(bare, "parameters") == {"name": "noop", "parameters": bare.parameters}
