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
    (daemons' path sockets) lie behind an empty tmpfs. The network is a
    namespace of its own with only its loopback (``AGENTLOOP_SHELL_NETWORK``
    below).
``bwrap``
    bubblewrap: the same namespaces, plus a filesystem of the workspace
    (read-write), the system directories read-only, a few files of ``/etc``,
    an empty ``/tmp`` and no home directory; no network (as ``namespace``).
``none``
    A plain child process with the allowlisted environment and no
    capability (dropped by its first process, also for a root worker). It
    sees every process; the worker's ``/proc/PID/environ`` and memory are
    closed (the worker is non-dumpable), other dumpable processes' too when
    Landlock confines it (its ptrace rule). Where the kernel has Landlock,
    the files are confined as in ``namespace`` (the private ``/tmp`` is a
    directory of its own per call, given as ``TMPDIR`` and ``HOME``); path
    sockets in ``/run`` stay reachable. Use it only with a tools-only worker
    (``agentloop worker --role tools``), which holds no provider keys.

``AGENTLOOP_SHELL_NETWORK``: ``off`` (the default: ``namespace`` and
``bwrap`` give a network namespace with only its own loopback, ``none`` no
TCP through Landlock's network rules, ABI 4+), ``web`` (the worker's
network, TCP connections to ports 80 and 443 only, through Landlock's
network rules; refused without them) or ``on`` (the worker's network, with
a warning: every local service, the Temporal server included, is
reachable).

When ``AGENTLOOP_SHELL_SANDBOX`` is unset and namespaces are not available
(e.g. a container whose seccomp profile forbids user namespaces), commands run
as in ``none`` and the worker logs a warning once; a mode set explicitly that
cannot work makes every command fail with the reason instead.

In every mode, when the command ends (or times out, or the call is
cancelled) everything it started is killed: in a namespace by the kernel
when the namespace's first process exits, in ``none`` by that process, a
child subreaper that every orphan of the command is re-parented to
(:mod:`agentloop.activities.shell_sandbox.sandbox_init`).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from agentloop.activities.shell_sandbox import sandbox_init
from agentloop.activities.shell_sandbox.command_lines import (
    BWRAP_SYSTEM_DIRS,
    Launcher,
    _bwrap_args,
    _find,
    _init_args,
    confine_options,
)
from agentloop.activities.shell_sandbox.settings import DEFAULT_PATH, WEB_PORTS, SandboxSettings, command_env
from agentloop.shared.base.errors import UserError

# The face of the shell sandbox: its settings (settings.py) and command lines
# (command_lines.py) are read through here too.
__all__ = [
    "DEFAULT_PATH", "Launcher", "SandboxSettings", "command_env", "command_line", "confined_env", "describe",
    "describe_files", "describe_network", "landlock_support", "network_confined", "private_tmp", "resolve_launcher",
]

log = logging.getLogger("agentloop.sandbox")


@functools.cache
def landlock_support() -> int | str:
    """The kernel's Landlock ABI version, or why there is none."""
    if not sys.platform.startswith("linux"):
        return f"Landlock is a Linux feature (this is {sys.platform})"
    abi = sandbox_init.landlock_abi()
    if abi <= 0:
        return ("the kernel has no Landlock (Linux 5.13+ with landlock in the lsm= boot parameter or "
                "CONFIG_LSM)")
    return abi


def _namespace_candidates(netns: bool = True) -> list[list[str]]:
    unshare, setpriv = _find("unshare"), _find("setpriv")
    if not unshare or not setpriv:
        return []
    base = ["--pid", "--fork", "--mount-proc", "--kill-child=SIGKILL", *(["--net"] if netns else [])]
    # unshare dies with the worker (and the namespace with unshare), so a
    # worker killed mid-command leaves nothing running.
    launch = [setpriv, "--pdeathsig", "KILL", "--", unshare]
    # The init keeps the namespace's capabilities (a non-root uid inside only
    # with --keep-caps) to mount the private /tmp, then drops every one of
    # them for good before the command (its --drop-caps, also for a uid 0
    # inside: the command can neither unmount the new /proc nor read kernel
    # memory).
    candidates = []
    if os.geteuid() == 0:
        candidates.append([*launch, "--user", "--map-current-user", *base, "--"])
        candidates.append([*launch, *base, "--"])
    else:
        candidates.append([*launch, "--user", "--map-current-user", "--keep-caps", *base, "--"])
        candidates.append([*launch, "--user", "--map-root-user", *base, "--"])
    return candidates


@functools.cache
def _namespace_launcher(netns: bool = True) -> Launcher | str:
    """The first namespace command line that works here (with a network
    namespace of its own when ``netns``), or why none does."""
    candidates = _namespace_candidates(netns)
    if not candidates:
        return "util-linux unshare and setpriv were not found"
    reasons = []
    for prefix in candidates:
        # Probed with what every call does without Landlock: the socket
        # directories hidden, the loopback up, the capabilities dropped.
        plain = Launcher("namespace", tuple(prefix), netns=netns)
        with tempfile.TemporaryDirectory(prefix="agentloop-probe-") as probe_dir:
            options = confine_options(plain, Path(probe_dir), network="off" if netns else "on")
            # _probe runs the command line before the loop moves on: the
            # defaults only pin this iteration's values for the linter.
            def line(fd: int, prefix: list[str] = prefix, options: list[str] = options) -> list[str]:
                return [*prefix, *_init_args("ns", fd, ["true"], options)]

            problem = _probe(line)
        if problem is None:
            launcher = Launcher("namespace", tuple(prefix), netns=netns)
            return _with_landlock(launcher)
        reasons.append(problem)
    return "unshare could not create the namespaces (" + "; ".join(dict.fromkeys(reasons)) + ")"


def _with_landlock(launcher: Launcher) -> Launcher:
    """``launcher`` with its files confined by Landlock when that works here
    (probed with the whole confinement), else with the reason why not."""
    support = landlock_support()
    if isinstance(support, str):
        return dataclasses.replace(launcher, unconfined=support)
    confined = dataclasses.replace(launcher, landlock=support, net_abi=support if support >= 4 else 0)
    with tempfile.TemporaryDirectory(prefix="agentloop-probe-") as probe_dir:
        ws = Path(probe_dir)
        problem = _probe(lambda fd: [*launcher.prefix, *_init_args(
            launcher.init_mode, fd, ["true"], confine_options(confined, ws, str(ws), network="web"))])
    if problem is None:
        return confined
    return dataclasses.replace(launcher, unconfined=f"Landlock ABI {support} could not confine the command ({problem})")


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


@functools.cache
def _bwrap_problem() -> str | None:
    bwrap = _find("bwrap")
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed: apt-get install bubblewrap"
    root = Path("/")
    problem = _probe(
        lambda fd: _bwrap_args(bwrap, workspace=root / "tmp", cwd=root / "tmp", network="off",
                               status_fd=fd, argv=["true"], options=["--drop-caps"])
    )
    return None if problem is None else f"bubblewrap could not create its sandbox ({problem})"


_warned: set[str] = set()


def resolve_launcher(settings: SandboxSettings) -> Launcher:
    """The launcher for the worker's settings.

    Raises:
        UserError: The mode was set explicitly and cannot work here, or
            ``AGENTLOOP_SHELL_NETWORK=web`` without Landlock's network rules.
    """
    launcher = _files_launcher(settings)
    if settings.network == "web" and not launcher.net_abi:
        support = landlock_support()
        has = f"Landlock ABI {support}" if isinstance(support, int) else f"no Landlock: {support}"
        raise UserError(
            "AGENTLOOP_SHELL_NETWORK=web needs Landlock's network rules (ABI 4, Linux 6.7+) to keep commands "
            f"to ports 80 and 443; this kernel has {has}. Use off (loopback only) or on (the worker's network)")
    if settings.network == "on":
        _warn_once("AGENTLOOP_SHELL_NETWORK=on: shell commands share this worker's network and can reach every "
                   "local service (the Temporal server, agentloop serve, a codec server): a command can start "
                   "other runs there. Use off (the default) or web unless every run is trusted")
    elif not network_confined(launcher, settings.network):
        _warn_once(f"shell commands share this worker's network: {launcher.mode} mode has no network namespace "
                   "and this kernel has no Landlock network rules (ABI 4, Linux 6.7+); they can reach every "
                   "local service (the Temporal server, agentloop serve)")
    return launcher


def network_confined(launcher: Launcher, network: str) -> bool:
    """Whether ``network`` (off or web) is in force with ``launcher``."""
    if network == "off" and (launcher.netns or launcher.mode == "bwrap"):
        return True
    return launcher.net_abi >= 4


def _files_launcher(settings: SandboxSettings) -> Launcher:
    if settings.mode == "none":
        return _none_launcher()
    if settings.mode == "bwrap":
        problem = _bwrap_problem()
        if problem is not None:
            raise UserError(f"AGENTLOOP_SHELL_SANDBOX=bwrap, but {problem}")
        support = landlock_support()
        return Launcher("bwrap", net_abi=support if isinstance(support, int) and support >= 4 else 0)
    launcher = _namespace_launcher(settings.network == "off")
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
        "process of this user that is not protected (this worker is non-dumpable)"
        + (" (Landlock keeps them from other processes' /proc entries)" if none.landlock else "")
        + ": keep provider keys out of this worker "
        "(agentloop worker --role tools) or allow user namespaces; set AGENTLOOP_SHELL_SANDBOX=none "
        "to silence this warning" + confined
    )
    _warn_once(note)
    return dataclasses.replace(none, note=note)


