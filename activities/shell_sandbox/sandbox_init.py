"""The first process of a sandboxed shell command (run as ``python -I -S``).

Usage: ``sandbox_init.py MODE STATUS_FD [OPTION ...] -- PROGRAM [ARG ...]``
(without options, ``--`` may be left out).

Before anything else it confines itself, so the command inherits it all
(options, in this order):

* ``--keep PATH``: a directory (the workspace) to keep visible at its path
  when a ``--tmpfs`` covers it (bind-mounted back onto the new tmpfs);
  ``--keep-ro PATH`` (repeatable): the same, read-only (a read path).
* ``--tmpfs PATH``: mount an empty tmpfs on ``PATH`` (a private ``/tmp``;
  needs the mount namespace and its capabilities, namespace mode only).
* ``--loopback``: bring the loopback interface up (in a new network
  namespace, where it starts down; needs the namespace's capabilities).
* ``--drop-caps``: drop every capability, the bounding set and the ambient
  set, and as uid 0 lock the securebits (no root, no setuid fixup), as
  ``setpriv`` would; namespace mode, after the mounts.
* ``--landlock ABI``: restrict the filesystem with Landlock (``ABI``: the
  kernel's, queried by the worker) to the paths given with ``--rw PATH``
  (everything), ``--rx PATH`` (read and execute), ``--ro PATH`` (read) and
  ``--dev PATH`` (read and write a device file). ``PR_SET_NO_NEW_PRIVS`` is
  set first, so no setuid program regains anything.
* ``--net-ports PORTS``: with Landlock ABI 4+, a second ruleset: outbound
  TCP only to the comma-separated ``PORTS`` (empty: none), binding no TCP
  port (``AGENTLOOP_SHELL_NETWORK=web`` and ``off`` without a namespace).

A confinement step that fails ends the init with exit code 125 and the
reason on stderr, before the command runs.

It then starts ``PROGRAM`` (``bash -c COMMAND``) as its child, waits for it and
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
    import signal

_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAPBSET_DROP = 24
_PR_SET_SECUREBITS = 28
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
#: noroot, noroot_locked, no_setuid_fixup, no_setuid_fixup_locked.
_SECUREBITS_LOCKED = 0x0F
_LINUX_CAPABILITY_VERSION_3 = 0x20080522

#: Landlock's system calls; the same numbers on every architecture but alpha
#: (new system calls share one table since Linux 5.1).
LANDLOCK_SYSCALLS = {"create_ruleset": 444, "add_rule": 445, "restrict_self": 446}
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1

# Filesystem access rights, and the ABI that brought each one.
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2: link and rename across directories
FS_TRUNCATE = 1 << 14  # ABI 3
FS_IOCTL_DEV = 1 << 15  # ABI 5
_FS_ABI_1 = (1 << 13) - 1
# Network access rights (ABI 4).
NET_BIND_TCP = 1 << 0
NET_CONNECT_TCP = 1 << 1
_LANDLOCK_RULE_NET_PORT = 2
#: Rights that apply to a file (a rule on a file may hold only these).
_FS_FILE = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV
# Scopes (ABI 6): no connecting to abstract unix sockets, no signals, outside.
_SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
_SCOPE_SIGNAL = 1 << 1

#: What each kind of path grants.
RIGHTS = {
    "rw": -1,  # everything handled
    "rx": FS_EXECUTE | FS_READ_FILE | FS_READ_DIR,
    "ro": FS_READ_FILE | FS_READ_DIR,
    "dev": FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE | FS_IOCTL_DEV | FS_READ_DIR,
}


def handled_fs(abi: int) -> int:
    """The filesystem rights Landlock ABI ``abi`` can restrict (all of them are)."""
    rights = _FS_ABI_1
    if abi >= 2:
        rights |= FS_REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
    if abi >= 5:
        rights |= FS_IOCTL_DEV
    return rights


def _libc():
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when it has none (or it is off)."""
    if not sys.platform.startswith("linux"):
        return 0
    import platform

    if platform.machine().startswith("alpha"):
        return 0
    try:
        abi = _libc().syscall(LANDLOCK_SYSCALLS["create_ruleset"], None, 0, _LANDLOCK_CREATE_RULESET_VERSION)
    except (OSError, AttributeError):
        return 0
    return max(int(abi), 0)


