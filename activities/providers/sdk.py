"""The SDK side both providers share: the shapes of a chunk stream and its reader,
the base of a chat model built on a generated SDK client, the SDK's exception classes
(:class:`SDKErrors`), and a tool's declaration in a request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from types import ModuleType, TracebackType
from typing import Any, Generic, Protocol, Self, TypeVar

from agentloop.shared.definition.activity_io import ModelResponse, ToolDefinition

ClientT = TypeVar("ClientT")


ItemT_co = TypeVar("ItemT_co", covariant=True)


ItemT_contra = TypeVar("ItemT_contra", contravariant=True)


class ChunkStream(Protocol[ItemT_co]):
    """What both SDKs' ``create(..., stream=True)`` return: an async iterator
    of chunks (or events) that is also an async context manager."""

    async def __aenter__(self) -> Any: ...

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None, /
    ) -> Any: ...

    def __aiter__(self) -> AsyncIterator[ItemT_co]: ...


class StreamReader(Protocol[ItemT_contra]):
    """Reads a provider's stream, item by item, into the whole answer."""

    def read(self, item: ItemT_contra) -> None:
        """Take in the next chunk or event."""

    def response(self) -> ModelResponse:
        """The whole answer, once the stream ended.

        Raises:
            ApplicationError: Retryable ``ModelStreamBroken`` when the stream
                ended before the answer did (see :meth:`Provider.stream_ended_early`).
        """
        ...


class SDKChatModel(Generic[ClientT]):
    """What the SDK-backed ChatModels share: their SDK client, given or built
    from the worker's environment on first use.

    Args:
        client: The SDK client to use. When None, one is built from the
            worker's environment on the first call (see :meth:`from_env`), so a
            missing key fails that activity with a clear error rather than the
            worker's start. Give clients ``max_retries=0``: Temporal retries.
    """

    def __init__(self, client: ClientT | None = None) -> None:
        self._client = client

    @staticmethod
    def client_from_env() -> Any:
        """The provider's SDK client, configured by the worker's environment
        (each provider says how).

        Raises:
            ApplicationError: Non-retryable ``ModelConfigurationError`` when
                the environment has no credential for the provider or the SDK
                rejects the configuration.
        """
        raise NotImplementedError

    @classmethod
    def from_env(cls) -> Self:
        """A model whose client is configured by the worker's environment
        (see :meth:`client_from_env`).

        Raises:
            ApplicationError: Non-retryable ``ModelConfigurationError`` when
                the environment has no credential for the provider or the SDK
                rejects the configuration.
        """
        return cls(cls.client_from_env())

    @property
    def client(self) -> ClientT:
        """The SDK client, built from the environment on first use."""
        if self._client is None:
            self._client = self.client_from_env()
        return self._client


class SDKRequestError(Protocol):
    """What the SDKs' request errors (``APIError`` and its subclasses) carry."""

    @property
    def request(self) -> Any: ...  # the SDK's httpx request (its url and headers are read)

    @property
    def body(self) -> object: ...

    @property
    def message(self) -> str: ...


class SDKStatusError(SDKRequestError, Protocol):
    """A request error with the response's status (``APIStatusError``,
    ``APIResponseValidationError``)."""

    @property
    def status_code(self) -> int: ...


@dataclass(frozen=True)
class SDKErrors:
    """The exception classes of one provider SDK.

    Attributes:
        base: What every error of the SDK derives from (``OpenAIError``,
            ``AnthropicError``).
        api: An error about a request (``APIError``): carries the request,
            so its credential headers, and the response body when there was one.
        status: An HTTP error status (``APIStatusError``): ``status_code``,
            ``response``, ``request_id``.
        connection: The server could not be reached, or the connection
            dropped (``APIConnectionError``).
        timeout: The request timed out (``APITimeoutError``, a connection error).
        response_validation: A response that does not fit the API's schema
            (``APIResponseValidationError``).
    """

    base: type[Exception]
    api: type[SDKRequestError]
    status: type[SDKStatusError]
    connection: type[SDKRequestError]
    timeout: type[SDKRequestError]
    response_validation: type[SDKStatusError]

    @classmethod
    def of(cls, sdk: ModuleType, *, base: type[Exception]) -> SDKErrors:
        """The classes of an SDK module that names them as OpenAI's and
        Anthropic's do; ``base`` is the one whose name differs."""
        return cls(
            base=base,
            api=sdk.APIError,
            status=sdk.APIStatusError,
            connection=sdk.APIConnectionError,
            timeout=sdk.APITimeoutError,
            response_validation=sdk.APIResponseValidationError,
        )


def tool_declaration(tool: ToolDefinition, schema_key: str) -> dict[str, Any]:
    """A tool as both APIs declare it: its name, its arguments' JSON schema
    under ``schema_key`` (``parameters``, ``input_schema``) and its
    description, left out when empty."""
    declaration: dict[str, Any] = {"name": tool.name, schema_key: tool.parameters}
    if tool.description:
        declaration["description"] = tool.description
    return declaration