def _warn_once(note: str) -> None:
    if note not in _warned:
        _warned.add(note)
        log.warning(note)


@functools.cache
def _none_launcher() -> Launcher:
    return _with_landlock(Launcher("none", prefix=_reaper_prefix(), init_mode="reaper"))


def _reaper_prefix() -> tuple[str, ...]:
    """Without a namespace, the init gets SIGUSR1 (kill everything, exit)
    when the worker dies, so a worker killed mid-command leaves nothing."""
    setpriv = _find("setpriv")
    return (setpriv, "--pdeathsig", "USR1", "--") if setpriv else ()


def describe(settings: SandboxSettings | None = None) -> str:
    """One line for the worker's start: the mode in effect and what it
    confines: files, network, processes.

    Raises:
        UserError: The settings are invalid, or an explicit mode cannot work.
    """
    settings = settings or SandboxSettings.from_env()
    launcher = resolve_launcher(settings)
    net = describe_network(launcher, settings.network)
    if launcher.mode == "bwrap":
        return (f"shell sandbox: bwrap; files: workspace-only filesystem; network: {net}; processes: own PID "
                "namespace, no capabilities")
    files = describe_files(launcher)
    if launcher.mode == "namespace":
        return (f"shell sandbox: namespace; files: {files}; network: {net}; processes: own PID namespace and "
                "/proc, no capabilities, allowlisted environment")
    why = "fallback: namespaces unavailable" if launcher.note else "set by AGENTLOOP_SHELL_SANDBOX"
    return (f"shell sandbox: none ({why}); files: {files}; network: {net}; processes: the worker's "
            "(no capabilities; the worker is non-dumpable), allowlisted environment")


