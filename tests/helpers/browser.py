"""Debian's Chromium, driven by Playwright for Python (``executable_path``):
nothing downloads a browser. Without ``/usr/bin/chromium`` the browser tests
skip with the install command; ``AGENTLOOP_REQUIRE_BROWSER=1`` (``.ci/run``
sets it) makes them fail instead."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.helpers.optional import missing

#: Where Debian's ``chromium`` package puts the browser.
CHROMIUM = "/usr/bin/chromium"
#: Set to 1 (``.ci/run`` does) to make the browser tests fail, not skip, without Chromium.
REQUIRE_BROWSER = "AGENTLOOP_REQUIRE_BROWSER"
#: Headless, no sandbox (CI runs as root), and nothing that reaches the network on its own.
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def chromium(path: str = CHROMIUM) -> str:
    """The browser's path; skip without it (fail when ``AGENTLOOP_REQUIRE_BROWSER=1``)."""
    if not Path(path).exists():
        reason = (f"Chromium is not installed ({path}), so the console is not tested in a browser: "
                  "apt-get install -y chromium")
        missing(reason, REQUIRE_BROWSER, "the browser tests")
    return path


async def launch(playwright: Any, path: str = CHROMIUM) -> Any:
    """Debian's Chromium, headless, through Playwright."""
    return await playwright.chromium.launch(executable_path=chromium(path), args=CHROMIUM_ARGS)
