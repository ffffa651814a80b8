"""Where ``shell_command`` runs its commands: a sandbox that cannot reach the
worker's secrets, and that dies with the call.

The worker's operator chooses the mode with ``AGENTLOOP_SHELL_SANDBOX``:

``namespace`` (the default)
    util-linux ``unshare``: new user, PID and mount namespaces with their own
    ``/proc``, every capability dropped (``setpriv``). The command sees only
    the processes it started, never the worker's, so ``/proc/$PPID/environ``
    and ``ps eww`` have nothing to show; its environment is the allowlist
    below. Files and network are those of the worker's user.
``bwrap``
    bubblewrap: the same namespaces, plus a filesystem of the workspace
    (read-write), the system directories read-only, a few files of ``/etc``,
    an empty ``/tmp`` and no home directory; no network unless
    ``AGENTLOOP_SHELL_NETWORK=on``.
``none``
    A plain child process with the allowlisted environment. It can read the
    environment of every process of the worker's user (the worker's own
    included); use it only with a tools-only worker (``agentloop worker
    --role tools``), which holds no provider keys.

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
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

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
        network: Commands may use the network. Only ``bwrap`` can take it
            away; ``namespace`` and ``none`` share the worker's network.
        extra_env: Names of further variables commands get
            (``AGENTLOOP_SHELL_ENV``, comma-separated).
    """

    mode: str = "namespace"
    explicit: bool = False
    network: bool = True
    extra_env: tuple[str, ...] = ()

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
        if net_raw in ("", "default"):
            network = mode != "bwrap"
        elif net_raw in ("on", "1", "true", "yes"):
            network = True
        elif net_raw in ("off", "0", "false", "no"):
            network = False
        else:
            raise UserError(f"AGENTLOOP_SHELL_NETWORK={net_raw!r}: use on or off")
        if not network and mode != "bwrap":
            raise UserError(
                f"AGENTLOOP_SHELL_NETWORK=off needs AGENTLOOP_SHELL_SANDBOX=bwrap; in mode {mode!r} "
                "commands share the worker's network"
            )
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
        return cls(mode=mode, explicit=bool(raw), network=network, extra_env=names)


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
    """

    mode: str
    prefix: tuple[str, ...] = ()
    init_mode: str = "ns"
    note: str = ""


def _init_args(init_mode: str, status_fd: int | str, argv: list[str]) -> list[str]:
    return [_python(), "-I", "-S", str(_INIT), init_mode, str(status_fd), *argv]


def _namespace_candidates() -> list[list[str]]:
    unshare, setpriv = _find("unshare"), _find("setpriv")
    if not unshare or not setpriv:
        return []
    base = ["--pid", "--fork", "--mount-proc", "--kill-child=SIGKILL"]
    # unshare dies with the worker (and the namespace with unshare), so a
    # worker killed mid-command leaves nothing running.
    unshare = [setpriv, "--pdeathsig", "KILL", "--", unshare]
    # Drop every capability and keep them dropped across exec, also for a
    # uid 0 inside (a root worker): the command can neither unmount the new
    # /proc nor read kernel memory.
    drop = [setpriv, "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all",
            "--securebits=+noroot,+noroot_locked,+no_setuid_fixup,+no_setuid_fixup_locked", "--"]
    # A non-root uid inside has no capabilities after exec anyway, and may not
    # change securebits.
    keep_uid = [setpriv, "--no-new-privs", "--"]
    candidates = []
    if os.geteuid() == 0:
        candidates.append([*unshare, "--user", "--map-current-user", *base, "--", *drop])
        candidates.append([*unshare, *base, "--", *drop])
    else:
        candidates.append([*unshare, "--user", "--map-current-user", *base, "--", *keep_uid])
        candidates.append([*unshare, "--user", "--map-root-user", *base, "--", *drop])
    return candidates


@functools.lru_cache(maxsize=None)
def _namespace_launcher() -> Launcher | str:
    """The first namespace command line that works here, or why none does."""
    candidates = _namespace_candidates()
    if not candidates:
        return "util-linux unshare and setpriv were not found"
    reasons = []
    for prefix in candidates:
        problem = _probe(lambda fd, prefix=prefix: [*prefix, *_init_args("ns", fd, ["true"])])
        if problem is None:
            return Launcher("namespace", tuple(prefix))
        reasons.append(problem)
    return "unshare could not create the namespaces (" + "; ".join(dict.fromkeys(reasons)) + ")"


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


def _bwrap_args(bwrap: str, *, workspace: Path, cwd: Path, network: bool, status_fd: int | str,
                argv: list[str]) -> list[str]:
    args = [bwrap, "--die-with-parent", "--unshare-user", "--unshare-pid", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try", "--cap-drop", "ALL"]
    if not network:
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
    args += ["--ro-bind", os.path.realpath(_INIT), BWRAP_INIT_PATH]
    args += ["--bind", str(workspace), str(workspace), "--chdir", str(cwd), "--"]
    return args + [python, "-I", "-S", BWRAP_INIT_PATH, "ns", str(status_fd), *argv]


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
        lambda fd: _bwrap_args(bwrap, workspace=root / "tmp", cwd=root / "tmp", network=False,
                               status_fd=fd, argv=["true"])
    )
    return None if problem is None else f"bubblewrap could not create its sandbox ({problem})"


_warned: set[str] = set()


def resolve_launcher(settings: SandboxSettings) -> Launcher:
    """The launcher for the worker's settings.

    Raises:
        UserError: The mode was set explicitly and cannot work here.
    """
    if settings.mode == "none":
        return Launcher("none", prefix=_reaper_prefix(), init_mode="reaper")
    if settings.mode == "bwrap":
        problem = _bwrap_problem()
        if problem is not None:
            raise UserError(f"AGENTLOOP_SHELL_SANDBOX=bwrap, but {problem}")
        return Launcher("bwrap")
    launcher = _namespace_launcher()
    if isinstance(launcher, Launcher):
        return launcher
    if settings.explicit:
        raise UserError(
            f"AGENTLOOP_SHELL_SANDBOX=namespace, but {launcher}; allow user namespaces "
            "(sysctl user.max_user_namespaces, or the container's seccomp profile), or run the shell "
            "in a tools-only worker (agentloop worker --role tools) with AGENTLOOP_SHELL_SANDBOX=none"
        )
    note = (
        f"shell commands run WITHOUT a sandbox: {launcher}. They can read the environment of every "
        "process of this user, this worker's included: keep provider keys out of this worker "
        "(agentloop worker --role tools) or allow user namespaces; set AGENTLOOP_SHELL_SANDBOX=none "
        "to silence this warning"
    )
    if note not in _warned:
        _warned.add(note)
        log.warning(note)
    return Launcher("none", prefix=_reaper_prefix(), init_mode="reaper", note=note)


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
    if launcher.mode == "bwrap":
        net = "with" if settings.network else "without"
        return f"shell sandbox: bwrap (workspace-only filesystem, {net} network)"
    if launcher.mode == "namespace":
        return "shell sandbox: namespace (own PID namespace and /proc, allowlisted environment)"
    if launcher.note:
        return "shell sandbox: none (fallback: namespaces unavailable)"
    return "shell sandbox: none (set by AGENTLOOP_SHELL_SANDBOX)"


def command_line(launcher: Launcher, settings: SandboxSettings, *, workspace: Path, cwd: Path,
                 status_fd: int, bash: str, command: str) -> list[str]:
    """The argv that runs ``bash -c command`` in the launcher's sandbox."""
    argv = [bash, "-c", command]
    if launcher.mode == "bwrap":
        bwrap = _find("bwrap")
        assert bwrap is not None  # probed
        return _bwrap_args(bwrap, workspace=workspace, cwd=cwd, network=settings.network,
                           status_fd=status_fd, argv=argv)
    return [*launcher.prefix, *_init_args(launcher.init_mode, status_fd, argv)]
