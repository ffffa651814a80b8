"""The live secret from the environment: ``AGENTLOOP_LIVE_TOKEN``, else the
file ``AGENTLOOP_LIVE_TOKEN_FILE`` names (the ``_FILE`` convention of
container images: compose writes a random secret to a shared volume, and
``serve`` and the workers read it; docs/live-deltas.md)."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Final

from agentloop.shared.base.contracts import LIVE_TOKEN_ENV
from agentloop.shared.base.errors import UserError

LIVE_TOKEN_FILE_ENV: Final = "AGENTLOOP_LIVE_TOKEN_FILE"
#: How often a worker reads the file again, at most (a secret rotated in place is taken within it).
READ_SECONDS: Final = 1.0
#: The longest secret read from a file.
MOST_BYTES: Final = 4096

_read: dict[str, tuple[float, str]] = {}


def live_secret(environ: Mapping[str, str] | None = None) -> str | None:
    """``AGENTLOOP_LIVE_TOKEN``, else the contents of the file
    ``AGENTLOOP_LIVE_TOKEN_FILE`` names (stripped; read again at most once
    a second), else None.

    Raises:
        UserError: The file cannot be read, or is empty.
    """
    env = os.environ if environ is None else environ
    token = env.get(LIVE_TOKEN_ENV, "").strip()
    path = env.get(LIVE_TOKEN_FILE_ENV, "").strip()
    if token or not path:
        return token or None
    now = time.monotonic()
    kept = _read.get(path)
    if kept is not None and now - kept[0] < READ_SECONDS:
        return kept[1]
    try:
        with open(path, encoding="utf-8") as handle:
            token = handle.read(MOST_BYTES).strip()
    except OSError as err:
        raise UserError(f"{LIVE_TOKEN_FILE_ENV}={path}: cannot read it ({err.strerror}); give a readable file "
                        f"holding the live secret, or unset it") from None
    except UnicodeDecodeError:
        raise UserError(f"{LIVE_TOKEN_FILE_ENV}={path} is not text: it should hold the live secret") from None
    if not token:
        raise UserError(f"{LIVE_TOKEN_FILE_ENV}={path} is empty: it should hold the live secret")
    _read[path] = (now, token)
    return token
