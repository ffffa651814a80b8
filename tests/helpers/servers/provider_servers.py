"""Local HTTP servers that speak OpenAI's and Anthropic's wire formats.

Tests point the real SDK clients at them, so what is checked is the exact
HTTP request a provider would receive and the provider's real response and
error shapes. A server answers from a queue of scripted responses and records
every request::

    with OpenAIServer() as server:
        server.enqueue(ScriptedResponse(json_body=openai_completion(content="hi")))
        client = AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        ...
        assert server.requests[0].json["model"] == "gpt-test"

Responses are JSON bodies, exact bytes, or a sequence of chunks sent with
chunked transfer encoding (for SSE streams; see :func:`sse_event`).

Streams are written in each provider's real wire format: OpenAI's
``data: {chat.completion.chunk}`` lines ending in ``data: [DONE]``
(:func:`openai_stream`), Anthropic's ``event: message_start`` ...
``event: message_stop`` (:func:`anthropic_stream`). A whole answer scripted
as a JSON body (:func:`openai_completion`, :func:`anthropic_message`) is sent
as such a stream when the request asks for one (``"stream": true``), cut into
a few pieces, as the provider itself would.
"""

from __future__ import annotations

import json
import socket
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

__all__ = [
    "AnthropicServer",
    "ErrorsSeen",
    "OpenAIServer",
    "RecordedRequest",
    "ScriptedHTTPServer",
    "ScriptedResponse",
    "StreamOutcome",
    "anthropic_block_events",
    "anthropic_error_body",
    "anthropic_event",
    "anthropic_message",
    "anthropic_message_events",
    "anthropic_models",
    "anthropic_stream",
    "openai_chunk",
    "openai_completion",
    "openai_completion_chunks",
    "openai_error_body",
    "openai_stream",
    "openai_tool_call",
    "openai_usage",
    "rechunk",
    "slow_anthropic_stream",
    "slow_openai_stream",
    "sse_event",
    "unused_port",
]


@dataclass
class ScriptedResponse:
    """One scripted answer.

    Exactly one of ``json_body``, ``raw_body`` and ``body_chunks`` is used, in
    that order of precedence; with none, the body is empty.

    Attributes:
        status: HTTP status code.
        headers: Extra response headers (e.g. ``retry-after``).
        json_body: A value sent as ``application/json``.
        raw_body: Exact bytes sent with a ``content-length``.
        body_chunks: Bytes sent one chunk at a time with chunked transfer
            encoding, flushed after each (SSE streams). The content type
            defaults to ``text/event-stream``.
        drop_connection: Close the connection without answering (the client
            sees the connection fail mid-request).
        break_stream: With ``body_chunks``: close the connection after the
            chunks without ending the body (a stream cut off mid-answer).
        reset_stream: With ``body_chunks``: abort the connection with a TCP
            reset after the chunks (a peer that crashed or a proxy that gave
            up; the client's error carries no text of its own).
        chunk_interval: Seconds to wait before each chunk (a slow model). With
            an interval, ``body_chunks`` may be any iterable, e.g. a
            generator of minutes of chunks; the server notes in
            :attr:`ScriptedHTTPServer.stream_outcomes` whether the stream
            ended or the client closed the connection first.
    """

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    json_body: Any = None
    raw_body: bytes | None = None
    body_chunks: Iterable[bytes] | None = None
    drop_connection: bool = False
    break_stream: bool = False
    reset_stream: bool = False
    chunk_interval: float = 0.0


@dataclass(frozen=True)
class StreamOutcome:
    """How a streamed response ended, seen from the server.

    Attributes:
        path: The request's path.
        ended: ``finished`` when every chunk was sent; ``client_closed`` when
            the client closed the connection while chunks were still to come.
        chunks_sent: Chunks written before it ended.
    """

    path: str
    ended: Literal["finished", "client_closed"]
    chunks_sent: int


