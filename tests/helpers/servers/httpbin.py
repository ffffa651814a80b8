"""The real httpbin (PyPI ``httpbin``), served locally in a subprocess, for
tests of a real-world OpenAPI document: flasgger makes its Swagger 2.0
document at ``/spec.json``.

httpbin's wheel pins ``greenlet<3`` on Python < 3.12 (for gevent, which its
app does not import), and the dev extra's Playwright needs ``greenlet>=3``:
pip cannot install both, and an unpinned ``httpbin`` resolves to 0.10.0,
which does not import under Werkzeug 3. So the dev extra lists httpbin's
real dependencies (Flask, flasgger, brotlicffi, decorator, six), and
:func:`httpbin_path` installs the pure-Python httpbin wheel alone, once,
beside the venv (``pip install --no-deps --target``)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from agentloop.workers.devserver import free_port

HTTPBIN = "httpbin==0.10.4"


def httpbin_path() -> str | None:
    """Where httpbin is imported from: None when it is installed in this
    environment, else a folder beside the venv holding it alone."""
    if importlib.util.find_spec("httpbin") is not None:
        return None
    target = Path(sys.prefix) / "httpbin-no-deps" / HTTPBIN.split("==")[1]
    if not (target / "httpbin").is_dir():
        done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                               HTTPBIN], capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            pytest.fail(f"httpbin is not installed and `pip install --no-deps --target {target} {HTTPBIN}` "
                        f"failed: {done.stderr.strip()[-300:]}")
    return str(target)


#: Served in the subprocess: httpbin's app, each request's method, path,
#: content type and body also written (a JSON line) to the file ``argv[2]``.
_SERVE = """
import io, json, sys
from werkzeug.serving import run_simple
from httpbin import app

def recorded(environ, start_response):
    body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    environ["wsgi.input"] = io.BytesIO(body)
    with open(sys.argv[2], "a") as log:
        log.write(json.dumps({"method": environ["REQUEST_METHOD"], "path": environ["PATH_INFO"],
                              "content_type": environ.get("CONTENT_TYPE", ""), "body": body.decode()}) + "\\n")
    return app(environ, start_response)

run_simple("127.0.0.1", int(sys.argv[1]), recorded)
"""


@contextmanager
def serve_httpbin(requests: Path) -> Iterator[str]:
    """httpbin on a free local port, in a subprocess (Werkzeug's server),
    each request it receives written to ``requests`` (JSON lines); its URL."""
    port = free_port()
    path = httpbin_path()
    code = (f"import sys; sys.path.insert(0, {path!r})\n" if path else "") + _SERVE
    process = subprocess.Popen([sys.executable, "-c", code, str(port), str(requests)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                raise AssertionError(f"httpbin exited: {process.communicate()[1].decode()[-2000:]}")
            try:
                httpx.get(url + "/get", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise AssertionError(f"httpbin did not answer at {url} within 30 s") from None
                time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)
