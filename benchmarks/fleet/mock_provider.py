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

from benchmarks.fleet.load import pct

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
        dispatched = self.headers.get("x-dispatched-at")
        wait = self.server.admit(float(dispatched) if dispatched else None)
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
        # (wall-clock arrival, the sender's x-dispatched-at header or None, admitted) per request
        self.arrivals: list[tuple[float, float | None, bool]] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def start(self) -> MockProvider:
        threading.Thread(target=self.serve_forever, name="mock provider", daemon=True).start()
        return self

    def admit(self, dispatched: float | None = None) -> float | None:
        """None when a request may go on now; else the seconds until one may.

        ``dispatched`` is when the sender says the request was handed out
        (``x-dispatched-at``, Unix seconds), kept with its arrival.
        """
        now = time.monotonic()
        with self._lock:
            self._tokens = min(self.rate, self._tokens + (now - self._refilled) * self.rate)
            self._refilled = now
            admitted = self._tokens >= 1
            self.arrivals.append((time.time(), dispatched, admitted))
            if not admitted:
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
            self.arrivals = []

    def throughput(self) -> float:
        """Answers a second, from the first answer to the last."""
        times = sorted(self.ok_times)
        return (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 and times[-1] > times[0] else 0.0

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up is not the provider's concern


def bucket_rejections(times: list[float], rate: float, capacity: float | None = None) -> int:
    """How many of the requests at ``times`` (seconds) a token bucket of
    ``rate`` a second holding ``capacity`` (default: one second's) would refuse,
    as :meth:`MockProvider.admit` does; the bucket starts full."""
    capacity = rate if capacity is None else capacity
    tokens, last, refused = capacity, None, 0
    for t in sorted(times):
        tokens = capacity if last is None else min(capacity, tokens + (t - last) * rate)
        last = t
        if tokens < 1:
            refused += 1
        else:
            tokens -= 1
    return refused


def most_in_a_second(times: list[float]) -> int:
    """The most of ``times`` (seconds) that fall within any one second."""
    ordered, best, first = sorted(times), 0, 0
    for last, t in enumerate(ordered):
        while t - ordered[first] >= 1.0:
            first += 1
        best = max(best, last - first + 1)
    return best


def arrival_summary(arrivals: list[tuple[float, float | None, bool]], began: float, rate: float,
                    lane_rps: float | None = None) -> dict[str, Any]:
    """What the provider saw (:attr:`MockProvider.arrivals`), to tell where a
    burst came from: its 429s (and when, in seconds after ``began``); the 429s
    the same bucket would have sent had each stamped request arrived when the
    server dispatched it (``429s at dispatch``); the most requests dispatched,
    and arrived, in any one second; the lag from dispatch to arrival; with
    ``lane_rps``, the dispatches past what the server's own limiter allows
    (``over the lane's limit``: a GCRA of ``lane_rps`` with a one-second
    burst, i.e. a bucket of ``lane_rps + 1``; the dispatch times are the
    history service's, a few milliseconds after matching's)."""
    dispatched = [d for _, d, _ in arrivals if d is not None]
    lags = [1000 * (a - d) for a, d, _ in arrivals if d is not None]
    refused = [round(a - began, 1) for a, _, ok in arrivals if not ok]
    return {"requests": len(arrivals), "stamped": len(dispatched), "429s": len(refused),
            "429 %": round(100 * len(refused) / max(1, len(arrivals)), 2),
            "429s at dispatch": bucket_rejections(dispatched, rate),
            **({"over the lane's limit": bucket_rejections(dispatched, lane_rps, lane_rps + 1)} if lane_rps else {}),
            "most dispatched in 1s": most_in_a_second(dispatched),
            "most arrived in 1s": most_in_a_second([a for a, _, _ in arrivals]),
            "lag p50 ms": round(pct(lags, 50)), "lag p99 ms": round(pct(lags, 99)),
            "lag max ms": round(max(lags or [0])), "429 at s": refused}
