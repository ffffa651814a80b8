"""The built-in ``shell_command`` tool: bash in the workspace, inside the
worker's shell sandbox (:mod:`agentloop.activities.shell_sandbox.sandbox`), killed with everything it
started when it ends, times out or is cancelled."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
from pathlib import Path

from agentloop.activities.builtin_tools.workspace import resolve_in_workspace
from agentloop.activities.shell_sandbox import sandbox
from agentloop.shared.base.errors import ToolError, UserError
from agentloop.shared.base.messages import cut_hint
from agentloop.shared.base.text import cut
from agentloop.tools.tool_context import ToolContext

# How often a running command heartbeats; well under any sane heartbeat timeout.
_HEARTBEAT_INTERVAL = 1.0
# After SIGTERM on timeout, how long the command gets to exit before SIGKILL.
_TERM_GRACE = 2.0
# After bash exits, how long background processes that still hold the output
# pipe may keep writing before the process group is killed (only reached when
# the sandbox's first process did not end them already).
_DRAIN_GRACE = 1.0
# How long to wait for a killed process to be reaped and its pipe to close.
_REAP_TIMEOUT = 5.0


async def shell_command(
    command: str,
    workdir: str = ".",
    timeout_seconds: float = 60,
    *,
    ctx: ToolContext,
) -> str:
    """Run a bash command in the workspace and return its exit code and output.

    The command runs with `bash -c` (not a login shell); stdout and stderr are
    combined. A nonzero exit code is reported, not treated as a failure. There
    is no stdin. Background processes still running when the command ends are
    killed (setsid and nohup too), so start nothing meant to outlive the call.
    The environment holds only PATH, HOME, locale and terminal settings. Very
    long output is cut in the middle.

    Args:
        command: The bash command line, e.g. "pytest -q tests/test_x.py".
        workdir: Directory to run in, relative to the workspace root.
        timeout_seconds: Kill the command if it runs longer than this many seconds.
        ctx: The call context (supplied by the executor, not by the model).
    """
    if not command.strip():
        raise ToolError("The command is empty; pass the bash command line to run")
    if timeout_seconds <= 0:
        raise ToolError(f"timeout_seconds must be greater than 0, got {timeout_seconds:g}")
    cwd = resolve_in_workspace(ctx.workspace, workdir, must_exist=True)
    if not cwd.is_dir():
        raise ToolError(f"workdir '{workdir}' is not a directory")

    try:
        settings = sandbox.SandboxSettings.from_env()
        launcher = await asyncio.to_thread(sandbox.resolve_launcher, settings)
    except UserError as exc:
        raise ToolError(f"The worker's shell sandbox is misconfigured, so no command can run: {exc}") from None
    env = sandbox.command_env(settings)
    bash = shutil.which("bash", path=env["PATH"])
    if bash is None:
        raise ToolError(f"The command could not be started: bash was not found on PATH={env['PATH']}")
    tmp = sandbox.private_tmp(launcher)
    try:
        return await _run(command, ctx, cwd, timeout_seconds, settings, launcher,
                          sandbox.confined_env(launcher, env, tmp, ctx.workspace, settings.read_paths), bash, tmp)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


async def _run(command: str, ctx: ToolContext, cwd: Path, timeout_seconds: float,
               settings: sandbox.SandboxSettings, launcher: sandbox.Launcher, env: dict[str, str], bash: str,
               tmp: str | None) -> str:
    """Run the command in the sandbox (see :func:`shell_command`)."""

    loop = asyncio.get_running_loop()
    started = loop.time()
    capture = _OutputCapture(max(2 * ctx.output_limit, 4096))
    # The sandbox's first process writes bash's wait status here: inside a
    # PID namespace bash is not our child, so its exit code comes this way.
    status_read, status_write = os.pipe()
    try:
        argv = sandbox.command_line(launcher, settings, workspace=ctx.workspace, cwd=cwd,
                                    status_fd=status_write, bash=bash, command=command, tmp=tmp)
        transport, protocol = await loop.subprocess_exec(
            lambda: _CommandProtocol(capture),
            *argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            pass_fds=(status_write,),
            # Its own session (and process group): on a timeout SIGTERM reaches
            # the command's processes and the sandbox's first process, which
            # passes it on to the rest.
            start_new_session=True,
        )
    except BaseException as exc:
        os.close(status_read)
        if isinstance(exc, OSError):
            raise ToolError(f"The command could not be started: {exc}") from None
        raise
    finally:
        os.close(status_write)
    os.set_blocking(status_read, False)

    pgid = transport.get_pid()
    timed_out = False
    try:
        deadline = started + timeout_seconds
        while not protocol.exited.is_set():
            remaining = deadline - loop.time()
            if remaining <= 0:
                timed_out = True
                break
            await _wait_event(protocol.exited, min(_HEARTBEAT_INTERVAL, remaining))
            ctx.heartbeat()
        if timed_out:
            _signal_group(pgid, signal.SIGTERM)
            await _wait_event(protocol.exited, _TERM_GRACE)
        else:
            await _wait_event(protocol.output_closed, _DRAIN_GRACE)
    finally:
        # Runs on success, timeout and cancellation alike, so no call leaves
        # processes behind. In a namespace, killing the sandbox's first
        # process kills everything in it. Without one, that process (a child
        # subreaper) kills every descendant on SIGUSR1 first, those that left
        # the process group (setsid) included; then whatever is left of the
        # group dies. (A group id is not reused while any member lives; once
        # it is empty, reuse within this second would need the pid space to
        # wrap around.)
        if launcher.init_mode == "reaper" and not protocol.exited.is_set():
            _signal_process(pgid, signal.SIGUSR1)
            await _wait_event(protocol.exited, _REAP_TIMEOUT)
        _signal_group(pgid, signal.SIGKILL)
        await _wait_event(protocol.exited, _REAP_TIMEOUT)
        await _wait_event(protocol.output_closed, _REAP_TIMEOUT)
        transport.close()
        wait_status = _read_status(status_read)
        os.close(status_read)
        ctx.metrics["duration_ms"] = int((loop.time() - started) * 1000)
        ctx.metrics["sandbox"] = launcher.mode
        if launcher.landlock:
            ctx.metrics["landlock"] = launcher.landlock

    output = capture.text()
    if timed_out:
        ctx.metrics["timed_out"] = True
        partial = cut(output, max(ctx.output_limit // 2, 1000), hint=cut_hint("shell_command"), tail=True)
        raise ToolError(
            f"Command timed out after {timeout_seconds:g}s and was killed: {_preview(command)}\n"
            + (f"Output before it was killed:\n{partial}" if partial else "It printed nothing.")
        )

    if wait_status is None:
        # The sandbox itself failed before bash ran (its message is the output).
        returncode = transport.get_returncode()
        raise ToolError(
            f"The command could not be started in the {launcher.mode} sandbox (exit code {returncode}): "
            + (output.strip() or "no message")
        )
    exit_code = os.waitstatus_to_exitcode(wait_status)
    ctx.metrics["exit_code"] = exit_code
    header = f"exit code: {exit_code}"
    if exit_code < 0:
        header += f" (killed by signal {_signal_name(-exit_code)})"
    if capture.omitted:
        ctx.metrics["output_bytes"] = capture.total
        header += (
            f" (the command printed {capture.total} bytes; only the first and last parts are "
            "kept, narrow the command to see more)"
        )
    return f"{header}\n{output}" if output else f"{header}\n(no output)"


class _OutputCapture:
    """Head and tail of a byte stream, in bounded memory.

    The first ``cap`` bytes are kept as they come; after that only a rolling
    window of the last ``cap`` bytes, so a command printing gigabytes costs at
    most about three times ``cap``.
    """

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            # Trim in batches rather than per chunk to keep appends amortized O(1).
            if len(self.tail) > 2 * self.cap:
                del self.tail[: len(self.tail) - self.cap]

    @property
    def omitted(self) -> int:
        return self.total - len(self.head) - min(len(self.tail), self.cap)

    def text(self) -> str:
        tail = self.tail[-self.cap :] if len(self.tail) > self.cap else self.tail
        head_text = self.head.decode("utf-8", errors="replace")
        tail_text = bytes(tail).decode("utf-8", errors="replace")
        if self.omitted:
            return (
                f"{head_text}\n[... {self.omitted} bytes of output omitted ...]\n{tail_text}"
            )
        return head_text + tail_text


class _CommandProtocol(asyncio.SubprocessProtocol):
    """Feeds output into the capture and tells when bash exits and output ends.

    A protocol rather than ``asyncio.subprocess.Process``: its ``wait()`` also
    waits for the output pipe to close, which a background process can keep
    open long after bash has exited. And pushing chunks straight into the
    capture keeps no unbounded stream buffer.
    """

    def __init__(self, capture: _OutputCapture) -> None:
        self.capture = capture
        self.exited = asyncio.Event()
        self.output_closed = asyncio.Event()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self.capture.feed(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self.output_closed.set()

    def process_exited(self) -> None:
        self.exited.set()


async def _wait_event(event: asyncio.Event, timeout: float) -> bool:
    try:
        await asyncio.wait_for(event.wait(), timeout)
    except TimeoutError:
        pass
    return event.is_set()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        # The group is already gone (PermissionError is what macOS reports for
        # a group whose members are all zombies).
        pass


def _signal_process(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _read_status(fd: int) -> int | None:
    """The wait status the sandbox's first process wrote, or None."""
    try:
        data = os.read(fd, 64)
    except BlockingIOError:
        return None
    try:
        return int(data.decode())
    except ValueError:
        return None


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def _preview(command: str, limit: int = 200) -> str:
    return cut(" ".join(command.split()), limit)
