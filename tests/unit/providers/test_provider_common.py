"""The plumbing both providers share (activities/providers/provider_common.py and
activities/providers/http_headers.py): the client from the environment, the streamed
call (on fake SDK streams), the transport's reason for a failure, tool
declarations, retry-after headers, redaction and error bodies.

How each provider maps its SDK's errors, over HTTP and on the SDKs' own
exception classes, is the provider contract: test_providers.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any, Self

import anthropic
import httpx2
import openai
import pytest
from anthropic import AsyncAnthropic
from openai import AsyncOpenAI
from temporalio.exceptions import ApplicationError

from agentloop.activities.providers.anthropic_model import ANTHROPIC
from agentloop.activities.providers.http_headers import (
    credential_values,
    error_body_message,
    redact,
    retry_after_delay,
)
from agentloop.activities.providers.openai_model import OPENAI
from agentloop.activities.providers.provider_common import transport_reason
from agentloop.activities.providers.sdk import SDKErrors, tool_declaration
from agentloop.activities.providers.streaming import parse_tool_arguments
from agentloop.shared.base.errors import (
    MODEL_BAD_REQUEST_ERROR_TYPE,
    MODEL_CONFIGURATION_ERROR_TYPE,
    MODEL_RATE_LIMITED_ERROR_TYPE,
    MODEL_STREAM_BROKEN_ERROR_TYPE,
)
from agentloop.shared.base.messages import Message
from agentloop.shared.definition.activity_io import ModelResponse, ToolDefinition
from tests.helpers.provider_cases import CASES, OPENAI_CASE, ProviderCase, reset_by_peer

API_KEY = OPENAI_CASE.api_key

BOTH = pytest.mark.parametrize("provider", CASES, ids=[case.id for case in CASES])


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
def test_a_client_the_sdk_rejects_is_a_configuration_error_with_the_key_masked(provider: ProviderCase) -> None:
    for error in (provider.provider.errors.base(f"bad key {API_KEY}!"), ValueError(f"bad key {API_KEY}!")):
        with pytest.raises(ApplicationError) as caught:
            provider.provider.client(RejectingClient, error=error, api_key=API_KEY)

        assert caught.value.type == MODEL_CONFIGURATION_ERROR_TYPE
        assert caught.value.non_retryable
        assert caught.value.message == (
            f"cannot configure the {provider.provider.name} client from the worker's environment: bad key [redacted]!"
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
def test_missing_key(provider: ProviderCase) -> None:
    error = provider.provider.missing_key()

    assert error.type == MODEL_CONFIGURATION_ERROR_TYPE
    assert error.non_retryable
    assert error.message == (
        f"{provider.provider.key_variable} is not set: set it in the worker's environment (the worker calls "
        f"{provider.provider.name}, not the client that started the run){provider.provider.missing_key_hint}"
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
async def test_stream_answer_maps_an_error_mid_stream_and_closes_the_stream(provider: ProviderCase) -> None:
    stream, reader = FakeStream(["an"], error=reset_by_peer(None)), ListReader()

    with pytest.raises(ApplicationError) as caught:
        await provider.provider.stream_answer(opened(stream), reader)

    assert caught.value.type == MODEL_STREAM_BROKEN_ERROR_TYPE
    assert caught.value.__cause__ is None  # the SDK's unredacted message stays out of history
    assert reader.items == ["an"]
    assert stream.closed


@BOTH
async def test_stream_answer_maps_an_error_opening_the_stream(provider: ProviderCase) -> None:
    async def refused() -> FakeStream:
        raise provider.status_error(429, "slow down", headers={"retry-after": "3"})

    with pytest.raises(ApplicationError) as caught:
        await provider.provider.stream_answer(refused(), ListReader())

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
def test_a_conversation_the_api_cannot_express_is_a_bad_request(provider: ProviderCase) -> None:
    error = provider.provider.unsendable(ValueError("message 2 (user): only assistant messages can hold tool calls"))

    assert error.message == (
        f"cannot send this conversation to {provider.provider.name}: message 2 (user): only assistant messages "
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


# ---------------------------------------------------------------- tool arguments and http_headers


def test_parse_tool_arguments() -> None:
    assert parse_tool_arguments('{"a": 1}') == ({"a": 1}, None)
    assert parse_tool_arguments("  ") == ({}, None)
    arguments, problem = parse_tool_arguments("[1]")
    assert arguments == {} and problem == "the arguments must be a JSON object, not an array"


def test_retry_after_delay_forms() -> None:
    now = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)

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
    assert error_body_message("x" * 2000, limit=100) == "x" * 77 + "…[1,923 characters cut]"
