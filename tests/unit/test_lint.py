"""The repository passes ``ruff check`` and the package passes ``mypy``
(configuration in ``pyproject.toml``: ``[tool.ruff]`` and ``[tool.mypy]``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def test_ruff_finds_nothing() -> None:
    done = subprocess.run([str(BIN / "ruff"), "check", "--no-cache", "."], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


def test_mypy_finds_nothing_in_the_package(tmp_path: Path) -> None:
    done = subprocess.run([str(BIN / "mypy"), "--cache-dir", str(tmp_path / "mypy"), "-p", "agentloop"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "Success: no issues found" in done.stdout, done.stdout