def describe_network(launcher: Launcher, network: str) -> str:
    """What confines a launcher's network, in a few words."""
    if network == "on":
        return "the worker's, every local service reachable (AGENTLOOP_SHELL_NETWORK=on)"
    if not network_confined(launcher, network):
        return "the worker's, NOT confined (no network namespace, no Landlock network rules)"
    if network == "web":
        return f"outbound TCP to ports {' and '.join(map(str, WEB_PORTS))} only (Landlock ABI {launcher.net_abi})"
    if launcher.mode == "none":
        return f"no TCP (Landlock ABI {launcher.net_abi}; UDP is not Landlock's to restrict)"
    return "none (a loopback of its own)"


def describe_files(launcher: Launcher) -> str:
    """What confines a launcher's files, in a few words."""
    if launcher.landlock:
        tmp = "a private /tmp" if launcher.mode == "namespace" else "a private TMPDIR"
        hidden = ", /run hidden" if launcher.mode == "namespace" else ""
        return (f"confined by Landlock ABI {launcher.landlock}: the workspace read-write, system "
                f"directories read-only, {tmp}{hidden}")
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
                           status_fd=status_fd, argv=argv, read_paths=settings.read_paths,
                           options=confine_options(launcher, workspace, network=settings.network))
    return [*launcher.prefix, *_init_args(launcher.init_mode, status_fd, argv, confine_options(
        launcher, workspace, tmp, settings.read_paths, settings.network))]


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
