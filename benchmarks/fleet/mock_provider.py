"""A local model provider with a rate limit, in OpenAI's wire format.

``POST /v1/chat/completions`` answers "done" (streamed when the request
asks, as api.openai.com does) after ``service_seconds``, at ``rate``
requests a second: a token bucket of one second's requests, refilled
continuously (as providers enforce a per-minute limit in short slices).
A request that finds the bucket empty gets 429 with a ``retry-after``
header (seconds until a token is back, rounded up to a whole second), as
providers answer. It counts what it answered and when.
"""

from __future__ import annotations

import json
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

COMPLETION_ID = "chatcmpl-fleet"


def _completion(stream: bool) -> list[dict[str, Any]]:
    usage = {"prompt_tokens": 12, "completion_tokens": 1, "total_tokens": 13}
    if not stream:
        return [{"id": COMPLETION_ID, "object": "chat.completion", "created": 1_750_000_000, "model": "gpt-fleet",
                 "choices": [{"index": 0, "message": {"role": "assistant", "content": "done"},
                              "logprobs": None, "finish_reason": "stop"}], "usage": usage}]

    def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
        return {"id": COMPLETION_ID, "object": "chat.completion.chunk", "created": 1_750_000_000,
                "model": "gpt-fleet", "choices": [] if delta is None else
                [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}], **extra}

    return [chunk({"role": "assistant", "content": ""}), chunk({"content": "done"}), chunk({}, "stop"),
            chunk(None, usage=usage)]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: MockProvider

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
            return
        wait = self.server.admit()
        if wait is not None:
            self._send(429, {"error": {"message": "Rate limit reached for requests", "type": "requests",
                                       "code": "rate_limit_exceeded"}},
                       {"retry-after": str(max(1, math.ceil(wait)))})
            return
        time.sleep(self.server.service_seconds)
        if body.get("stream"):
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for part in [*(f"data: {json.dumps(c)}\n\n" for c in _completion(True)), "data: [DONE]\n\n"]:
                data = part.encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        else:
            self._send(200, _completion(False)[0])
        self.server.answered()

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)


class MockProvider(ThreadingHTTPServer):
    """The provider, on a free local port (``base_url``); ``start()`` serves it in a thread.

    Args:
        rate: Requests it answers a second (its bucket holds as many).
        service_seconds: How long an answer takes.
    """

    daemon_threads = True

    def __init__(self, rate: float, service_seconds: float = 0.05) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.rate, self.service_seconds = rate, service_seconds
        self._lock = threading.Lock()
        self._tokens, self._refilled = rate, time.monotonic()
        self.ok_times: list[float] = []
        self.throttled_times: list[float] = []
        self.throttled = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def start(self) -> MockProvider:
        threading.Thread(target=self.serve_forever, name="mock provider", daemon=True).start()
        return self

    def admit(self) -> float | None:
        """None when a request may go on now; else the seconds until one may."""
        now = time.monotonic()
        with self._lock:
            self._tokens = min(self.rate, self._tokens + (now - self._refilled) * self.rate)
            self._refilled = now
            if self._tokens < 1:
                self.throttled += 1
                self.throttled_times.append(now)
                return (1 - self._tokens) / self.rate
            self._tokens -= 1
            return None

    def answered(self) -> None:
        with self._lock:
            self.ok_times.append(time.monotonic())

    def reset(self) -> None:
        with self._lock:
            self._tokens, self._refilled = self.rate, time.monotonic()
            self.ok_times, self.throttled_times, self.throttled = [], [], 0

    def throughput(self) -> float:
        """Answers a second, from the first answer to the last."""
        times = sorted(self.ok_times)
        return (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 and times[-1] > times[0] else 0.0

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up is not the provider's concern
