"""A clean interpreter exit for processes that used Temporal's client.

The Temporal SDK's Rust bridge resolves every Python future of a client call
(and of a worker's polls) from a Tokio thread, inside ``Python::attach``
(pyo3-async-runtimes' ``future_into_py``): it hands the result to the event
loop with ``call_soon_threadsafe``, then drops the call's task locals (the
event loop and a ``contextvars.Context``), still holding the GIL. The event
loop can see the result, and the script can finish, before that thread is
done: ``call_soon_threadsafe`` wakes the loop with a socket write, which lets
the main thread take the GIL. When the main thread then runs into
``Py_FinalizeEx`` without letting go of the GIL, the bridge thread gets the
GIL only during finalisation, and CPython 3.11 ends such a thread with
``pthread_exit``. The unwinding through Rust then dies in ``Fatal Python
error: PyGILState_Release: thread state ... must be current when
releasing`` (exit 134), or the thread frees its objects while the
finalising GC runs (a segfault, exit 139). This is
temporalio/sdk-python#300, in every temporalio release from 1.18 to 1.35
(1.10 did not crash in 30 runs; agentloop needs 1.35).

:func:`settle_temporal_threads` runs at exit, before finalisation starts
(``atexit`` handlers do; the interpreter is whole then): it lets go of the
GIL for a moment and waits until no thread the ``threading`` module does not
know (a bridge thread) is running Python code, so the bridge threads finish
first. Importing :mod:`agentloop` registers it; a plain temporalio script can
import this module for the same effect. Measured in the project's report:
short client scripts crashed at exit in 3-15% of runs without it, in none of
hundreds with it.
"""

from __future__ import annotations

import atexit
import sys
import threading
import time

__all__ = ["settle_temporal_threads"]

#: Least time the exit hook lets go of the GIL, in seconds: enough for a
#: bridge thread that waits for it to take it and finish (microseconds of
#: work) on a busy machine.
MINIMUM_SECONDS = 0.005

#: Most time the exit hook waits for bridge threads still running Python code.
TIMEOUT_SECONDS = 2.0


def _foreign_threads_in_python() -> list[int]:
    """Idents of threads, not started by ``threading``, that are running
    Python code now (they have a frame): the SDK's bridge threads."""
    known = {
        thread.ident
        for thread in threading.enumerate()  # under threading's lock, unlike a walk of its private table
        if thread.ident is not None and not isinstance(thread, threading._DummyThread)  # noqa: SLF001
    }
    return [ident for ident in sys._current_frames() if ident not in known]  # noqa: SLF001


def settle_temporal_threads(
    minimum: float = MINIMUM_SECONDS, timeout: float = TIMEOUT_SECONDS
) -> None:
    """Let Temporal's bridge threads finish their Python work before the
    interpreter finalises (see the module's documentation).

    Sleeps (without the GIL) in steps of a millisecond for at least
    ``minimum`` seconds, and on while a thread outside ``threading``'s
    knowledge runs Python code, for at most ``timeout`` seconds. Harmless
    where Temporal was not used; registered with ``atexit`` on import.
    """
    started = time.monotonic()
    while True:
        time.sleep(0.001)
        waited = time.monotonic() - started
        if waited >= timeout or (waited >= minimum and not _foreign_threads_in_python()):
            return


atexit.register(settle_temporal_threads)
