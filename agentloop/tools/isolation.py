"""Running a plain (synchronous) tool function in a child process.

A synchronous tool used to run in a thread of the worker. C code that holds
the GIL (a catastrophic regular expression in Python's ``re``, a long
``sum`` over a range, a C extension that never releases it) then froze the
whole worker: its event loop, heartbeats, queries and every other run on it,
and no timeout could fire. Here each call runs in a forked child instead:

* ``os.fork`` rather than a spawned interpreter, because tools are often
  closures (``@registry.tool`` inside a function) that cannot be pickled by
  reference; the child inherits the function, its arguments and the
  :class:`~agentloop.tools.tool_context.ToolContext` as they are.
* The child sends back, over a pipe, its heartbeats while it works (relayed to
  the context's ``heartbeat``), then the return value or the exception and
  the ``ctx.metrics`` it filled in. Values must be picklable. (The worker
  heartbeats on its own while it waits, as for any tool.)
* The parent waits on the pipe without blocking its event loop. Cancelling
  that wait (the ``execute_tool`` activity's timeout, a cancelled run) kills
  the child's process group with SIGKILL and reaps it; nothing survives it.
* The child dies with the worker (``PR_SET_PDEATHSIG`` on Linux), so a
  worker killed mid-call leaves no orphan burning CPU.

:func:`run_isolated` is what :meth:`agentloop.tools.registry.Tool.run` calls for sync
tools unless they were registered with ``isolated=False``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import gc
import logging
import os
import pickle
import signal
import struct
import sys
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentloop.shared.base.errors import ToolError

if TYPE_CHECKING:
    from agentloop.tools.tool_context import ToolContext

__all__ = ["IsolatedToolError", "fork_available", "run_isolated"]

_log = logging.getLogger(__name__)
_HEADER = struct.Struct(">Q")
_PR_SET_PDEATHSIG = 1
# Exit code of a child that could not even report its failure.
_CHILD_CRASHED = 70


class IsolatedToolError(RuntimeError):
    """A tool's child process could not hand back a result: the value could
    not be pickled, or the process died (killed, or exited) before it answered."""


def fork_available() -> bool:
    """Whether this platform can fork (not Windows)."""
    return hasattr(os, "fork")


async def run_isolated(
    fn: Callable[..., Any],
    kwargs: dict[str, Any],
    *,
    tool_name: str,
    ctx: ToolContext | None = None,
) -> Any:
    """Call ``fn(**kwargs)`` in a forked child and return what it returned.

    Args:
        fn: The tool's function (a plain function; closures are fine).
        kwargs: Its arguments, the ToolContext included.
        tool_name: For error messages.
        ctx: The call's context: in the child its ``heartbeat`` sends the
            heartbeat to this process, which passes it on to ``ctx.heartbeat``;
            the ``ctx.metrics`` the child fills in are copied into this one's.

    Returns:
        The function's return value, unpickled.

    Raises:
        ToolError: The function raised ToolError (same message).
        Exception: The function raised another exception: the same one when
            it can be pickled, else an exception of a class with the same
            name and message.
        IsolatedToolError: The value could not be pickled, or the child died
            without answering.
        asyncio.CancelledError: The wait was cancelled; the child was killed.
    """
    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    parent = os.getpid()
    # Output still buffered here would otherwise be written twice, once by the child.
    _flush_stdio()
    with warnings.catch_warnings():
        # Python 3.12 warns about forking a multi-threaded process: the child
        # only runs the tool and never touches the worker's threads or locks.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: never returns into the caller's frames
        try:
            os.close(read_fd)
            _child(fn, kwargs, ctx, write_fd, parent)
        finally:
            os._exit(_CHILD_CRASHED)

    os.close(write_fd)
    # Also done in the child; whichever runs first, the group exists before
    # it could be killed.
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)
    answered = False
    try:
        message = await _receive(loop, read_fd, ctx)
        answered = True
    finally:
        if not answered:
            _kill(pid)
            # Shielded: a second cancellation must not leave a zombie behind.
            await asyncio.shield(_wait_exit(loop, pid))
    if message is None:
        status = await _wait_exit(loop, pid)
        raise IsolatedToolError(
            f"Tool '{tool_name}' ended without a result: its process {_describe_status(status)}"
        )
    # It answered and is exiting: reap it when it is gone, without making the
    # call wait for the kernel to tear down its copy of the worker's memory.
    _reap_later(loop, pid)
    _, reply, metrics = message
    if ctx is not None:
        ctx.metrics.update(metrics)
    return _unpack(reply, tool_name)


def _child(
    fn: Callable[..., Any],
    kwargs: dict[str, Any],
    ctx: ToolContext | None,
    write_fd: int,
    parent: int,
) -> None:
    _detach_from_worker(parent)
    if ctx is not None:
        ctx.heartbeat = lambda *details: _send_heartbeat(write_fd, details)
    try:
        value = fn(**kwargs)
    except ToolError as exc:
        reply: tuple[Any, ...] = ("tool_error", str(exc))
    except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent
        try:
            pickled: bytes | None = pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:
            pickled = None
        reply = ("raised", type(exc).__name__, str(exc), pickled)
    else:
        reply = ("ok", value)
    payload = _dumps(reply, ctx.metrics if ctx is not None else {})
    _flush_stdio()
    _write_frame(write_fd, payload)
    os._exit(0)


def _detach_from_worker(parent: int) -> None:
    """Make the fresh child independent of the worker it was forked from."""
    # The worker's signal handlers (asyncio's, SIGINT/SIGTERM for shutdown)
    # write to the event loop's wakeup descriptor, which the child shares.
    with contextlib.suppress(ValueError, OSError):
        signal.set_wakeup_fd(-1)
    for sig in signal.valid_signals():
        with contextlib.suppress(ValueError, OSError, TypeError):
            if callable(signal.getsignal(sig)):
                signal.signal(sig, signal.SIG_DFL)
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the worker died before prctl took effect
            os._exit(_CHILD_CRASHED)
    # Objects inherited from the worker are never collected here, so their
    # finalizers (closing sockets the worker still uses) cannot run.
    gc.freeze()


def _dumps(reply: tuple[Any, ...], metrics: dict[str, Any]) -> bytes:
    metrics = dict(metrics)
    try:
        return pickle.dumps(("result", reply, metrics), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        problem = f"{type(exc).__name__}: {exc}"
    try:
        pickle.dumps(metrics, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        metrics = {}
    if reply[0] == "ok":
        failed: tuple[Any, ...] = ("unpicklable", type(reply[1]).__name__, problem)
    else:  # an exception whose message went in fine; the metrics did not
        failed = reply
    try:
        return pickle.dumps(("result", failed, metrics), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return pickle.dumps(("result", failed, {}), protocol=pickle.HIGHEST_PROTOCOL)


def _send_heartbeat(write_fd: int, details: tuple[Any, ...]) -> None:
    try:
        payload = pickle.dumps(("heartbeat", details), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        payload = pickle.dumps(("heartbeat", ()), protocol=pickle.HIGHEST_PROTOCOL)
    _write_frame(write_fd, payload)


def _write_frame(fd: int, payload: bytes) -> None:
    view = memoryview(_HEADER.pack(len(payload)) + payload)
    while view:
        view = view[os.write(fd, view) :]


def _flush_stdio() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


async def _receive(
    loop: asyncio.AbstractEventLoop, read_fd: int, ctx: ToolContext | None
) -> tuple[Any, ...] | None:
    """The child's ("result", reply, metrics), relaying heartbeats before it;
    None on EOF. Owns ``read_fd`` and closes it."""
    received: asyncio.Future[tuple[Any, ...] | None] = loop.create_future()
    buffer = bytearray()

    def finish(message: tuple[Any, ...] | None) -> None:
        if not received.done():
            received.set_result(message)

    def on_readable() -> None:
        try:
            chunk = os.read(read_fd, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            finish(None)
            return
        buffer.extend(chunk)
        while len(buffer) >= _HEADER.size:
            end = _HEADER.size + _HEADER.unpack_from(buffer)[0]
            if len(buffer) < end:
                return
            try:
                message = pickle.loads(bytes(buffer[_HEADER.size : end]))
            except Exception as exc:  # e.g. a value whose class cannot be rebuilt here
                finish(("result", ("undecodable", f"{type(exc).__name__}: {exc}"), {}))
                return
            del buffer[:end]
            if message[0] != "heartbeat":
                finish(message)
                return
            if ctx is not None:
                try:
                    ctx.heartbeat(*message[1])
                except Exception:  # a lost heartbeat must not lose the call
                    _log.warning("relaying a heartbeat of a tool's process failed", exc_info=True)

    os.set_blocking(read_fd, False)
    loop.add_reader(read_fd, on_readable)
    try:
        return await received
    finally:
        loop.remove_reader(read_fd)
        os.close(read_fd)


def _unpack(reply: tuple[Any, ...], tool_name: str) -> Any:
    kind = reply[0]
    if kind == "ok":
        return reply[1]
    if kind == "tool_error":
        raise ToolError(reply[1])
    if kind == "undecodable":
        raise IsolatedToolError(
            f"Tool '{tool_name}' answered with a value that could not be rebuilt in the worker "
            f"({reply[1]}); return text, numbers, lists, dicts or a pydantic model, or register "
            "the tool with isolated=False"
        )
    if kind == "unpicklable":
        raise IsolatedToolError(
            f"Tool '{tool_name}' returned a {reply[1]}, which cannot be passed back from the "
            f"tool's process ({reply[2]}); return text, numbers, lists, dicts or a pydantic "
            "model, or register the tool with isolated=False"
        )
    _, type_name, text, pickled = reply
    original: BaseException | None = None
    if pickled is not None:
        with contextlib.suppress(Exception):
            original = pickle.loads(pickled)
    # Never re-raise SystemExit or KeyboardInterrupt in the worker.
    if isinstance(original, Exception):
        raise original
    raise type(type_name, (Exception,), {"__module__": __name__})(text)


async def _wait_exit(loop: asyncio.AbstractEventLoop, pid: int) -> int:
    """Wait for the child to exit without blocking the loop; its wait status."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return await asyncio.to_thread(_blocking_wait, pid)
    try:
        exited = loop.create_future()
        def on_exit() -> None:
            if not exited.done():
                exited.set_result(None)

        loop.add_reader(pidfd, on_exit)
        try:
            await exited
        finally:
            loop.remove_reader(pidfd)
    finally:
        os.close(pidfd)
    return _blocking_wait(pid)


