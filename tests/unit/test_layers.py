"""The import contracts of pyproject.toml ([tool.importlinter]) hold.

``workflows/``, ``activities/`` and ``workers/`` install as subpackages of
``agentloop`` (pyproject's package-dir), which import-linter cannot follow in
an editable install: each test lays the package out as a wheel would, in a
temporary directory, and runs ``lint-imports`` on that copy.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def installed_layout(into: Path) -> Path:
    """The ``agentloop`` package as installed: agentloop/ with workflows/,
    activities/ and workers/ inside it."""
    package = into / "agentloop"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "agentloop", package, ignore=ignore)
    for side in ("workflows", "activities", "workers"):
        shutil.copytree(ROOT / side, package / side, ignore=ignore)
    return into


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--config", str(ROOT / "pyproject.toml")],
                          cwd=tree, env=env, capture_output=True, text=True, timeout=120)


def test_the_import_contracts_hold(tmp_path: Path) -> None:
    done = lint_imports(installed_layout(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 7 kept, 0 broken." in done.stdout, done.stdout


def test_a_workflow_importing_an_activity_breaks_a_contract(tmp_path: Path) -> None:
    tree = installed_layout(tmp_path)
    state = tree / "agentloop" / "workflows" / "loop_logic.py"
    state.write_text(state.read_text() + "\nfrom agentloop.activities import workspace  # noqa\n")
    done = lint_imports(tree)
    assert done.returncode != 0
    assert "Workflows import only the shared data and themselves BROKEN" in done.stdout, done.stdout
    assert "agentloop.workflows.loop_logic -> agentloop.activities.workspace" in done.stdout, done.stdout


def test_shared_data_importing_the_client_breaks_a_contract(tmp_path: Path) -> None:
    tree = installed_layout(tmp_path)
    messages = tree / "agentloop" / "shared" / "messages.py"
    messages.write_text(messages.read_text() + "\nimport agentloop.client.agent_client  # noqa\n")
    done = lint_imports(tree)
    assert "Shared data imports no other side BROKEN" in done.stdout, done.stdout


def test_the_public_surface_is_small_and_keeps_every_earlier_name() -> None:
    import agentloop

    assert len(agentloop.__all__) <= 40, len(agentloop.__all__)
    assert len(set(agentloop.__all__)) == len(agentloop.__all__)
    for name in agentloop.__all__:
        assert getattr(agentloop, name) is not None, name
    for name, module in agentloop._MORE.items():
        assert name not in agentloop.__all__, name
        assert getattr(agentloop, name) is getattr(__import__(module, fromlist=[name]), name), name


def test_the_api_page_lists_every_public_name_once() -> None:
    import re

    import agentloop

    page = (ROOT / "docs" / "api.md").read_text()
    listed = re.findall(r"^\| `(\w+)` \|", page.split("## `agentloop.workflow`")[0], re.M)
    assert sorted(listed) == sorted(agentloop.__all__)


def test_the_package_keeps_about_ten_entries_at_its_top() -> None:
    entries = [p.name for p in (ROOT / "agentloop").iterdir() if p.name != "__pycache__"]
    assert len(entries) <= 10, sorted(entries)


def test_every_subpackage_is_in_the_wheel() -> None:
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {"agentloop." + init.parent.relative_to(ROOT / "agentloop").as_posix().replace("/", ".")
             for init in (ROOT / "agentloop").rglob("__init__.py") if init.parent != ROOT / "agentloop"}
    found |= {"agentloop", "agentloop.workflows", "agentloop.activities", "agentloop.workers"}
    assert listed == found
