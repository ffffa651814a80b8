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


def test_a_workflow_importing_an_activity_breaks_a_contract(tmp_path: Path) -> None:
    tree = installed_layout(tmp_path)
    state = tree / "agentloop" / "workflows" / "decisions" / "next_step.py"
    state.write_text(state.read_text() + "\nfrom agentloop.activities.builtin_tools import workspace  # noqa\n")
    done = lint_imports(tree)
    assert done.returncode != 0
    assert "Workflows import only the shared data and themselves BROKEN" in done.stdout, done.stdout
    assert ("agentloop.workflows.decisions.next_step -> agentloop.activities.builtin_tools.workspace"
            in " ".join(done.stdout.split())), done.stdout


def test_a_pure_decision_importing_a_workflow_effect_breaks_a_contract(tmp_path: Path) -> None:
    tree = installed_layout(tmp_path)
    budgets = tree / "agentloop" / "workflows" / "decisions" / "budgets.py"
    budgets.write_text(budgets.read_text() + "\nfrom agentloop.workflows.effects import recorder  # noqa\n")
    done = lint_imports(tree)
    assert done.returncode != 0
    assert "Workflows: definitions, then effects, then pure decisions BROKEN" in done.stdout, done.stdout
    assert "agentloop.workflows.decisions.budgets -> agentloop.workflows.effects.recorder" in done.stdout, done.stdout


def test_a_function_level_import_knot_inside_the_workflows_breaks_a_contract(tmp_path: Path) -> None:
    tree = installed_layout(tmp_path)
    recorder = tree / "agentloop" / "workflows" / "effects" / "recorder.py"
    recorder.write_text(recorder.read_text() + "\n\ndef _knot():\n"
                        "    from agentloop.workflows.effects import tool_calls  # noqa\n")
    done = lint_imports(tree)
    assert done.returncode != 0
    assert "No cycles inside the workflows BROKEN" in done.stdout, done.stdout


def test_shared_data_importing_the_client_breaks_a_contract(tmp_path: Path) -> None:
    tree = installed_layout(tmp_path)
    messages = tree / "agentloop" / "shared" / "base" / "messages.py"
    messages.write_text(messages.read_text() + "\nimport agentloop.client.agent_client  # noqa\n")
    done = lint_imports(tree)
    assert "Shared data imports no other side BROKEN" in done.stdout, done.stdout


def test_a_provider_importing_tool_code_breaks_a_contract(tmp_path: Path) -> None:
    tree = installed_layout(tmp_path)
    adapter = tree / "agentloop" / "activities" / "providers" / "openai_model.py"
    adapter.write_text(adapter.read_text() + "\nfrom agentloop.activities.builtin_tools import workspace  # noqa\n")
    done = lint_imports(tree)
    assert done.returncode != 0
    assert "Providers never import tool code BROKEN" in done.stdout, done.stdout
    assert "Tool code never imports the providers KEPT" in done.stdout, done.stdout


def test_tool_code_importing_a_provider_breaks_a_contract(tmp_path: Path) -> None:
    tree = installed_layout(tmp_path)
    sandbox = tree / "agentloop" / "activities" / "shell_sandbox" / "sandbox_init.py"
    sandbox.write_text(sandbox.read_text() + "\nfrom agentloop.activities.providers import models  # noqa\n")
    done = lint_imports(tree)
    assert done.returncode != 0
    assert "Tool code never imports the providers BROKEN" in done.stdout, done.stdout
    assert "Providers never import tool code KEPT" in done.stdout, done.stdout


def test_a_cycle_inside_the_tool_api_breaks_a_contract(tmp_path: Path) -> None:
    tree = installed_layout(tmp_path)
    isolation = tree / "agentloop" / "tools" / "isolation.py"
    isolation.write_text(isolation.read_text() + "\nfrom agentloop.tools import registry  # noqa\n")
    done = lint_imports(tree)
    assert done.returncode != 0
    assert "The tool API is layered, with no cycle inside BROKEN" in done.stdout, done.stdout


def test_a_function_level_import_back_inside_the_activities_breaks_a_contract(tmp_path: Path) -> None:
    tree = installed_layout(tmp_path)
    hooks = tree / "agentloop" / "activities" / "hooks.py"
    hooks.write_text(hooks.read_text() + "\n\ndef _back():\n"
                     "    from agentloop.activities import agent_activities  # noqa\n")
    done = lint_imports(tree)
    assert done.returncode != 0
    assert "No cycles inside the activities or the tool API BROKEN" in done.stdout, done.stdout


def test_a_base_module_importing_a_run_module_breaks_the_shared_layers(tmp_path: Path) -> None:
    tree = installed_layout(tmp_path)
    messages = tree / "agentloop" / "shared" / "base" / "messages.py"
    messages.write_text(messages.read_text() + "\n\ndef _late():\n"
                        "    from agentloop.shared.runs import report  # noqa\n")
    done = lint_imports(tree)
    assert done.returncode != 0
    assert "Shared data: runs above the definition above the base BROKEN" in done.stdout, done.stdout
    assert "agentloop.shared.base.messages -> agentloop.shared.runs.report" in done.stdout, done.stdout


def test_a_cycle_inside_a_shared_layer_breaks_a_contract(tmp_path: Path) -> None:
    tree = installed_layout(tmp_path)
    pricing = tree / "agentloop" / "shared" / "definition" / "pricing.py"
    pricing.write_text(pricing.read_text() + "\n\ndef _late():\n"
                       "    from agentloop.shared.definition import spec  # noqa\n")
    done = lint_imports(tree)
    assert done.returncode != 0
    assert "No cycles inside a layer of the shared data BROKEN" in done.stdout, done.stdout


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