def _reap_later(loop: asyncio.AbstractEventLoop, pid: int) -> None:
    """Reap an exiting child from the event loop once it has exited."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0]:
            return
        pidfd = os.pidfd_open(pid)
    except ChildProcessError:
        return
    except (AttributeError, OSError):  # no pidfd: a thread waits instead
        loop.run_in_executor(None, _blocking_wait, pid)
        return

    def reap() -> None:
        loop.remove_reader(pidfd)
        os.close(pidfd)
        _blocking_wait(pid)

    loop.add_reader(pidfd, reap)


def _blocking_wait(pid: int) -> int:
    while True:
        try:
            return os.waitpid(pid, 0)[1]
        except InterruptedError:
            continue
        except ChildProcessError:  # reaped elsewhere
            return 0


def _kill(pid: int) -> None:
    """SIGKILL the child and anything it started in its process group."""
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)


def _describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"was killed by {name}"
    code = os.waitstatus_to_exitcode(status)
    if code == _CHILD_CRASHED:
        return f"crashed before it could answer (exit code {code})"
    return f"exited with code {code} (did the tool call sys.exit or os._exit?)"


def _load_prctl() -> Callable[..., int] | None:
    # Loaded in the worker, not in a child: dlopen after fork can deadlock.
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl
    except (OSError, AttributeError):
        return None


_prctl = _load_prctl()
