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
"""

from __future__ import annotations

import json
import socket
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "AnthropicServer",
    "OpenAIServer",
    "RecordedRequest",
    "ScriptedHTTPServer",
    "ScriptedResponse",
    "anthropic_error_body",
    "anthropic_message",
    "openai_completion",
    "openai_error_body",
    "openai_tool_call",
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
    """

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    json_body: Any = None
    raw_body: bytes | None = None
    body_chunks: list[bytes] | None = None
    drop_connection: bool = False


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
        response = owner._next_response(recorded)
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
            for chunk in response.body_chunks or []:
                if chunk:
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

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
        self._script: deque[ScriptedResponse] = deque()
        self._lock = threading.Lock()
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

    def not_found_body(self, path: str) -> Any:
        """The JSON body of a 404 for ``path`` (subclasses use their provider's shape)."""
        return {"error": {"message": f"no route {path}"}}

    def unscripted_body(self, path: str) -> Any:
        """The JSON body of the 500 sent when the script is empty."""
        return {"error": {"message": f"test server: no scripted response left for {path}"}}

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
        body["usage"] = {
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
    return body


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


def unused_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (for connection-refused tests)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
