"""The door in front of the dev server's web UI: a proxy on the UI's port
that passes a request on to the Temporal UI (on a private port) only when
its ``Host`` is a loopback name.

The Temporal UI checks no ``Host``, and its CSRF token is a cookie any page
of the same origin can read. A web page whose own name resolves to
127.0.0.1 (DNS rebinding) is of the same origin as the UI under that name,
so without this door it could read every run's history and start a run
with the shell allowed (the UI's "start workflow" API) on the developer's
machine. See docs/security.md.
"""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: The names the UI answers to (the port is not checked: a rebound page
#: sends its own name, whatever the port).
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})
#: Headers of one hop, not passed on.
HOP_HEADERS = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
                         "trailer", "transfer-encoding", "upgrade", "content-length"})
#: The largest request body passed on (the UI sends small JSON bodies).
MAX_BODY_BYTES = 16 * 1024 * 1024


def host_refusal(host: str | None) -> str | None:
    """Why a request with this ``Host`` is refused, or None."""
    value = (host or "").strip().lower()
    if value.startswith("["):
        name, _, rest = value.partition("]")
        name, port = name + "]", rest
    else:
        name, _, port = value.partition(":")
        port = ":" + port if port else ""
    if name in LOOPBACK_NAMES and (not port or port.startswith(":")):
        return None
    return (f"the Temporal UI of `agentloop dev` answers to 127.0.0.1, localhost and [::1], not Host "
            f"{(host or '(none)')[:100]!r}: open it at http://127.0.0.1:<port>; a page of another name that "
            "reaches it (DNS rebinding) could read every run and start new ones")


class UiDoor:
    """A proxy on 127.0.0.1:``port`` to the UI on 127.0.0.1:``upstream``,
    in threads of its own, refusing other names than the loopback ones."""

    def __init__(self, port: int, upstream: int) -> None:
        door = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _pass_on(self) -> None:
                refused = host_refusal(self.headers.get("Host"))
                if refused is not None:
                    self._answer(403, refused)
                    return
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY_BYTES:
                    self._answer(413, f"the request body is over {MAX_BODY_BYTES} bytes")
                    return
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
                connection = http.client.HTTPConnection("127.0.0.1", door.upstream, timeout=300)
                try:
                    connection.request(self.command, self.path, body=body, headers=headers)
                    response = connection.getresponse()
                    data = response.read()
                except OSError as err:
                    self._answer(502, f"the Temporal UI did not answer: {err}")
                    return
                finally:
                    connection.close()
                self.send_response(response.status, response.reason)
                for key, value in response.getheaders():
                    if key.lower() not in HOP_HEADERS:
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def _answer(self, status: int, text: str) -> None:
                data = (text + "\n").encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)
                self.close_connection = True

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _pass_on  # noqa: N815

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.upstream = upstream
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="agentloop UI door", daemon=True)

    def start(self) -> UiDoor:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
