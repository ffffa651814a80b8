"""What some tests need from outside Python (bubblewrap, Chromium, Node and
the AG-UI client), installed by ``.ci/run``: without it such a test skips,
saying how to install it, unless ``.ci/run``'s ``AGENTLOOP_REQUIRE_<X>=1``
makes the skip a failure."""

from __future__ import annotations

import os

import pytest


def missing(reason: str, require: str, what: str = "these tests") -> None:
    """Skip with ``reason`` (which says how to install the missing part), or
    fail when the environment variable ``require`` is ``1``."""
    if os.environ.get(require) == "1":
        pytest.fail(f"{reason} ({require}=1 requires {what})")
    pytest.skip(reason)
