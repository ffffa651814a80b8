"""The console's files and its browser test's setup (the console itself is
tested in a browser by tests/server/http/test_console.py)."""

from __future__ import annotations

import fnmatch
import tomllib

import pytest

from agentloop.server.console import ASSETS, SCRIPTS
from tests.helpers import browser
from tests.helpers.paths import ROOT

STATIC = ROOT / "agentloop" / "server" / "static"


def test_every_asset_exists_and_ships_in_the_wheel() -> None:
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "agentloop.server"]
    files = sorted(p.name for p in STATIC.iterdir())
    assert set(ASSETS) | {"page.html"} == set(files)
    for name in files:
        assert any(fnmatch.fnmatch(f"static/{name}", pattern) for pattern in patterns), name


def test_the_console_loads_nothing_from_elsewhere() -> None:
    for name in ("page.html", "console.css", *SCRIPTS):
        text = (STATIC / name).read_text()
        assert "http://" not in text and "https://" not in text and "//cdn" not in text, name


def test_without_chromium_the_browser_test_skips_with_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(browser.REQUIRE_BROWSER, raising=False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install -y chromium"):
        browser.chromium("/nonexistent/chromium")


def test_without_chromium_the_browser_test_fails_when_ci_requires_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(browser.REQUIRE_BROWSER, "1")
    with pytest.raises(pytest.fail.Exception, match="AGENTLOOP_REQUIRE_BROWSER=1 requires the browser tests"):
        browser.chromium("/nonexistent/chromium")


def test_ci_installs_chromium_and_requires_the_browser_test() -> None:
    script = (ROOT / ".ci" / "run").read_text()
    assert "apt-get install" in script and " chromium" in script
    assert "export AGENTLOOP_REQUIRE_BROWSER=1" in script
    assert "playwright install" not in script
