"""Where ``shell_command`` runs its commands: a sandbox that cannot reach the
worker's secrets, and that dies with the call.

The worker's operator chooses the mode with ``AGENTLOOP_SHELL_SANDBOX``:

``namespace`` (the default)
    util-linux ``unshare``: new user, PID and mount namespaces with their own
    ``/proc``, every capability dropped (``setpriv``). The command sees only
    the processes it started, never the worker's, so ``/proc/$PPID/environ``
    and ``ps eww`` have nothing to show; its environment is the allowlist
    below. Where the kernel has Landlock (Linux 5.13+), the first process
    also confines the filesystem before ``bash -c``: the workspace
    read-write, the system directories read-only and executable, the files
    of ``/etc`` bubblewrap mounts read-only, a private ``/tmp`` (a tmpfs of
    the namespace, also ``HOME``) and nothing else. Without Landlock, files
    are those of the worker's user (logged once). ``/run`` and ``/var/run``
    (where daemons keep their sockets) are private, empty tmpfs mounts. The
    network is a namespace of its own with loopback only (see below).
``bwrap``
    bubblewrap: the same namespaces, plus a filesystem of the workspace
    (read-write), the system directories read-only, a few files of ``/etc``,
    an empty ``/tmp`` and no home directory; the network as below.
``none``
    A plain child process with the allowlisted environment. It can read the
    environment of every process of the worker's user (the worker's own
    included) unless Landlock confines it: where the kernel has Landlock,
    the files are confined as in ``namespace`` (the private ``/tmp`` is a
    directory of its own per call, given as ``TMPDIR`` and ``HOME``). Its
    capabilities are dropped (a root worker's command is uid 0 with no
    power), and the worker is not dumpable, so its ``/proc`` entries
    (``environ``, ``mem``) are closed to its commands. Path sockets outside
    the workspace stay reachable. Use it only with a tools-only worker
    (``agentloop worker --role tools``), which holds no provider keys.

``AGENTLOOP_SHELL_NETWORK`` says what network commands get:

``off`` (the default)
    None: in ``namespace`` and ``bwrap`` a network namespace of their own
    with loopback only, so the worker's loopback services (the Temporal
    server, ``agentloop serve``, a codec server) are out of reach; in
    ``none``, Landlock (ABI 4+) refuses every TCP connection.
``web``
    Outbound TCP to ports 80 and 443 only, through Landlock's network rules
    (ABI 4+, Linux 6.7): the worker's network otherwise, DNS included.
``on``
    The worker's network, as it is: commands can reach every service the
    worker can, its Temporal server included. The worker warns at start.

When ``AGENTLOOP_SHELL_SANDBOX`` is unset and namespaces are not available
(e.g. a container whose seccomp profile forbids user namespaces), commands run
as in ``none`` and the worker logs a warning once; a mode set explicitly that
cannot work makes every command fail with the reason instead.

In every mode, when the command ends (or times out, or the call is
cancelled) everything it started is killed: in a namespace by the kernel
when the namespace's first process exits, in ``none`` by that process, a
child subreaper that every orphan of the command is re-parented to
(:mod:`agentloop.activities.sandbox_init`).
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import tempfile
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agentloop.activities import sandbox_init
from agentloop.activities.models import PROVIDER_KEY_VARIABLES
from agentloop.shared.errors import UserError
from agentloop.shared.encryption import KEY_FILE_ENV, KEYS_ENV

log = logging.getLogger("agentloop.sandbox")

#: The modes ``AGENTLOOP_SHELL_SANDBOX`` takes.
SANDBOX_MODES = ("namespace", "bwrap", "none")

#: Environment variables a command gets from the worker (if set there).
#: Everything else is left out: an allowlist, so a secret under a name nobody
#: thought of (``DATABASE_URL``, ``SENTRY_DSN``) stays out too.
ENV_ALLOWLIST = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR")
#: Prefixes of allowlisted names (locale settings).
ENV_ALLOWLIST_PREFIXES = ("LC_",)
#: PATH when the worker has none.
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"

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
#: Where daemons keep their path sockets: a private, empty tmpfs in namespace mode.
SOCKET_DIRS = ("/run", "/var/run")
#: What ``AGENTLOOP_SHELL_NETWORK`` takes.
NETWORK_MODES = ("off", "web", "on")
#: The ports ``web`` may connect to.
WEB_PORTS = (80, 443)
#: The Landlock ABI that brought network rules.
LANDLOCK_NET_ABI = 4

_INIT = Path(__file__).with_name("sandbox_init.py")
#: Where bubblewrap mounts the init script inside its sandbox.
BWRAP_INIT_PATH = "/run/agentloop/sandbox_init.py"
# Where to look for util-linux and bubblewrap besides PATH (a worker started
# with a narrow PATH still finds them).
_SYSTEM_BIN = ("/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/local/bin")


@dataclass(frozen=True)
class SandboxSettings:
    """The worker's shell sandbox settings, from its environment.

    Attributes:
        mode: ``namespace``, ``bwrap`` or ``none``.
        explicit: The mode was set (``AGENTLOOP_SHELL_SANDBOX``); a mode that
            cannot work is then an error, not a fallback.
        network: ``off``, ``web`` or ``on`` (``AGENTLOOP_SHELL_NETWORK``).
        network_explicit: The network was set; one that cannot be had is then
            an error, not a warning.
        extra_env: Names of further variables commands get
            (``AGENTLOOP_SHELL_ENV``, comma-separated).
        read_paths: Further directories commands may read and run programs
            from when their files are confined (``AGENTLOOP_SHELL_READ_PATHS``,
            separated by ``:``; e.g. a toolchain in ``/opt``).
    """

    mode: str = "namespace"
    explicit: bool = False
    network: str = "off"
    network_explicit: bool = False
    extra_env: tuple[str, ...] = ()
    read_paths: tuple[str, ...] = ()

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> SandboxSettings:
        """Read ``AGENTLOOP_SHELL_SANDBOX``, ``AGENTLOOP_SHELL_NETWORK`` and
        ``AGENTLOOP_SHELL_ENV``.

        Raises:
            UserError: A value is not one of the documented ones.
        """
        env = os.environ if environ is None else environ
        raw = env.get("AGENTLOOP_SHELL_SANDBOX", "").strip().lower()
        if raw and raw not in SANDBOX_MODES:
            raise UserError(
                f"AGENTLOOP_SHELL_SANDBOX={raw!r} is not a sandbox mode; use one of "
                f"{', '.join(SANDBOX_MODES)} (unset: namespace, falling back to none with a warning)"
            )
        mode = raw or "namespace"
        net_raw = env.get("AGENTLOOP_SHELL_NETWORK", "").strip().lower()
        aliases = {"": "off", "default": "off", "0": "off", "false": "off", "no": "off",
                   "1": "on", "true": "on", "yes": "on"}
        network = aliases.get(net_raw, net_raw)
        if network not in NETWORK_MODES:
            raise UserError(f"AGENTLOOP_SHELL_NETWORK={net_raw!r}: use off (no network, the default), web "
                            "(TCP to ports 80 and 443 only) or on (the worker's whole network)")
        names = tuple(n.strip() for n in env.get("AGENTLOOP_SHELL_ENV", "").split(",") if n.strip())
        refused = [n for n in names if n.upper() in PROVIDER_KEY_VARIABLES]
        if refused:
            raise UserError(
                f"AGENTLOOP_SHELL_ENV names provider keys ({', '.join(refused)}); commands never get "
                "those: remove them from AGENTLOOP_SHELL_ENV"
            )
        sealing = [n for n in names if n.upper() in (KEYS_ENV, KEY_FILE_ENV)]
        if sealing:
            raise UserError(
                f"AGENTLOOP_SHELL_ENV names the payload encryption keys ({', '.join(sealing)}); commands never "
                "get those: remove them from AGENTLOOP_SHELL_ENV"
            )
        return cls(mode=mode, explicit=bool(raw), network=network, network_explicit=net_raw not in ("", "default"),
                   extra_env=names,
                   read_paths=read_paths_from(env.get("AGENTLOOP_SHELL_READ_PATHS", "")))


def read_paths_from(text: str) -> tuple[str, ...]:
    """The directories of ``AGENTLOOP_SHELL_READ_PATHS`` (``:``-separated).

    Raises:
        UserError: An entry is not an absolute path to a directory.
    """
    paths = []
    for entry in (e.strip() for e in text.split(":")):
        if not entry:
            continue
        if not os.path.isabs(entry) or not os.path.isdir(entry):
            raise UserError(f"AGENTLOOP_SHELL_READ_PATHS: {entry!r} is not an absolute path to a directory; "
                            "list directories commands may read and run programs from, separated by ':'")
        paths.append(os.path.realpath(entry))
    return tuple(dict.fromkeys(paths))


def command_env(settings: SandboxSettings, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a command gets: the allowlist, plus the operator's
    ``AGENTLOOP_SHELL_ENV`` names, taken from the worker's environment."""
    source = os.environ if environ is None else environ
    env = {
        name: value
        for name, value in source.items()
        if name in ENV_ALLOWLIST or name.startswith(ENV_ALLOWLIST_PREFIXES) or name in settings.extra_env
    }
    env.setdefault("PATH", DEFAULT_PATH)
    if settings.mode == "bwrap":
        # No home and only an empty /tmp inside.
        env["HOME"] = "/tmp"
        env["TMPDIR"] = "/tmp"
    return env


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
        init_mode: ``ns`` or ``reaper`` (see :mod:`agentloop.activities.sandbox_init`).
        note: Why this launcher (a fallback's reason), for the log.
        landlock: The Landlock ABI the files are confined with; 0: not
            confined by Landlock (bubblewrap confines them its own way).
        unconfined: Why Landlock does not confine the files (when it does not).
    """

    mode: str
    prefix: tuple[str, ...] = ()
    init_mode: str = "ns"
    note: str = ""
    landlock: int = 0
    unconfined: str = ""


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


def net_options(network: str) -> list[str]:
    """The init's Landlock network rule: none for ``on`` (and for ``off`` in
    a network namespace, which the caller leaves out), the web ports for ``web``."""
    if network == "web":
        return ["--net-ports", ",".join(str(p) for p in WEB_PORTS)]
    if network == "off":
        return ["--net-ports", ""]
    return []


def _socket_dirs() -> list[str]:
    return [path for path in SOCKET_DIRS if os.path.isdir(path) and not os.path.islink(path)]


def _resolver_dirs() -> list[str]:
    """Directories under the socket directories that DNS needs (``/etc/resolv.conf``
    pointing into ``/run``), bound back read-only under the private tmpfs."""
    target = os.path.dirname(os.path.realpath("/etc/resolv.conf"))
    return [target] if any(_is_within(target, d) for d in _socket_dirs()) and os.path.isdir(target) else []


def confine_options(launcher: Launcher, workspace: Path, tmp: str | None = None,
                    read_paths: tuple[str, ...] = (), network: str = "on") -> list[str]:
    """The init's options for one call of ``launcher``: in namespace mode
    private tmpfs mounts over the socket directories (and, with Landlock,
    over ``/tmp``) and loopback up in the call's own network namespace; in
    every mode the capabilities dropped; with Landlock the rules, with
    ``tmp`` (the call's own temporary directory) in ``none`` mode, and the
    network rule of ``network`` where no namespace takes the network away."""
    if launcher.mode == "namespace":
        mounts = [path for path in PRIVATE_TMPFS if os.path.isdir(path)] if launcher.landlock else []
        options = ["--keep", str(workspace)]
        for path in (*read_paths, *(_resolver_dirs() if network != "off" else [])):
            options += ["--keep-ro", path]
        for path in [*mounts, *_socket_dirs()]:
            options += ["--tmpfs", path]
        if network == "off":
            options.append("--lo-up")
        options.append("--drop-caps")
        if network == "web":
            options += net_options(network)
        if not launcher.landlock:
            return options
        return [*options, "--landlock", str(launcher.landlock),
                *landlock_rules(workspace, [*mounts, *_socket_dirs()], read_paths)]
    if launcher.mode == "none":
        options = ["--drop-caps"]
        if launcher.landlock >= LANDLOCK_NET_ABI:
            options += net_options(network)
        if launcher.landlock:
            assert tmp is not None
            options += ["--landlock", str(launcher.landlock), *landlock_rules(workspace, [tmp], read_paths)]
        return options
    return []


def with_network_namespace(prefix: tuple[str, ...]) -> tuple[str, ...]:
    """A namespace launcher's prefix with ``--net`` added to ``unshare``'s arguments."""
    at = next(i for i, arg in enumerate(prefix) if os.path.basename(arg) == "unshare") + 1
    return (*prefix[:at], "--net", *prefix[at:])


@functools.lru_cache(maxsize=None)
def landlock_support() -> int | str:
    """The kernel's Landlock ABI version, or why there is none."""
    if not sys.platform.startswith("linux"):
        return f"Landlock is a Linux feature (this is {sys.platform})"
    abi = sandbox_init.landlock_abi()
    if abi <= 0:
        return ("the kernel has no Landlock (Linux 5.13+ with landlock in the lsm= boot parameter or "
                "CONFIG_LSM)")
    return abi


def _namespace_candidates() -> list[list[str]]:
    unshare, setpriv = _find("unshare"), _find("setpriv")
    if not unshare or not setpriv:
        return []
    base = ["--pid", "--fork", "--mount-proc", "--kill-child=SIGKILL"]
    # unshare dies with the worker (and the namespace with unshare), so a
    # worker killed mid-command leaves nothing running.
    unshare = [setpriv, "--pdeathsig", "KILL", "--", unshare]
    # The init keeps the namespace's capabilities (a non-root uid inside only
    # with --keep-caps) to mount the private /tmp, then drops every one of
    # them for good before the command (its --drop-caps, also for a uid 0
    # inside: the command can neither unmount the new /proc nor read kernel
    # memory).
    candidates = []
    if os.geteuid() == 0:
        candidates.append([*unshare, "--user", "--map-current-user", *base, "--"])
        candidates.append([*unshare, *base, "--"])
    else:
        candidates.append([*unshare, "--user", "--map-current-user", "--keep-caps", *base, "--"])
        candidates.append([*unshare, "--user", "--map-root-user", *base, "--"])
    return candidates


@functools.lru_cache(maxsize=None)
def _namespace_launcher() -> Launcher | str:
    """The first namespace command line that works here, or why none does."""
    candidates = _namespace_candidates()
    if not candidates:
        return "util-linux unshare and setpriv were not found"
    reasons = []
    for prefix in candidates:
        problem = _probe(lambda fd, prefix=prefix: [*prefix, *_init_args("ns", fd, ["true"], ["--drop-caps"])])
        if problem is None:
            launcher = Launcher("namespace", tuple(prefix))
            return _with_landlock(launcher)
        reasons.append(problem)
    return "unshare could not create the namespaces (" + "; ".join(dict.fromkeys(reasons)) + ")"


def _with_landlock(launcher: Launcher) -> Launcher:
    """``launcher`` with its files confined by Landlock when that works here
    (probed with the whole confinement), else with the reason why not."""
    support = landlock_support()
    if isinstance(support, str):
        return Launcher(launcher.mode, launcher.prefix, launcher.init_mode, launcher.note, unconfined=support)
    confined = Launcher(launcher.mode, launcher.prefix, launcher.init_mode, launcher.note, landlock=support)
    with tempfile.TemporaryDirectory(prefix="agentloop-probe-") as probe_dir:
        ws = Path(probe_dir)
        problem = _probe(lambda fd: [*launcher.prefix, *_init_args(
            launcher.init_mode, fd, ["true"], confine_options(confined, ws, str(ws)))])
    if problem is None:
        return confined
    return Launcher(launcher.mode, launcher.prefix, launcher.init_mode, launcher.note,
                    unconfined=f"Landlock ABI {support} could not confine the command ({problem})")


def _probe(build: Callable[[int], list[str]]) -> str | None:
    """Run ``true`` through a sandbox command line (``build(status_fd)``);
    None when it worked, else what went wrong."""
    read_fd, write_fd = os.pipe()
    try:
        proc = subprocess.run(
            build(write_fd), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            env={"PATH": os.environ.get("PATH") or DEFAULT_PATH}, pass_fds=(write_fd,), timeout=30, cwd="/",
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        os.close(write_fd)
        os.close(read_fd)
        return str(exc)
    os.close(write_fd)
    try:
        status = os.read(read_fd, 64).decode()
    finally:
        os.close(read_fd)
    if proc.returncode == 0 and status == "0":
        return None
    output = proc.stdout.decode(errors="replace").strip().splitlines()
    return f"exit code {proc.returncode}" + (f": {output[-1]}" if output else "")


def _bwrap_args(bwrap: str, *, workspace: Path, cwd: Path, network: str, status_fd: int | str,
                argv: list[str], read_paths: tuple[str, ...] = ()) -> list[str]:
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
    for path in read_paths:
        args += ["--ro-bind", path, path]
    args += ["--ro-bind", os.path.realpath(_INIT), BWRAP_INIT_PATH]
    args += ["--bind", str(workspace), str(workspace), "--chdir", str(cwd), "--"]
    options = net_options(network) if network == "web" else []
    return args + [python, "-I", "-S", BWRAP_INIT_PATH, "ns", str(status_fd), *options, *(["--"] if options else []),
                   *argv]


@functools.lru_cache(maxsize=None)
def _system_python() -> str | None:
    """A Python 3 under /usr, which bubblewrap mounts anyway."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        real = os.path.realpath(candidate)
        if real.startswith("/usr/") and os.access(real, os.X_OK):
            return candidate
    return None


@functools.lru_cache(maxsize=None)
def _bwrap_problem() -> str | None:
    bwrap = _find("bwrap")
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed: apt-get install bubblewrap"
    root = Path("/")
    problem = _probe(
        lambda fd: _bwrap_args(bwrap, workspace=root / "tmp", cwd=root / "tmp", network="off",
                               status_fd=fd, argv=["true"])
    )
    return None if problem is None else f"bubblewrap could not create its sandbox ({problem})"


_warned: set[str] = set()


def resolve_launcher(settings: SandboxSettings) -> Launcher:
    """The launcher for the worker's settings, its network checked.

    Raises:
        UserError: The mode or the network was set explicitly and cannot
            work here, or ``web`` asks for Landlock's network rules the kernel lacks.
    """
    launcher = _launcher(settings)
    problem = network_problem(launcher, settings)
    if problem and (settings.network_explicit or settings.network == "web" or launcher.mode != "none"):
        raise UserError(f"AGENTLOOP_SHELL_NETWORK={settings.network}, but {problem}")
    if problem:
        _warn_once(f"shell commands keep the worker's network: {problem}; set AGENTLOOP_SHELL_NETWORK=on to "
                   "silence this warning")
    if settings.network == "on":
        _warn_once("AGENTLOOP_SHELL_NETWORK=on: shell commands can reach every service this worker can, its "
                   "Temporal server, agentloop serve and codec servers on loopback included")
    return launcher


def network_problem(launcher: Launcher, settings: SandboxSettings) -> str | None:
    """Why ``settings.network`` cannot be had with ``launcher``, or None."""
    if settings.network == "on":
        return None
    needs_landlock = settings.network == "web" or launcher.mode == "none"
    if needs_landlock and launcher.mode != "bwrap" and launcher.landlock < LANDLOCK_NET_ABI:
        return (f"Landlock's network rules need ABI {LANDLOCK_NET_ABI} (Linux 6.7+); "
                + (f"this kernel has ABI {launcher.landlock}" if launcher.landlock else
                   f"files are not confined by Landlock ({launcher.unconfined})"))
    if settings.network == "web" and launcher.mode == "bwrap":
        abi = landlock_support()
        if isinstance(abi, str) or abi < LANDLOCK_NET_ABI:
            return f"Landlock's network rules need ABI {LANDLOCK_NET_ABI} (Linux 6.7+): {abi}"
    if settings.network == "off" and launcher.mode == "namespace":
        return _netns_problem(launcher.prefix)
    return None


@functools.lru_cache(maxsize=None)
def _netns_problem(prefix: tuple[str, ...]) -> str | None:
    problem = _probe(lambda fd: [*with_network_namespace(prefix),
                                 *_init_args("ns", fd, ["true"], ["--lo-up", "--drop-caps"])])
    return None if problem is None else f"unshare could not create a network namespace ({problem})"


def _launcher(settings: SandboxSettings) -> Launcher:
    if settings.mode == "none":
        return _none_launcher()
    if settings.mode == "bwrap":
        problem = _bwrap_problem()
        if problem is not None:
            raise UserError(f"AGENTLOOP_SHELL_SANDBOX=bwrap, but {problem}")
        return Launcher("bwrap")
    launcher = _namespace_launcher()
    if isinstance(launcher, Launcher):
        if launcher.unconfined:
            _warn_once(f"shell commands run in a namespace, but their files are NOT confined: "
                       f"{launcher.unconfined}. They can read and write whatever this worker's user can; "
                       "use AGENTLOOP_SHELL_SANDBOX=bwrap to confine them")
        return launcher
    if settings.explicit:
        raise UserError(
            f"AGENTLOOP_SHELL_SANDBOX=namespace, but {launcher}; allow user namespaces "
            "(sysctl user.max_user_namespaces, or the container's seccomp profile), or run the shell "
            "in a tools-only worker (agentloop worker --role tools) with AGENTLOOP_SHELL_SANDBOX=none"
        )
    none = _none_launcher()
    confined = ("; Landlock still confines their files" if none.landlock else
                f"; their files are not confined either ({none.unconfined})")
    note = (
        f"shell commands run WITHOUT a sandbox: {launcher}. They can read the environment of every "
        "process of this user, this worker's included"
        + (" (Landlock keeps them from other processes' /proc entries)" if none.landlock else "")
        + ": keep provider keys out of this worker "
        "(agentloop worker --role tools) or allow user namespaces; set AGENTLOOP_SHELL_SANDBOX=none "
        "to silence this warning" + confined
    )
    _warn_once(note)
    return Launcher("none", none.prefix, "reaper", note=note, landlock=none.landlock, unconfined=none.unconfined)


def _warn_once(note: str) -> None:
    if note not in _warned:
        _warned.add(note)
        log.warning(note)


@functools.lru_cache(maxsize=None)
def _none_launcher() -> Launcher:
    return _with_landlock(Launcher("none", prefix=_reaper_prefix(), init_mode="reaper"))


def _reaper_prefix() -> tuple[str, ...]:
    """Without a namespace, the init gets SIGUSR1 (kill everything, exit)
    when the worker dies, so a worker killed mid-command leaves nothing."""
    setpriv = _find("setpriv")
    return (setpriv, "--pdeathsig", "USR1", "--") if setpriv else ()


def describe(settings: SandboxSettings | None = None) -> str:
    """One line for the worker's log: the mode in effect and what it means.

    Raises:
        UserError: The settings are invalid, or an explicit mode cannot work.
    """
    settings = settings or SandboxSettings.from_env()
    launcher = resolve_launcher(settings)
    net = describe_network(launcher, settings)
    if launcher.mode == "bwrap":
        return (f"shell sandbox: bwrap (files: the workspace only; network: {net}; processes: own PID "
                "namespace, no capabilities)")
    files = describe_files(launcher)
    if launcher.mode == "namespace":
        return (f"shell sandbox: namespace (files: {files}; network: {net}; processes: own PID namespace and "
                "/proc, no capabilities, allowlisted environment)")
    why = "fallback: namespaces unavailable" if launcher.note else "set by AGENTLOOP_SHELL_SANDBOX"
    return (f"shell sandbox: none ({why}; files: {files}; network: {net}; processes: the worker's user, no "
            "capabilities, the worker not dumpable)")


def describe_network(launcher: Launcher, settings: SandboxSettings) -> str:
    """What network a launcher's commands get, in a few words."""
    if settings.network == "on":
        return "the worker's (AGENTLOOP_SHELL_NETWORK=on)"
    if network_problem(launcher, settings):
        return "the worker's (Landlock cannot restrict it here)"
    if settings.network == "web":
        return "TCP to ports 80 and 443 only"
    if launcher.mode == "none":
        return "no TCP connections (Landlock)"
    return "none, loopback only"


def describe_files(launcher: Launcher) -> str:
    """What confines a launcher's files, in a few words."""
    if launcher.landlock:
        tmp = "a private /tmp" if launcher.mode == "namespace" else "a private TMPDIR"
        return (f"Landlock ABI {launcher.landlock}, the workspace read-write, system directories read-only, "
                f"{tmp}")
    return f"NOT confined: {launcher.unconfined}"


def command_line(launcher: Launcher, settings: SandboxSettings, *, workspace: Path, cwd: Path,
                 status_fd: int, bash: str, command: str, tmp: str | None = None) -> list[str]:
    """The argv that runs ``bash -c command`` in the launcher's sandbox
    (``tmp``: the call's private temporary directory, ``none`` mode with
    Landlock)."""
    argv = [bash, "-c", command]
    if launcher.mode == "bwrap":
        bwrap = _find("bwrap")
        assert bwrap is not None  # probed
        return _bwrap_args(bwrap, workspace=workspace, cwd=cwd, network=settings.network,
                           status_fd=status_fd, argv=argv, read_paths=settings.read_paths)
    prefix = launcher.prefix
    if launcher.mode == "namespace" and settings.network == "off":
        prefix = with_network_namespace(prefix)
    return [*prefix, *_init_args(launcher.init_mode, status_fd, argv,
                                 confine_options(launcher, workspace, tmp, settings.read_paths, settings.network))]


def private_tmp(launcher: Launcher) -> str | None:
    """A new temporary directory for one call when its files are confined
    without a namespace (``none`` mode with Landlock): the only place
    besides the workspace it may write. The caller removes it."""
    if launcher.mode == "none" and launcher.landlock:
        return tempfile.mkdtemp(prefix="agentloop-shell-")
    return None


def confined_env(launcher: Launcher, env: dict[str, str], tmp: str | None, workspace: Path,
                 read_paths: tuple[str, ...] = ()) -> dict[str, str]:
    """``env`` fit for Landlock's confinement, when it confines the files:
    ``HOME`` and ``TMPDIR`` in the private /tmp (the worker's home is out of
    reach), and only the ``PATH`` entries the command may execute from (the
    system directories and the workspace: bash would stop at a program it
    finds but may not run)."""
    if not launcher.landlock:
        return env
    place = tmp if launcher.mode == "none" and tmp else "/tmp"
    allowed = [os.path.realpath(d) for d in (*BWRAP_SYSTEM_DIRS, *read_paths)] + [os.path.realpath(workspace)]
    entries = [entry for entry in env.get("PATH", DEFAULT_PATH).split(":")
               if entry and any(_is_within(os.path.realpath(entry), root) for root in allowed)]
    return {**env, "HOME": place, "TMPDIR": place, "PATH": ":".join(dict.fromkeys(entries)) or DEFAULT_PATH}


def _is_within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")
