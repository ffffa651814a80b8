"""``agentloop serve`` beside ``agentloop dev``, paired with no setting
(docs/live-deltas.md).

serve, finding a running dev, makes a random live secret in memory at its
start and writes ``{"url", "token", "pid"}`` to ``live.json`` in dev's data
directory (``$AGENTLOOP_HOME``), readable by the user only (0600), and
removes it when it stops. dev's worker, with no ``AGENTLOOP_LIVE_URL`` set,
reads that file (a ``stat`` at most once a second) and posts its live deltas
there with the secret.

A file is trusted only when it is the user's own (owner and mode: no one
else may read or write it) and its serve is alive (``kill(pid, 0)``): a file
left by a serve that crashed is ignored. Before the first delta goes to a
paired gateway, the worker asks it to prove it holds the secret
(:func:`hello_proof` of a fresh nonce, on ``POST /internal/live/hello``),
without sending the secret: a process of another user that took the dead
serve's port gets neither deltas nor secret.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agentloop.shared.live.sinks import registered

#: The pairing file, in dev's data directory.
LIVE_FILE: Final = "live.json"
#: How often a worker looks at the pairing file, at most.
LOOK_SECONDS: Final = 1.0
#: Where a paired worker asks the gateway to prove it holds the secret.
HELLO_SUFFIX: Final = "/hello"


@dataclass(frozen=True)
class Paired:
    """A gateway of this machine to post live deltas to."""

    url: str
    token: str


@dataclass(frozen=True)
class Unpaired:
    """No gateway, and why (for a log line)."""

    reason: str


def hello_proof(token: str, nonce: str) -> str:
    """What a gateway holding ``token`` answers to ``nonce``."""
    return hmac.new(token.encode(), b"agentloop-live-hello:" + nonce.encode(), hashlib.sha256).hexdigest()


def write_pairing(path: Path, url: str, token: str) -> None:
    """Write the pairing file (0600, atomically), for this process."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(json.dumps({"url": url, "token": token, "pid": os.getpid()}) + "\n")
    os.replace(tmp, path)


def remove_pairing(path: Path, token: str) -> None:
    """Remove the pairing file if it is still this serve's (another serve may have replaced it)."""
    found = read_pairing(path, check_pid=False)
    if isinstance(found, Paired) and hmac.compare_digest(found.token, token):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def read_pairing(path: Path, check_pid: bool = True) -> Paired | Unpaired:
    """The gateway the pairing file names, if it is to be trusted."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return Unpaired("no agentloop serve beside this dev")
    except OSError as err:
        return Unpaired(f"{path} cannot be read ({err.strerror})")
    with os.fdopen(fd) as handle:
        info = os.fstat(handle.fileno())
        if info.st_uid != os.getuid() or info.st_mode & 0o077:
            return Unpaired(f"{path} is not this user's alone (owner {info.st_uid}, mode "
                            f"{info.st_mode & 0o777:o}): ignored")
        try:
            data = json.loads(handle.read(4096))
            url, token, pid = str(data["url"]), str(data["token"]), int(data["pid"])
        except (ValueError, KeyError, TypeError):
            return Unpaired(f"{path} is not a pairing file: ignored")
    if check_pid and not _alive(pid):
        return Unpaired(f"the agentloop serve that wrote {path} (pid {pid}) has ended: ignored")
    if not url.startswith(("http://", "https://")) or not token:
        return Unpaired(f"{path} names no gateway: ignored")
    return Paired(url, token)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs and is ours to signal (another user's is not ours)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError, OverflowError, ValueError):
        return False
    return True


class PairingWatch:
    """The pairing file of ``path``, read again only when it changed, and
    looked at (one ``stat``) at most every :data:`LOOK_SECONDS`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._looked = -LOOK_SECONDS
        self._seen: tuple[int, int, int] | None = None
        self._found: Paired | Unpaired = Unpaired("not looked yet")

    def current(self) -> Paired | Unpaired:
        now = time.monotonic()
        if now - self._looked < LOOK_SECONDS:
            return self._found
        self._looked = now
        try:
            info = self.path.stat()
        except OSError:
            self._seen, self._found = None, Unpaired("no agentloop serve beside this dev")
            return self._found
        seen = (info.st_ino, info.st_mtime_ns, info.st_size)
        if seen != self._seen or isinstance(self._found, Paired):
            # Read again when changed; a paired serve's pid is checked at each look.
            self._seen, self._found = seen, read_pairing(self.path)
        return self._found


_watches: list[PairingWatch] = []


def pair_through(path: Path) -> contextlib.AbstractContextManager[PairingWatch]:
    """For the block, this process's workers look at ``path`` for a gateway
    to post live deltas to (``agentloop dev``)."""
    return registered(_watches, PairingWatch(path))


def paired_gateway() -> Paired | None:
    """The gateway this process is paired with now, if any."""
    if not _watches:
        return None
    found = _watches[-1].current()
    return found if isinstance(found, Paired) else None
