"""The import contracts of pyproject.toml ([tool.importlinter]) hold.

``agentloop/workflows``, ``agentloop/activities`` and ``agentloop/workers``
are symbolic links to the top-level folders, so the plain ``lint-imports``
works in a checkout: one test runs it there. The tests that break a contract
on purpose do it in a copy of the package, in a temporary directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def installed_layout(into: Path) -> Path:
    """A copy of the ``agentloop`` package, the linked folders copied as folders."""
    shutil.copytree(ROOT / "agentloop", into / "agentloop", ignore=shutil.ignore_patterns("__pycache__"))
    return into


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--config", str(ROOT / "pyproject.toml")],
                          cwd=tree, env=env, capture_output=True, text=True, timeout=120)


def test_the_plain_lint_imports_passes_in_the_checkout() -> None:
    done = subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken." in done.stdout, done.stdout
    assert "Analyzed 0 files" not in done.stdout, done.stdout


def test_the_import_contracts_hold_in_a_copy(tmp_path: Path) -> None:
    done = lint_imports(installed_layout(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert " kept, 0 broken." in done.stdout, done.stdout


def broken(tmp_path: Path, module: str, added: str) -> str:
    """lint-imports' output (white space folded) on a copy of the package in
    which ``module`` (a path under ``agentloop/``) ends with ``added``; it must fail."""
    tree = installed_layout(tmp_path)
    path = tree / "agentloop" / module
    path.write_text(path.read_text() + added)
    done = lint_imports(tree)
    assert done.returncode != 0, done.stdout
    return " ".join(done.stdout.split())


def top_level(statement: str) -> str:
    return f"\n{statement}  # noqa\n"


def in_function(statement: str) -> str:
    return f"\n\ndef _late():\n    {statement}  # noqa\n"


#: Each: the module changed, what is added to it, and what lint-imports must then say.
BREAKS = [
    pytest.param("workflows/decisions/next_step.py",
                 top_level("from agentloop.activities.builtin_tools import workspace"),
                 ["Workflows import only the shared data and themselves BROKEN",
                  "agentloop.workflows.decisions.next_step -> agentloop.activities.builtin_tools.workspace"],
                 id="a workflow importing an activity"),
    pytest.param("workflows/decisions/budgets.py", top_level("from agentloop.workflows.effects import recorder"),
                 ["Workflows: definitions, then effects, then pure decisions BROKEN",
                  "agentloop.workflows.decisions.budgets -> agentloop.workflows.effects.recorder"],
                 id="a pure decision importing a workflow effect"),
    pytest.param("workflows/effects/recorder.py", in_function("from agentloop.workflows.effects import tool_calls"),
                 ["No cycles inside the workflows BROKEN"],
                 id="a function-level import knot inside the workflows"),
    pytest.param("shared/base/messages.py", top_level("import agentloop.client.agent_client"),
                 ["Shared data imports no other side BROKEN"],
                 id="shared data importing the client"),
    pytest.param("activities/providers/openai_model.py",
                 top_level("from agentloop.activities.builtin_tools import workspace"),
                 ["Providers never import tool code BROKEN", "Tool code never imports the providers KEPT"],
                 id="a provider importing tool code"),
    pytest.param("activities/shell_sandbox/sandbox_init.py",
                 top_level("from agentloop.activities.providers import models"),
                 ["Tool code never imports the providers BROKEN", "Providers never import tool code KEPT"],
                 id="tool code importing a provider"),
    pytest.param("tools/isolation.py", top_level("from agentloop.tools import registry"),
                 ["The tool API is layered, with no cycle inside BROKEN"],
                 id="a cycle inside the tool API"),
    pytest.param("activities/hooks.py", in_function("from agentloop.activities import agent_activities"),
                 ["No cycles inside the activities or the tool API BROKEN"],
                 id="a function-level import back inside the activities"),
    pytest.param("shared/base/messages.py", in_function("from agentloop.shared.runs import report"),
                 ["Shared data: runs above the definition above the base BROKEN",
                  "agentloop.shared.base.messages -> agentloop.shared.runs.report"],
                 id="a base module importing a run module"),
    pytest.param("shared/definition/pricing.py", in_function("from agentloop.shared.definition import spec"),
                 ["No cycles inside a layer of the shared data BROKEN"],
                 id="a cycle inside a shared layer"),
]


@pytest.mark.parametrize(("module", "added", "said"), BREAKS)
def test_breaking_a_contract_is_caught(tmp_path: Path, module: str, added: str, said: list[str]) -> None:
    output = broken(tmp_path, module, added)
    assert [s for s in said if s not in output] == [], output


def test_the_public_surface_is_all_and_nothing_else_is_reached_through_the_package() -> None:
    import agentloop

    assert len(set(agentloop.__all__)) == len(agentloop.__all__)
    for name in agentloop.__all__:
        assert getattr(agentloop, name) is not None, name
    assert not hasattr(agentloop, "_MORE")
    assert not hasattr(agentloop, "__getattr__")
    assert not hasattr(agentloop, "RunCompleted")  # an event class: imported from its module


def test_the_api_page_lists_every_public_name_once() -> None:
    import re

    import agentloop

    page = (ROOT / "docs" / "api.md").read_text()
    listed = re.findall(r"^\| `(\w+)` \|", page.split("## `agentloop.in_workflow`")[0], re.M)
    assert sorted(listed) == sorted(agentloop.__all__)


def test_the_package_keeps_about_twelve_entries_at_its_top() -> None:
    entries = [p.name for p in (ROOT / "agentloop").iterdir() if p.name != "__pycache__"]
    # Ten of our own, and the links to workflows/, activities/ and workers/.
    assert len(entries) <= 12, sorted(entries)


def test_every_folder_of_code_is_a_package_the_wheel_finds() -> None:
    """pyproject's packages.find puts a folder in the wheel only if it has an __init__.py."""
    import setuptools

    found = set(setuptools.find_packages(str(ROOT), include=["agentloop", "agentloop.*"]))
    folders = {"agentloop"}
    for top, package in (("agentloop", "agentloop"), ("workflows", "agentloop.workflows"),
                         ("activities", "agentloop.activities"), ("workers", "agentloop.workers")):
        for source in (ROOT / top).rglob("*.py"):
            if "__pycache__" not in source.parts:
                inside = source.parent.relative_to(ROOT / top).parts
                folders.add(".".join((package, *inside)))
    assert folders <= found, sorted(folders - found)
    assert {"agentloop.workflows", "agentloop.activities", "agentloop.workers"} <= found
