"""What the OpenAI and Anthropic providers share: error mapping, the client
from the environment, and the plumbing of a streamed call.

Both SDKs are generated alike: the same exception classes (``APIStatusError``,
``APIConnectionError``, ``APITimeoutError``...) with the same attributes, and
the key in request headers that travel with every error. So each provider
describes itself once, as a :class:`Provider` (its name, its environment
variables, its SDK's exception classes and the few ways its API words errors
differently), and the mapping is written here, once: a 429 or a stream that
breaks off means the same to Temporal whichever provider it came from. The
provider's own file keeps what differs: request and message conversion and
stream parsing.

The mapping masks the key in every message and takes the server's
``retry-after-ms``/``retry-after`` as the next delay; the HTTP details it
reads for that (header forms, credential headers, error bodies) are in
:mod:`agentloop.activities.providers.http_headers`.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx2
from temporalio import activity
from temporalio.exceptions import ApplicationError

from agentloop.activities.attempts import retry_note
from agentloop.activities.providers.http_headers import (
    credential_values,
    display_url,
    error_body_message,
    redact,
    retry_after_delay,
)
from agentloop.activities.providers.sdk import ChunkStream, SDKErrors, StreamReader
from agentloop.shared.base.errors import (
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
from agentloop.shared.definition.activity_io import ModelResponse

__all__ = [
    "Provider",
    "transport_reason",
]

T = TypeVar("T")
ItemT = TypeVar("ItemT")


@dataclass(frozen=True)
class Provider:
    """One provider, as the shared error mapping and client setup see it.

    Attributes:
        name: The provider as messages name it ("OpenAI").
        key_variable: The worker's environment variable with the API key.
        base_url_variable: The worker's environment variable with the base URL.
        errors: The SDK's exception classes.
        context_length_message: Matches the message of a 4xx that says the
            conversation is too long for the model's context window.
        context_length_codes: Error ``code``/``type`` values that say the same.
        quota_codes: Error ``code`` values of a 429 that is an exhausted
            quota rather than a rate limit: waiting does not refill it, so it
            is not retried.
        access_scope: What a 403's message asks the key to be allowed to use.
        missing_key_hint: Added to the message of a missing key (another way
            to configure the provider).
    """

    name: str
    key_variable: str
    base_url_variable: str
    errors: SDKErrors
    context_length_message: re.Pattern[str]
    context_length_codes: frozenset[str] = field(default_factory=frozenset)
    quota_codes: frozenset[str] = field(default_factory=frozenset)
    access_scope: str = "this model"
    missing_key_hint: str = ""

    # ------------------------------------------------------------ the client

    def client(self, client_class: Callable[..., T], **options: Any) -> T:
        """``client_class(**options, max_retries=0)``, its errors mapped.

        Temporal owns retries: SDK retries would hide attempts from the
        workflow and stack up against the activity's timeout.

        Raises:
            ApplicationError: Non-retryable ``ModelConfigurationError`` when the
                SDK rejects the configuration (the API key masked).
        """
        try:
            return client_class(**options, max_retries=0)
        except (self.errors.base, ValueError) as exc:
            key = options.get("api_key")
            raise self.configuration_error(
                f"cannot configure the {self.name} client from the worker's environment: "
                f"{redact(str(exc), [key] if isinstance(key, str) else [])}"
            ) from None

    def missing_key(self) -> ApplicationError:
        """The error for a worker with no credential for this provider."""
        return self.configuration_error(
            f"{self.key_variable} is not set: set it in the worker's environment (the worker "
            f"calls {self.name}, not the client that started the run){self.missing_key_hint}"
        )

    @staticmethod
    def configuration_error(message: str) -> ApplicationError:
        """A non-retryable ``ModelConfigurationError``."""
        return ApplicationError(message, type=MODEL_CONFIGURATION_ERROR_TYPE, non_retryable=True)

    # ------------------------------------------------------------ a streamed call

    def unsendable(self, exc: ValueError) -> ApplicationError:
        """The non-retryable ``ModelBadRequest`` for a conversation the
        provider's API cannot express (``exc`` says why)."""
        return ApplicationError(
            f"cannot send this conversation to {self.name}: {exc}",
            type=MODEL_BAD_REQUEST_ERROR_TYPE,
            non_retryable=True,
        )

    async def stream_answer(
        self, opening: Awaitable[ChunkStream[ItemT]], reader: StreamReader[ItemT]
    ) -> ModelResponse:
        """Open the stream (``opening`` is the SDK's ``create(..., stream=True)``),
        pass each of its items to ``reader`` and return the reader's answer.

        The stream is closed as soon as the call is cancelled (the run was
        cancelled: Temporal cancels the activity on its next heartbeat) or,
        in an activity, as soon as the worker begins to shut down. A worker
        that shuts down stops polling, so the workflow may never get to
        cancel the call: waiting for the model would hold the shutdown (and
        the provider's connection) for the worker's whole graceful timeout,
        while an answer cut short cannot be handed over anyway. The attempt
        then fails retryably, so another worker takes the step again.

        Raises:
            ApplicationError: What the SDK raised, mapped by :meth:`map_error`;
                a retryable ``ModelStreamBroken`` for whatever the transport or
                SDK raised mid-answer, for a stream that ended too soon, or
                for a worker that shut down mid-answer.
        """
        answer = asyncio.ensure_future(self._read_answer(opening, reader))
        if not activity.in_activity():
            return await answer
        shutdown = asyncio.ensure_future(activity.wait_for_worker_shutdown())
        try:
            await asyncio.wait((answer, shutdown), return_when=asyncio.FIRST_COMPLETED)
        finally:
            # Cancelled here (the run was cancelled) or the worker shuts down:
            # stop reading now, and wait until the stream is closed.
            shutdown.cancel()
            if not answer.done():
                answer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await answer
        if answer.cancelled():
            raise _retryable(
                f"the worker shut down while {self.name} was still answering, so the answer was "
                f"stopped; {retry_note()}",
                MODEL_STREAM_BROKEN_ERROR_TYPE,
            )
        return answer.result()

    async def _read_answer(
        self, opening: Awaitable[ChunkStream[ItemT]], reader: StreamReader[ItemT]
    ) -> ModelResponse:
        try:
            stream = await opening
        except self.errors.base as exc:
            # `from None`: Temporal records a cause's message in history, and the
            # SDK's own message is not redacted; the mapped error says it all.
            raise self.map_error(exc) from None
        async with stream:
            items = stream.__aiter__()
            while True:
                try:
                    item = await anext(items)
                except StopAsyncIteration:
                    break
                except Exception as exc:  # noqa: BLE001 (whatever the transport or SDK raised mid-answer)
                    raise self.map_error(exc, mid_stream=True) from None
                reader.read(item)
        return reader.response()

    def stream_ended_early(self, missing: str) -> ApplicationError:
        """The retryable ``ModelStreamBroken`` for a stream that ended cleanly
        but before the answer did; ``missing`` says what never came."""
        return ApplicationError(
            f"{self.name}'s stream ended before the answer did ({missing}); {retry_note()}",
            type=MODEL_STREAM_BROKEN_ERROR_TYPE,
            non_retryable=False,
        )

    # ------------------------------------------------------------ errors

    def map_error(self, exc: BaseException, *, mid_stream: bool = False) -> ApplicationError:
        """The Temporal error for a failure of this provider's SDK, saying whether to retry.

        HTTP 408, 409, 429 and 5xx, connection failures and timeouts are
        retryable, with the server's ``retry-after-ms``/``retry-after`` as the
        next delay; a 429 whose code is in :attr:`quota_codes` is not. 401/403
        and other 4xx are not retryable; a context-length error has its own
        type. Credentials are masked in every message.

        Args:
            exc: What the SDK raised (any exception is accepted).
            mid_stream: ``exc`` was raised while reading the answer's stream
                (the request itself was accepted): whatever it is, the answer
                is lost and the next attempt may well succeed.

        Returns:
            An :class:`ApplicationError` typed ``ModelRateLimited``,
            ``ModelServerError``, ``ModelConnectionError``,
            ``ModelAuthenticationError``, ``ModelContextLengthExceeded``,
            ``ModelBadRequest`` or, for anything else, ``ModelError``; with
            ``mid_stream``, always a retryable ``ModelStreamBroken``.
        """
        secrets = self._request_secrets(exc)
        if mid_stream:
            return self._broken_stream_error(exc, secrets)

        errors = self.errors
        if isinstance(exc, errors.status):
            return self._status_error(exc, secrets)
        if isinstance(exc, errors.timeout):
            return _retryable(
                f"{self.name} request to {display_url(exc.request.url)} timed out",
                MODEL_CONNECTION_ERROR_TYPE,
            )
        if isinstance(exc, errors.connection):
            cause = f": {exc.__cause__}" if exc.__cause__ is not None else ""
            return _retryable(
                redact(
                    f"cannot reach {self.name} at {display_url(exc.request.url)}{cause}; check "
                    f"{self.base_url_variable} and the network on the worker",
                    secrets,
                ),
                MODEL_CONNECTION_ERROR_TYPE,
            )
        if isinstance(exc, errors.response_validation):
            return _retryable(
                redact(f"{self.name} returned a response that does not fit its API ({exc.status_code})", secrets),
                MODEL_SERVER_ERROR_TYPE,
            )
        # Not an HTTP outcome: retryable, as Temporal would treat an unmapped error.
        return _retryable(
            redact(f"{self.name} call failed: {type(exc).__name__}: {exc}", secrets), MODEL_ERROR_TYPE
        )

    def _request_secrets(self, exc: BaseException) -> list[str]:
        if isinstance(exc, self.errors.api):
            return credential_values(exc.request.headers)
        return credential_values(getattr(_transport_request(exc), "headers", None))

    def _broken_stream_error(self, exc: BaseException, secrets: list[str]) -> ApplicationError:
        errors, name = self.errors, self.name
        if isinstance(exc, errors.timeout):
            what = f"{name}'s stream from {display_url(exc.request.url)} timed out mid-answer"
        elif isinstance(exc, errors.connection):
            # The SDK's own message is a bare "Connection error."; the transport's
            # reason is in the cause chain (and may be empty at its top).
            reason = transport_reason(exc.__cause__) if exc.__cause__ is not None else "connection error"
            what = f"{name}'s stream from {display_url(exc.request.url)} broke off mid-answer: {reason}"
        elif isinstance(exc, errors.api):
            # An error event in the stream (Anthropic's SDK raises it as a
            # status error of the 200 response).
            said = error_body_message(exc.body) or exc.message
            code = _error_code(exc) or getattr(exc, "type", None)
            kind = f" ({code})" if code else ""
            what = f"{name} sent an error mid-answer{kind}: {said}"
        elif isinstance(exc, httpx2.TransportError):
            # Mid-stream, Anthropic's SDK lets the transport's own errors through.
            request = _transport_request(exc)
            source = f" from {display_url(request.url)}" if request is not None else ""
            if isinstance(exc, httpx2.TimeoutException):
                what = f"{name}'s stream{source} timed out mid-answer ({type(exc).__name__})"
            else:
                what = f"{name}'s stream{source} broke off mid-answer: {transport_reason(exc)}"
        else:
            what = f"{name}'s stream broke off mid-answer: {transport_reason(exc)}"
        return _retryable(redact(f"{what}; {retry_note()}", secrets), MODEL_STREAM_BROKEN_ERROR_TYPE)

    def _status_error(self, exc: Any, secrets: list[str]) -> ApplicationError:
        name, key = self.name, self.key_variable
        status: int = exc.status_code
        # Anthropic's SDK reads the body's message itself (`api_message`); OpenAI's does not.
        said: str = getattr(exc, "api_message", None) or error_body_message(exc.body) or exc.message
        suffix = f" [request id {exc.request_id}]" if exc.request_id else ""
        delay = retry_after_delay(exc.response.headers)
        code = _error_code(exc)

        def build(message: str, error_type: str, *, retryable: bool) -> ApplicationError:
            return ApplicationError(
                redact(message + suffix, secrets),
                type=error_type,
                non_retryable=not retryable,
                next_retry_delay=delay if retryable else None,
            )

        if status == 401:
            return build(
                f"{name} rejected the API key (401): check {key} in the worker's environment "
                f"({name} said: {said})",
                MODEL_AUTHENTICATION_ERROR_TYPE,
                retryable=False,
            )
        if status == 403:
            return build(
                f"{name} refused access (403): check that the key in {key} on the worker may use "
                f"{self.access_scope} ({name} said: {said})",
                MODEL_AUTHENTICATION_ERROR_TYPE,
                retryable=False,
            )
        if status == 429:
            if code in self.quota_codes:
                return build(
                    f"{name} quota exhausted (429): check the plan and billing of the key in {key} "
                    f"({name} said: {said})",
                    MODEL_RATE_LIMITED_ERROR_TYPE,
                    retryable=False,
                )
            return build(f"{name} rate limit hit (429): {said}", MODEL_RATE_LIMITED_ERROR_TYPE, retryable=True)
        if status in (408, 409) or status >= 500 or status < 400:
            return build(f"{name} server error ({status}): {said}", MODEL_SERVER_ERROR_TYPE, retryable=True)
        if (
            code in self.context_length_codes
            or getattr(exc, "type", None) in self.context_length_codes
            or self.context_length_message.search(said)
        ):
            return build(
                f"the conversation does not fit the model's context window ({name} {status}): {said}",
                MODEL_CONTEXT_LENGTH_ERROR_TYPE,
                retryable=False,
            )
        return build(f"{name} rejected the request ({status}): {said}", MODEL_BAD_REQUEST_ERROR_TYPE, retryable=False)


