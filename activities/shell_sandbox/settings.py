"""The shell sandbox's settings, as the worker's operator gives them
(``AGENTLOOP_SHELL_SANDBOX``, ``AGENTLOOP_SHELL_NETWORK``, ...), and the environment a command gets:
an allowlist, never the provider keys.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from agentloop.activities.provider_keys import PROVIDER_KEY_VARIABLES
from agentloop.shared.base.encryption import KEY_FILE_ENV, KEYS_ENV
from agentloop.shared.base.errors import UserError

#: The modes ``AGENTLOOP_SHELL_SANDBOX`` takes.
SANDBOX_MODES = ("namespace", "bwrap", "none")


#: What ``AGENTLOOP_SHELL_NETWORK`` takes, and what each value means.
NETWORK_ALIASES = {"": "off", "default": "off", "off": "off", "0": "off", "false": "off", "no": "off",
                   "web": "web", "on": "on", "1": "on", "true": "on", "yes": "on"}


#: The TCP ports ``web`` lets commands connect to.
WEB_PORTS = (80, 443)


#: Environment variables a command gets from the worker (if set there).
#: Everything else is left out: an allowlist, so a secret under a name nobody
#: thought of (``DATABASE_URL``, ``SENTRY_DSN``) stays out too.
ENV_ALLOWLIST = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR")


#: Prefixes of allowlisted names (locale settings).
ENV_ALLOWLIST_PREFIXES = ("LC_",)


#: PATH when the worker has none.
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True)
class SandboxSettings:
    """The worker's shell sandbox settings, from its environment.

    Attributes:
        mode: ``namespace``, ``bwrap`` or ``none``.
        explicit: The mode was set (``AGENTLOOP_SHELL_SANDBOX``); a mode that
            cannot work is then an error, not a fallback.
        network: ``off`` (the default): a network namespace with its own
            loopback only (``namespace``, ``bwrap``), or no TCP at all by
            Landlock (``none``); ``web``: outbound TCP to ports 80 and 443
            only (Landlock's network rules, ABI 4+); ``on``: the worker's
            network, every local service included.
        extra_env: Names of further variables commands get
            (``AGENTLOOP_SHELL_ENV``, comma-separated).
        read_paths: Further directories commands may read and run programs
            from when their files are confined (``AGENTLOOP_SHELL_READ_PATHS``,
            separated by ``:``; e.g. a toolchain in ``/opt``).
    """

    mode: str = "namespace"
    explicit: bool = False
    network: str = "off"
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
        network = NETWORK_ALIASES.get(net_raw)
        if network is None:
            raise UserError(f"AGENTLOOP_SHELL_NETWORK={net_raw!r}: use off (the default: loopback only), "
                            "web (outbound TCP to ports 80 and 443) or on (the worker's network)")
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
        return cls(mode=mode, explicit=bool(raw), network=network, extra_env=names,
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