class ConfineError(Exception):
    """A confinement step failed (the command must not run)."""


def _check(result: int, what: str) -> int:
    if result < 0:
        import ctypes

        errno = ctypes.get_errno()
        raise ConfineError(f"{what}: {os.strerror(errno)}")
    return result


def restrict_filesystem(abi: int, rules: list[tuple[str, str]]) -> None:
    """Landlock this process (and all it starts) to ``rules`` (kind, path):
    paths that do not exist are left out."""
    import ctypes

    libc = _libc()
    handled = handled_fs(abi)

    class RulesetAttr(ctypes.Structure):
        _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                    ("scoped", ctypes.c_uint64)]

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    attr = RulesetAttr(handled, 0, _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if abi >= 6 else 0)
    # The struct's size tells the kernel which fields there are: scoped from ABI 6.
    size = ctypes.sizeof(attr) if abi >= 6 else 8
    ruleset = _check(libc.syscall(LANDLOCK_SYSCALLS["create_ruleset"], ctypes.byref(attr), ctypes.c_size_t(size), 0),
                     "landlock_create_ruleset")
    try:
        for kind, path in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                rights = RIGHTS[kind] & handled
                if not os.path.isdir(f"/proc/self/fd/{fd}"):
                    rights &= _FS_FILE
                beneath = PathBeneath(rights, fd)
                _check(libc.syscall(LANDLOCK_SYSCALLS["add_rule"], ruleset, _LANDLOCK_RULE_PATH_BENEATH,
                                    ctypes.byref(beneath), 0), f"landlock_add_rule {path}")
            finally:
                os.close(fd)
        _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        _check(libc.syscall(LANDLOCK_SYSCALLS["restrict_self"], ruleset, 0), "landlock_restrict_self")
    finally:
        os.close(ruleset)


def restrict_network(ports: list[int]) -> None:
    """Landlock this process's TCP (ABI 4+): connect only to ``ports``,
    bind none. UDP and other protocols are not Landlock's to restrict."""
    import ctypes

    libc = _libc()

    class RulesetAttr(ctypes.Structure):
        _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64)]

    class NetPort(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]

    attr = RulesetAttr(0, NET_BIND_TCP | NET_CONNECT_TCP)
    ruleset = _check(libc.syscall(LANDLOCK_SYSCALLS["create_ruleset"], ctypes.byref(attr),
                                  ctypes.c_size_t(ctypes.sizeof(attr)), 0), "landlock_create_ruleset (network)")
    try:
        for port in ports:
            rule = NetPort(NET_CONNECT_TCP, port)
            _check(libc.syscall(LANDLOCK_SYSCALLS["add_rule"], ruleset, _LANDLOCK_RULE_NET_PORT,
                                ctypes.byref(rule), 0), f"landlock_add_rule port {port}")
        _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        _check(libc.syscall(LANDLOCK_SYSCALLS["restrict_self"], ruleset, 0), "landlock_restrict_self (network)")
    finally:
        os.close(ruleset)


def loopback_up() -> None:
    """Bring ``lo`` up (SIOCGIFFLAGS, then SIOCSIFFLAGS with IFF_UP)."""
    import _socket  # not socket: it would import enum and cost ~6 ms
    import fcntl
    import struct

    sock = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
    try:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock.fileno(), 0x8913, request))[1]
        fcntl.ioctl(sock.fileno(), 0x8914, struct.pack("16sH14x", b"lo", flags | 0x1))
    finally:
        sock.close()


