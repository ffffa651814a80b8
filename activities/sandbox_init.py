"""The first process of a sandboxed shell command (run as ``python -I -S``).

Usage: ``sandbox_init.py MODE STATUS_FD PROGRAM [ARG ...]``.

It starts ``PROGRAM`` (``bash -c COMMAND``) as its child, waits for it and
writes the child's raw wait status, in decimal, to ``STATUS_FD``; then it
makes sure nothing the command started is left, and exits:

* ``MODE`` ``ns``: it runs inside a fresh PID namespace (PID 1 under
  ``unshare``, PID 2 under bubblewrap). Exiting is enough: when the
  namespace's first process dies, the kernel kills every process in it,
  ``setsid`` and double-forked daemons included. Signals it gets (SIGTERM on
  a timeout) go on to every process in the namespace.
* ``MODE`` ``reaper`` (no namespace available): it makes itself a child
  subreaper, so everything the command starts, daemons included, stays its
  descendant; once the command exits, or on SIGUSR1 (sent when the worker
  dies, and by the worker to end a call), it kills all of them; SIGTERM goes on
  to all of them.

Standard library only, no ``site``: it starts in about 10 ms. It must also
run inside bubblewrap, where only the Python installation is mounted.
"""

import os
import sys

try:  # the C module: ``signal`` would import enum and cost ~6 ms
    import _signal as signal
except ImportError:  # pragma: no cover - other Pythons
    import signal  # type: ignore[no-redef]

_PR_SET_CHILD_SUBREAPER = 36


def _children_of(root: int) -> list[int]:
    """Every live descendant of ``root`` (read from /proc)."""
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] not in (b"Z", b"X"):
            parents[int(name)] = int(fields[1])
    found = []
    for pid in parents:
        ancestor, hops = parents.get(pid), 0
        while ancestor is not None and ancestor > 1 and hops < 10_000:
            if ancestor == root:
                found.append(pid)
                break
            ancestor, hops = parents.get(ancestor), hops + 1
    return found


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _kill_descendants(sig: int) -> None:
    # Repeat: a process may fork between the scan and the kill.
    for _ in range(100):
        pids = _children_of(os.getpid())
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        _reap()


def main() -> None:
    mode, status_fd, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    os.set_inheritable(status_fd, False)
    if mode == "reaper":
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

    def forward(sig: int, frame: object) -> None:
        if mode == "ns":
            try:
                os.kill(-1, sig)  # every process of the namespace but this one
            except OSError:
                pass
        else:
            _kill_descendants(sig)

    def kill_all_and_exit(sig: int, frame: object) -> None:
        _kill_descendants(signal.SIGKILL)
        os._exit(0)

    # Handlers first: SIGUSR1 may come at once (the worker died, see
    # activities/sandbox.py), and must not find a command but no handler.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    signal.signal(signal.SIGUSR1, kill_all_and_exit if mode == "reaper" else forward)
    child = os.fork()
    if child == 0:
        # Python ignores SIGPIPE and SIGXFSZ; the command must not inherit that
        # (``yes | head`` would never end). Caught signals reset on exec.
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        try:
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(2, f"cannot run {argv[0]}: {exc.strerror}\n".encode())
        os._exit(127)

    status = None
    while status is None:
        try:
            pid, wait_status = os.wait()
        except ChildProcessError:
            break
        if pid == child:
            status = wait_status
    if status is not None:
        try:
            os.write(status_fd, str(status).encode())
        except OSError:
            pass
    if mode == "reaper":
        _kill_descendants(signal.SIGKILL)
    os._exit(0)


if __name__ == "__main__":
    main()
