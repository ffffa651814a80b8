"""The arguments that start a command in the shell sandbox: the launcher a mode
resolved to, the init script's arguments, Landlock rules, network and mount options,
and bubblewrap's command line. Pure: nothing here probes the machine.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from agentloop.activities.shell_sandbox.settings import WEB_PORTS

#: Directories where daemons keep their path sockets; the namespace mode
#: hides them behind an empty tmpfs of its own.
SOCKET_DIRS = ("/run", "/var/run")


#: Entries of /etc that bubblewrap mounts (read-only, when they exist): what
#: bash, the C library (users, DNS, locales, time zone), TLS clients, git and
#: Python need. The rest of /etc (service configuration, credentials some
#: deployments keep there) stays out.
BWRAP_ETC = (
    "alternatives", "bash.bashrc", "ca-certificates", "ca-certificates.conf", "crypto-policies",
    "debian_version", "gai.conf", "gitconfig", "group", "host.conf", "hostname", "hosts", "inputrc",
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "locale.alias", "locale.conf", "localtime",
    "lsb-release", "magic", "mime.types", "nsswitch.conf", "os-release", "passwd", "perl", "pki",
    "protocols", "resolv.conf", "services", "ssl", "timezone",
)


#: Top-level system directories bubblewrap mounts read-only (or recreates as
#: the symlinks they are on merged-/usr systems).
BWRAP_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


#: Device files a Landlock-confined command may read and write (when they exist).
LANDLOCK_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty",
                    "/dev/ptmx", "/dev/pts")


#: Where the namespace mode mounts a private tmpfs (when Landlock confines files).
PRIVATE_TMPFS = ("/tmp", "/dev/shm")


_INIT = Path(__file__).with_name("sandbox_init.py")


#: Where bubblewrap mounts the init script inside its sandbox.
BWRAP_INIT_PATH = "/run/agentloop/sandbox_init.py"


# Where to look for util-linux and bubblewrap besides PATH (a worker started
# with a narrow PATH still finds them).
_SYSTEM_BIN = ("/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/local/bin")


def _find(program: str) -> str | None:
    found = shutil.which(program)
    if found:
        return found
    for directory in _SYSTEM_BIN:
        candidate = Path(directory) / program
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def _python() -> str:
    """The interpreter that runs the init: this worker's own (its real path,
    so bubblewrap can mount its installation)."""
    return os.path.realpath(sys.executable)


@dataclass(frozen=True)
class Launcher:
    """How to start a command in one mode, once probed to work.

    Attributes:
        mode: The mode it implements (``none`` also for a fallback).
        prefix: Arguments before the init's (``setpriv --pdeathsig ...
            unshare ... setpriv ... --``); unused for bubblewrap, whose
            arguments depend on the call (see :func:`command_line`).
        init_mode: ``ns`` or ``reaper`` (see :mod:`agentloop.activities.shell_sandbox.sandbox_init`).
        note: Why this launcher (a fallback's reason), for the log.
        landlock: The Landlock ABI the files are confined with; 0: not
            confined by Landlock (bubblewrap confines them its own way).
        unconfined: Why Landlock does not confine the files (when it does not).
        net_abi: The kernel's Landlock ABI when it has network rules (4+), else 0.
        netns: Commands get a network namespace of their own (namespace mode).
    """

    mode: str
    prefix: tuple[str, ...] = ()
    init_mode: str = "ns"
    note: str = ""
    landlock: int = 0
    unconfined: str = ""
    net_abi: int = 0
    netns: bool = False


def _init_args(init_mode: str, status_fd: int | str, argv: list[str], options: list[str] | None = None) -> list[str]:
    return [_python(), "-I", "-S", str(_INIT), init_mode, str(status_fd), *(options or []), "--", *argv]


def landlock_rules(workspace: Path, tmp: list[str], read_paths: tuple[str, ...] = ()) -> list[str]:
    """The init's ``--rw``/``--rx``/``--ro``/``--dev`` options: the workspace
    and ``tmp`` read-write, the system directories (and ``read_paths``)
    read-only and executable, bubblewrap's files of ``/etc`` and ``/proc``
    read-only, a few devices."""
    options = ["--rw", str(workspace)]
    for path in tmp:
        options += ["--rw", path]
    for directory in (*BWRAP_SYSTEM_DIRS, *read_paths):
        options += ["--rx", directory]
    for name in BWRAP_ETC:
        options += ["--ro", f"/etc/{name}"]
    options += ["--ro", "/proc"]
    for device in LANDLOCK_DEVICES:
        options += ["--dev", device]
    return options


def socket_dirs() -> list[str]:
    """The directories of :data:`SOCKET_DIRS` there are here (not symlinks:
    ``/var/run`` is mostly one to ``/run``)."""
    return [path for path in SOCKET_DIRS if os.path.isdir(path) and not os.path.islink(path)]


def net_options(launcher: Launcher, network: str) -> list[str]:
    """The init's network options: ``--loopback`` in a network namespace of
    its own, Landlock's TCP rules for ``web`` (and for ``off`` without a
    namespace)."""
    if network == "on":
        return []
    if network == "off" and launcher.mode in ("namespace", "bwrap"):
        return ["--loopback"] if launcher.mode == "namespace" else []
    if launcher.net_abi >= 4:
        return ["--net-ports", ",".join(map(str, WEB_PORTS)) if network == "web" else ""]
    return []


def confine_options(launcher: Launcher, workspace: Path, tmp: str | None = None,
                    read_paths: tuple[str, ...] = (), network: str = "off") -> list[str]:
    """The init's options for one call of ``launcher``: in namespace mode
    the socket directories hidden, the loopback up and the capabilities
    dropped, and with Landlock a private tmpfs and the rules; in ``none``
    mode the capabilities dropped and with Landlock the rules with ``tmp``
    (the call's own temporary directory); in every mode the network's
    rules (:func:`net_options`)."""
    net = net_options(launcher, network)
    if launcher.mode == "namespace":
        hidden = socket_dirs()
        mounts = [path for path in PRIVATE_TMPFS if os.path.isdir(path)] if launcher.landlock else []
        options = ["--keep", str(workspace)]
        for path in read_paths:
            options += ["--keep-ro", path]
        for path in [*mounts, *hidden]:
            options += ["--tmpfs", path]
        options += ["--drop-caps", *net]
        if not launcher.landlock:
            return options
        return [*options, "--landlock", str(launcher.landlock), *landlock_rules(workspace, mounts, read_paths)]
    if launcher.mode == "none":
        options = ["--drop-caps", *net]
        if launcher.landlock:
            assert tmp is not None
            options += ["--landlock", str(launcher.landlock), *landlock_rules(workspace, [tmp], read_paths)]
        return options
    return ["--drop-caps", *net]  # bwrap


def _bwrap_args(bwrap: str, *, workspace: Path, cwd: Path, network: str, status_fd: int | str,
                argv: list[str], read_paths: tuple[str, ...] = (), options: list[str] | None = None) -> list[str]:
    args = [bwrap, "--die-with-parent", "--unshare-user", "--unshare-pid", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try", "--cap-drop", "ALL"]
    if network == "off":
        args.append("--unshare-net")
    for directory in BWRAP_SYSTEM_DIRS:
        path = Path(directory)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), directory]
        elif path.is_dir():
            args += ["--ro-bind", directory, directory]
    for name in BWRAP_ETC:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    # The init runs on the system's Python when there is one (already
    # mounted); otherwise this worker's installation is mounted read-only.
    python = _system_python()
    if python is None:
        python = _python()
        prefix = os.path.realpath(sys.base_prefix)
        args += ["--ro-bind", prefix, prefix]
    for read_path in read_paths:
        args += ["--ro-bind", read_path, read_path]
    args += ["--ro-bind", os.path.realpath(_INIT), BWRAP_INIT_PATH]
    args += ["--bind", str(workspace), str(workspace), "--chdir", str(cwd), "--"]
    return args + [python, "-I", "-S", BWRAP_INIT_PATH, "ns", str(status_fd), *(options or []), "--", *argv]


@functools.cache
def _system_python() -> str | None:
    """A Python 3 under /usr, which bubblewrap mounts anyway."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        real = os.path.realpath(candidate)
        if real.startswith("/usr/") and os.access(real, os.X_OK):
            return candidate
    return None