def mount_tmpfs(path: str, keep: list[str], read_only: list[str]) -> None:
    """An empty tmpfs on ``path``; the directories of ``keep`` (the
    workspace) and ``read_only`` (read paths) under it bound back, the
    latter read-only."""

    libc = _libc()
    under = [(k, k in read_only) for k in [*keep, *read_only] if (k + "/").startswith(path.rstrip("/") + "/")]
    kept = [(k, ro, os.open(k, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)) for k, ro in under]
    cwd = os.getcwd()
    try:
        _check(libc.mount(b"tmpfs", path.encode(), b"tmpfs", 0x2 | 0x4, b"mode=1777"),  # nosuid, nodev
               f"mount tmpfs on {path}")
        for directory, ro, fd in kept:
            os.makedirs(directory, exist_ok=True)
            _check(libc.mount(f"/proc/self/fd/{fd}".encode(), directory.encode(), None, 0x1000 | 0x4000, None),
                   f"bind {directory}")  # MS_BIND | MS_REC
            if ro:  # MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV
                _check(libc.mount(None, directory.encode(), None, 0x20 | 0x1000 | 0x1 | 0x2 | 0x4, None),
                       f"make {directory} read-only")
        os.chdir(cwd)  # into the mount now at its path
    finally:
        for _, _, fd in kept:
            os.close(fd)


def drop_capabilities() -> None:
    """No capability left, none to regain across exec (what ``setpriv
    --inh-caps=-all --bounding-set=-all --securebits=+noroot,...`` does)."""
    import ctypes

    libc = _libc()
    if _no_capabilities():  # bubblewrap dropped them all already (it may not drop more)
        _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        return
    _check(libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear the ambient capabilities")
    for cap in range(64):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) < 0:
            errno = ctypes.get_errno()
            if errno == 22:  # EINVAL: past the last capability
                break
            if errno == 1 and os.geteuid() != 0:
                # EPERM: a non-root process without CAP_SETPCAP (``none``
                # mode of a non-root worker); it has nothing to regain:
                # no_new_privs below stops setuid and file capabilities.
                break
            _check(-1, f"drop capability {cap} from the bounding set")
    if os.geteuid() == 0:
        _check(libc.prctl(_PR_SET_SECUREBITS, _SECUREBITS_LOCKED, 0, 0, 0), "lock the securebits")
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(libc.capset(header, data), "capset")
    _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")


def _no_capabilities() -> bool:
    """This process holds no capability at all, in any set."""
    try:
        with open("/proc/self/status") as f:
            sets = {k: v.strip() for k, _, v in (line.partition(":") for line in f) if k.startswith("Cap")}
    except OSError:
        return False
    return bool(sets) and all(int(v, 16) == 0 for v in sets.values())


def confine(options: list[tuple[str, str]]) -> None:
    """Apply the options (see the module's docstring), in their order of kinds."""
    keep = [value for name, value in options if name == "--keep"]
    read_only = [value for name, value in options if name == "--keep-ro"]
    for name, value in options:
        if name == "--tmpfs":
            mount_tmpfs(value, keep, read_only)
    if any(name == "--loopback" for name, _ in options):
        loopback_up()
    if any(name == "--drop-caps" for name, _ in options):
        drop_capabilities()
    abi = next((int(value) for name, value in options if name == "--landlock"), 0)
    if abi:
        rules = [(name[2:], value) for name, value in options if name in ("--rw", "--rx", "--ro", "--dev")]
        restrict_filesystem(abi, rules)
    for name, value in options:
        if name == "--net-ports":
            restrict_network([int(p) for p in value.split(",") if p])


def parse(argv: list[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """Options and the program's argv."""
    if not argv or not argv[0].startswith("--"):
        return [], argv
    options = []
    i = 0
    while argv[i] != "--":
        name = argv[i]
        if name in ("--drop-caps", "--loopback"):
            options.append((name, ""))
            i += 1
        else:
            options.append((name, argv[i + 1]))
            i += 2
    return options, argv[i + 1:]


def _which(program: str) -> str:
    """``program``'s path on PATH (itself when not found: exec reports it)."""
    if "/" in program:
        return program
    for directory in os.environ.get("PATH", "/usr/bin:/bin").split(":"):
        candidate = os.path.join(directory or ".", program)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return program


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
    mode, status_fd = sys.argv[1], int(sys.argv[2])
    options, argv = parse(sys.argv[3:])
    os.set_inheritable(status_fd, False)
    if options:
        argv[0] = _which(argv[0])  # now: searching PATH imports a module the confinement hides
        try:
            confine(options)
        except (ConfineError, OSError) as exc:
            os.write(2, f"the sandbox could not confine the command: {exc}\n".encode())
            os._exit(125)
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
    # activities/shell_sandbox/sandbox.py), and must not find a command but no handler.
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