def _retryable(message: str, error_type: str) -> ApplicationError:
    return ApplicationError(message, type=error_type, non_retryable=False, next_retry_delay=None)


def _error_code(exc: BaseException) -> str | None:
    # OpenAI's errors carry the body's `code`; Anthropic's have none by that name.
    code = getattr(exc, "code", None)
    return code if isinstance(code, str) else None


def _transport_request(exc: BaseException) -> Any:
    try:
        # httpx2 errors (which Anthropic's SDK lets through mid-stream) carry
        # the request too, but raise when they have none.
        return getattr(exc, "request", None)
    except RuntimeError:
        return None


def transport_reason(exc: BaseException) -> str:
    """What went wrong, as ``Type: message``, even when ``exc`` has no text.

    Transport errors often carry their reason only deep in their cause chain:
    a connection reset mid-stream is an httpx ``ReadError`` with an empty
    message, raised from httpcore's (empty), from anyio's
    ``BrokenResourceError`` (empty), from ``ConnectionResetError: [Errno 104]
    Connection reset by peer``. The first message along ``__cause__`` (or
    ``__context__``) is used: ``"ReadError: ConnectionResetError: [Errno 104]
    Connection reset by peer"``; just the type's name when none has one.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = str(current).strip()
        # A cancel scope's own message ("Cancelled via cancel scope ...") says
        # nothing about the failure that triggered it.
        if text and not isinstance(current, asyncio.CancelledError):
            if current is exc:
                return f"{type(exc).__name__}: {text}"
            return f"{type(exc).__name__}: {type(current).__name__}: {text}"
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return type(exc).__name__
