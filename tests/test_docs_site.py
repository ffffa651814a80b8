"""The docs site builds: ``mkdocs build --strict`` (MkDocs Material, from
mkdocs.yml and docs/) with no warning, so no broken link or anchor, and its
nav lists every page of docs/."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def nav_pages(nav: list) -> list[str]:
    """The pages of a mkdocs nav, in order."""
    pages = []
    for entry in nav:
        for item in (entry.values() if isinstance(entry, dict) else [entry]):
            pages += nav_pages(item) if isinstance(item, list) else [item]
    return pages


class Loader(yaml.SafeLoader):
    """mkdocs.yml's own tags (``!!python/...``) are left as they are."""


Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)


def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "tools" / "index.html").is_file()


def test_the_nav_lists_every_page() -> None:
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)  # noqa: S506 (a SafeLoader)
    assert config["site_name"] == "agentloop" and config["theme"]["name"] == "material"
    listed = nav_pages(config["nav"])
    assert len(listed) == len(set(listed))
    pages = sorted(str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").glob("*.md"))
    assert sorted(set(pages) - set(listed)) == []
    assert {"architecture.md", "api.md"} <= set(listed)