@dataclass
class RecordedRequest:
    """One request the server received.

    Attributes:
        method: HTTP method.
        path: Request path, query string included.
        headers: Request headers, names lower-cased.
        body: The raw body.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        """The body decoded as JSON."""
        return json.loads(self.body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: ScriptedHTTPServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client closes a stream it stops reading (after an error event):
        # not a server failure worth a traceback in the test output.
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 so clients keep connections alive as they do against real APIs.
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def _handle(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        owner = self.server.owner
        recorded = RecordedRequest(
            method=self.command,
            path=self.path,
            headers={name.lower(): value for name, value in self.headers.items()},
            body=body,
        )
        response = owner.as_asked(recorded, owner._next_response(recorded))
        if response.drop_connection:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.send_response(response.status)
        headers = {name.lower(): value for name, value in response.headers.items()}
        if response.json_body is not None or (
            response.raw_body is None and response.body_chunks is None
        ):
            payload = b"" if response.json_body is None else json.dumps(response.json_body).encode()
            headers.setdefault("content-type", "application/json")
            self._send_whole(headers, payload)
        elif response.raw_body is not None:
            self._send_whole(headers, response.raw_body)
        else:
            headers.setdefault("content-type", "text/event-stream")
            headers["transfer-encoding"] = "chunked"
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            if response.chunk_interval:
                self._send_slowly(recorded, response)
                return
            for chunk in response.body_chunks or []:
                if chunk:
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()
            if response.break_stream:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if response.reset_stream:
                self.close_connection = True
                # Linger 0: close() sends RST instead of FIN.
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.connection.close()
                return
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    def _send_slowly(self, recorded: RecordedRequest, response: ScriptedResponse) -> None:
        """Chunks ``chunk_interval`` apart; the outcome is noted either way."""
        sent = 0
        ended: Literal["finished", "client_closed"] = "finished"
        try:
            for chunk in response.body_chunks or []:
                time.sleep(response.chunk_interval)
                if chunk:
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()
                    sent += 1
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            # A write after the client closed its end fails (the first one
            # may still land in the kernel's buffer; the next cannot).
            ended = "client_closed"
        self.close_connection = True
        self.server.owner._stream_ended(StreamOutcome(recorded.path, ended, sent))

    def _send_whole(self, headers: dict[str, str], payload: bytes) -> None:
        headers["content-length"] = str(len(payload))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()


class ScriptedHTTPServer:
    """An HTTP server on 127.0.0.1 (a free port) answering from a script.

    Requests to a path outside ``paths`` get a 404; a request when the script
    is empty gets a 500 saying so, so a test that under-scripts fails loudly.

    Args:
        paths: The request paths (without query) the server answers.
    """

    def __init__(self, paths: set[str]) -> None:
        self.paths = set(paths)
        self.requests: list[RecordedRequest] = []
        self.stream_outcomes: list[StreamOutcome] = []
        self._script: deque[ScriptedResponse] = deque()
        self._lock = threading.Lock()
        self._outcome_seen = threading.Condition(self._lock)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port the server listens on."""
        if self._server is None:
            raise RuntimeError("the server is not started")
        return int(self._server.server_address[1])

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The URL to give an SDK client as its base URL."""
        return self.origin

    def enqueue(self, *responses: ScriptedResponse) -> None:
        """Add responses to the end of the script."""
        with self._lock:
            self._script.extend(responses)

    @property
    def pending(self) -> int:
        """Scripted responses not used yet."""
        with self._lock:
            return len(self._script)

    def wait_for_stream_outcome(self, count: int = 1, timeout: float | None = None) -> StreamOutcome:
        """Block until ``count`` slow streams (``chunk_interval``) have ended,
        by their last chunk or by the client closing the connection, and
        return the last of them.

        Raises:
            TimeoutError: Fewer ended within ``timeout`` seconds.
        """
        with self._outcome_seen:
            if not self._outcome_seen.wait_for(lambda: len(self.stream_outcomes) >= count, timeout):
                raise TimeoutError(f"{len(self.stream_outcomes)} of {count} streams ended")
            return self.stream_outcomes[count - 1]

    def _stream_ended(self, outcome: StreamOutcome) -> None:
        with self._outcome_seen:
            self.stream_outcomes.append(outcome)
            self._outcome_seen.notify_all()

    def not_found_body(self, path: str) -> Any:
        """The JSON body of a 404 for ``path`` (subclasses use their provider's shape)."""
        return {"error": {"message": f"no route {path}"}}

    def unscripted_body(self, path: str) -> Any:
        """The JSON body of the 500 sent when the script is empty."""
        return {"error": {"message": f"test server: no scripted response left for {path}"}}

    def as_asked(self, request: RecordedRequest, response: ScriptedResponse) -> ScriptedResponse:
        """The response as sent for ``request`` (subclasses stream whole answers
        when the request asks for a stream)."""
        return response

    def _next_response(self, request: RecordedRequest) -> ScriptedResponse:
        with self._lock:
            self.requests.append(request)
            if request.path.split("?", 1)[0] not in self.paths:
                return ScriptedResponse(status=404, json_body=self.not_found_body(request.path))
            if not self._script:
                return ScriptedResponse(status=500, json_body=self.unscripted_body(request.path))
            return self._script.popleft()

    def start(self) -> None:
        """Bind a free port and serve in a daemon thread."""
        server = _Server(("127.0.0.1", 0), _Handler)
        server.owner = self
        self._server = server
        # A short poll interval keeps stop() quick; serving is event-driven.
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join()
        self._server = None
        self._thread = None

    def __enter__(self) -> ScriptedHTTPServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class OpenAIServer(ScriptedHTTPServer):
    """Speaks OpenAI's ``POST /v1/chat/completions``."""

    def __init__(self) -> None:
        super().__init__({"/v1/chat/completions"})

    @property
    def base_url(self) -> str:
        """The SDK base URL, ``.../v1`` as for api.openai.com."""
        return f"{self.origin}/v1"

    def __enter__(self) -> OpenAIServer:
        self.start()
        return self

    def not_found_body(self, path: str) -> Any:
        return openai_error_body(f"Invalid URL (POST {path})", type="invalid_request_error")

    def unscripted_body(self, path: str) -> Any:
        return openai_error_body(f"test server: no scripted response left for {path}", type="server_error")

    def as_asked(self, request: RecordedRequest, response: ScriptedResponse) -> ScriptedResponse:
        body = response.json_body
        asked = _request_json(request)
        is_answer = isinstance(body, dict) and body.get("object") == "chat.completion"
        if not (is_answer and asked.get("stream")):
            return response
        include_usage = bool((asked.get("stream_options") or {}).get("include_usage"))
        return openai_stream(
            openai_completion_chunks(body, include_usage=include_usage),
            status=response.status,
            headers=response.headers,
        )


class AnthropicServer(ScriptedHTTPServer):
    """Speaks Anthropic's ``POST /v1/messages``."""

    def __init__(self) -> None:
        super().__init__({"/v1/messages"})

    def __enter__(self) -> AnthropicServer:
        self.start()
        return self

    def not_found_body(self, path: str) -> Any:
        return anthropic_error_body("not_found_error", f"no route {path}")

    def unscripted_body(self, path: str) -> Any:
        return anthropic_error_body("api_error", f"test server: no scripted response left for {path}")

    def as_asked(self, request: RecordedRequest, response: ScriptedResponse) -> ScriptedResponse:
        body = response.json_body
        is_answer = isinstance(body, dict) and body.get("type") == "message"
        if not (is_answer and _request_json(request).get("stream")):
            return response
        return anthropic_stream(
            anthropic_message_events(body), status=response.status, headers=response.headers
        )


def _request_json(request: RecordedRequest) -> dict[str, Any]:
    try:
        decoded = request.json
    except ValueError:
        return {}
    return decoded if isinstance(decoded, dict) else {}


# ---------------------------------------------------------------- OpenAI bodies


def openai_tool_call(id: str, name: str, arguments: str) -> dict[str, Any]:
    """A Chat Completions tool call, with ``arguments`` as the raw JSON text."""
    return {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}


def openai_completion(
    *,
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str | None = "stop",
    refusal: str | None = None,
    model: str = "gpt-test-2025",
    prompt_tokens: int = 11,
    completion_tokens: int = 7,
    cached_tokens: int | None = None,
    usage: bool = True,
    extra_message_fields: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A Chat Completions response body, as api.openai.com sends it."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": content,
        "refusal": refusal,
        "annotations": [],
    }
    if tool_calls:
        message["tool_calls"] = tool_calls
    message.update(extra_message_fields or {})
    body: dict[str, Any] = {
        "id": "chatcmpl-test123",
        "object": "chat.completion",
        "created": 1_750_000_000,
        "model": model,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
        ],
        "service_tier": "default",
        "system_fingerprint": "fp_test",
    }
    if usage:
        body["usage"] = openai_usage(prompt_tokens, completion_tokens, cached_tokens)
    return body


def openai_usage(
    prompt_tokens: int = 11, completion_tokens: int = 7, cached_tokens: int | None = None
) -> dict[str, Any]:
    """An OpenAI usage block."""
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens or 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def openai_error_body(
    message: str, *, type: str = "invalid_request_error", code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    """An OpenAI error body: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


# ---------------------------------------------------------------- Anthropic bodies


def anthropic_message(
    content: list[dict[str, Any]],
    *,
    stop_reason: str | None = "end_turn",
    model: str = "claude-test-2025",
    input_tokens: int = 13,
    output_tokens: int = 5,
    cache_read_input_tokens: int | None = None,
    cache_creation_input_tokens: int | None = None,
) -> dict[str, Any]:
    """A Messages API response body, as api.anthropic.com sends it."""
    return {
        "id": "msg_test123",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_read_input_tokens": cache_read_input_tokens,
            "cache_creation_input_tokens": cache_creation_input_tokens,
            "service_tier": "standard",
        },
    }


def anthropic_error_body(type: str, message: str) -> dict[str, Any]:
    """An Anthropic error body: ``{"type": "error", "error": {"type", "message"}}``."""
    return {"type": "error", "error": {"type": type, "message": message}, "request_id": "req_test"}


# ---------------------------------------------------------------- streams


def sse_event(data: Any, *, event: str | None = None) -> bytes:
    """One server-sent event; ``data`` is JSON-encoded unless it is a string."""
    text = data if isinstance(data, str) else json.dumps(data)
    lines = [f"event: {event}"] if event else []
    lines.extend(f"data: {line}" for line in text.split("\n"))
    return ("\n".join(lines) + "\n\n").encode()


def rechunk(chunks: list[bytes], size: int) -> list[bytes]:
    """The same bytes cut into pieces of ``size``, across event boundaries
    (as TCP may deliver them)."""
    data = b"".join(chunks)
    return [data[i : i + size] for i in range(0, len(data), size)]


def _pieces(text: str, pieces: int) -> list[str]:
    if not text:
        return []
    size = -(-len(text) // max(pieces, 1))
    return [text[i : i + size] for i in range(0, len(text), size)]


# ---------------------------------------------------------------- OpenAI streams


def openai_chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
    choices: bool = True,
    model: str = "gpt-test-2025",
    id: str = "chatcmpl-test123",
) -> dict[str, Any]:
    """One ``chat.completion.chunk``, as api.openai.com streams it.

    Args:
        delta: The choice's delta (``{}`` when None).
        finish_reason: Set on the choice of the last content chunk.
        usage: The usage block, in the final chunk of a stream asked with
            ``include_usage`` (``null`` in the others).
        choices: False for that final chunk, whose ``choices`` is empty.
    """
    return {
        "id": id,
        "object": "chat.completion.chunk",
        "created": 1_750_000_000,
        "model": model,
        "service_tier": "default",
        "system_fingerprint": "fp_test",
        "choices": [
            {"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish_reason}
        ]
        if choices
        else [],
        "usage": usage,
    }


def openai_completion_chunks(
    body: dict[str, Any], *, include_usage: bool = True, pieces: int = 3
) -> list[dict[str, Any]]:
    """The chunks api.openai.com streams for the answer ``body`` (an
    :func:`openai_completion`): a role chunk; reasoning, content and refusal
    cut into up to ``pieces``; each tool call's id and name, then its
    arguments in pieces; the finish reason; the usage chunk."""
    model = body.get("model", "gpt-test-2025")
    chunk_id = body.get("id", "chatcmpl-test123")

    def chunk(delta: dict[str, Any] | None = None, **kwargs: Any) -> dict[str, Any]:
        return openai_chunk(delta, model=model, id=chunk_id, **kwargs)

    chunks: list[dict[str, Any]] = []
    for choice in body.get("choices", [])[:1]:
        message = dict(choice["message"])
        chunks.append(chunk({"role": "assistant", "content": "", "refusal": None}))
        for field_name in ("reasoning_content", "reasoning"):
            for piece in _pieces(message.get(field_name) or "", pieces):
                chunks.append(chunk({field_name: piece}))
        for piece in _pieces(message.get("content") or "", pieces):
            chunks.append(chunk({"content": piece}))
        for piece in _pieces(message.get("refusal") or "", pieces):
            chunks.append(chunk({"refusal": piece}))
        for index, call in enumerate(message.get("tool_calls") or []):
            function = call["function"]
            start = {"index": index, "id": call["id"], "type": "function",
                     "function": {"name": function["name"], "arguments": ""}}
            chunks.append(chunk({"tool_calls": [start]}))
            for piece in _pieces(function["arguments"], pieces):
                chunks.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
        if choice.get("finish_reason") is not None:
            chunks.append(chunk({}, finish_reason=choice["finish_reason"]))
    if include_usage and body.get("usage") is not None:
        chunks.append(chunk(choices=False, usage=body["usage"]))
    return chunks


def openai_stream(
    chunks: list[dict[str, Any]],
    *,
    done: bool = True,
    break_stream: bool = False,
    reset_stream: bool = False,
    status: int = 200,
    headers: dict[str, str] | None = None,
) -> ScriptedResponse:
    """A Chat Completions stream: ``data: {chunk}`` events, then ``data: [DONE]``.

    Args:
        chunks: The chunks (see :func:`openai_chunk`), one SSE event each.
        done: End with ``data: [DONE]``.
        break_stream: Cut the connection after the chunks (no ``[DONE]``).
        reset_stream: Abort the connection with a TCP reset after the chunks.
    """
    body = [sse_event(chunk) for chunk in chunks]
    if done and not (break_stream or reset_stream):
        body.append(sse_event("[DONE]"))
    return ScriptedResponse(
        status=status,
        headers=dict(headers or {}),
        body_chunks=body,
        break_stream=break_stream,
        reset_stream=reset_stream,
    )


def slow_openai_stream(*, seconds: float, interval: float = 0.2, text: str = "la ") -> ScriptedResponse:
    """A Chat Completions stream of ``text`` chunks, one every ``interval``
    seconds, for ``seconds`` in all (a model that rambles on), then a normal
    end. See :meth:`ScriptedHTTPServer.wait_for_stream_outcome`."""

    def chunks() -> Iterator[bytes]:
        yield sse_event(openai_chunk({"role": "assistant", "content": ""}))
        for _ in range(max(1, int(seconds / interval))):
            yield sse_event(openai_chunk({"content": text}))
        yield sse_event(openai_chunk({}, finish_reason="stop"))
        yield sse_event(openai_chunk(choices=False, usage=openai_usage()))
        yield sse_event("[DONE]")

    return ScriptedResponse(body_chunks=chunks(), chunk_interval=interval)


# ---------------------------------------------------------------- Anthropic streams


def anthropic_event(data: dict[str, Any]) -> bytes:
    """One Messages API stream event: ``event: <type>`` and its JSON."""
    return sse_event(data, event=data["type"])


def anthropic_message_events(body: dict[str, Any], *, pieces: int = 3) -> list[dict[str, Any]]:
    """The events api.anthropic.com streams for the answer ``body`` (an
    :func:`anthropic_message`): ``message_start`` with the input usage, a
    ``ping``, each content block as ``content_block_start``, its deltas cut
    into up to ``pieces`` and ``content_block_stop``, then ``message_delta``
    with the stop reason and output usage, and ``message_stop``.

    A ``tool_use`` block's ``input`` is streamed as JSON; a string input is
    streamed as is, so tests can send arguments that are not JSON.
    """
    usage = dict(body.get("usage") or {})
    output_tokens = usage.get("output_tokens", 0)
    start_usage = {**usage, "output_tokens": 1}
    message = {**body, "content": [], "stop_reason": None, "stop_sequence": None, "usage": start_usage}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": message}, {"type": "ping"}]
    for index, block in enumerate(body.get("content") or []):
        events.extend(anthropic_block_events(index, block, pieces=pieces))
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": body.get("stop_reason"), "stop_sequence": None},
            "usage": {"output_tokens": output_tokens},
        }
    )
    events.append({"type": "message_stop"})
    return events


def anthropic_block_events(index: int, block: dict[str, Any], *, pieces: int = 3) -> list[dict[str, Any]]:
    """``content_block_start``, deltas and ``content_block_stop`` for one block."""

    def delta(payload: dict[str, Any]) -> dict[str, Any]:
        return {"type": "content_block_delta", "index": index, "delta": payload}

    kind = block["type"]
    events: list[dict[str, Any]] = []
    if kind == "text":
        events.append(
            {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}
        )
        events.extend(delta({"type": "text_delta", "text": p}) for p in _pieces(block["text"], pieces))
    elif kind == "thinking":
        events.append(
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""},
            }
        )
        events.extend(
            delta({"type": "thinking_delta", "thinking": p}) for p in _pieces(block["thinking"], pieces)
        )
        if block.get("signature"):
            events.append(delta({"type": "signature_delta", "signature": block["signature"]}))
    elif kind == "tool_use":
        raw = block["input"] if isinstance(block["input"], str) else json.dumps(block["input"])
        events.append(
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}},
            }
        )
        events.append(delta({"type": "input_json_delta", "partial_json": ""}))
        events.extend(delta({"type": "input_json_delta", "partial_json": p}) for p in _pieces(raw, pieces))
    else:
        # redacted_thinking and server-tool blocks arrive whole.
        events.append({"type": "content_block_start", "index": index, "content_block": block})
    events.append({"type": "content_block_stop", "index": index})
    return events


def anthropic_stream(
    events: list[dict[str, Any]],
    *,
    break_stream: bool = False,
    reset_stream: bool = False,
    status: int = 200,
    headers: dict[str, str] | None = None,
) -> ScriptedResponse:
    """A Messages API stream of ``events`` (see :func:`anthropic_message_events`).

    Args:
        events: Event payloads; each is sent as ``event: <its type>``.
        break_stream: Cut the connection after the events.
        reset_stream: Abort the connection with a TCP reset after the events.
    """
    return ScriptedResponse(
        status=status,
        headers=dict(headers or {}),
        body_chunks=[anthropic_event(event) for event in events],
        break_stream=break_stream,
        reset_stream=reset_stream,
    )


def slow_anthropic_stream(*, seconds: float, interval: float = 0.2, text: str = "la ") -> ScriptedResponse:
    """A Messages API stream of ``text`` deltas, one every ``interval``
    seconds, for ``seconds`` in all (a model that rambles on), then a normal
    end. See :meth:`ScriptedHTTPServer.wait_for_stream_outcome`."""

    def events() -> Iterator[bytes]:
        yield anthropic_event(anthropic_message_events(anthropic_message([]))[0])
        yield anthropic_event(
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
        for _ in range(max(1, int(seconds / interval))):
            yield anthropic_event(
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}})
        yield anthropic_event({"type": "content_block_stop", "index": 0})
        yield anthropic_event(
            {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
             "usage": {"output_tokens": 5}}
        )
        yield anthropic_event({"type": "message_stop"})

    return ScriptedResponse(body_chunks=events(), chunk_interval=interval)


def unused_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (for connection-refused tests)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def openai_models(server: OpenAIServer) -> Any:
    """A worker's ModelResolver whose ``openai:`` models are served by ``server``
    through the real SDK (no retries in the SDK: Temporal retries)."""
    from openai import AsyncOpenAI

    from agentloop.activities.providers.models import ModelResolver
    from agentloop.activities.providers.openai_model import OpenAIChatModel

    client = AsyncOpenAI(base_url=server.base_url, api_key="test-key", max_retries=0)
    return ModelResolver({"openai": lambda provider, name: OpenAIChatModel(client)})


def anthropic_models(server: AnthropicServer) -> Any:
    """A worker's ModelResolver whose ``anthropic:`` models are served by
    ``server`` through the real SDK (no retries in the SDK: Temporal retries)."""
    from anthropic import AsyncAnthropic

    from agentloop.activities.providers.anthropic_model import AnthropicChatModel
    from agentloop.activities.providers.models import ModelResolver

    client = AsyncAnthropic(base_url=server.origin, api_key="test-key", max_retries=0)
    return ModelResolver({"anthropic": lambda provider, name: AnthropicChatModel(client)})


class ErrorsSeen:
    """Wraps a ChatModel and keeps the ``ApplicationError`` each call raised,
    so a test sees the error of every attempt, not only the last one."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.errors: list[Any] = []

    async def complete(self, request: Any, on_delta: Any = None) -> Any:
        from temporalio.exceptions import ApplicationError

        try:
            return await self.model.complete(request, on_delta)
        except ApplicationError as exc:
            self.errors.append(exc)
            raise
