"""The search attributes a cluster needs are listed once, in
``agentloop.shared.runs.search_attributes.SEARCH_ATTRIBUTES``; every document and
deploy file that registers them (README.md, docs/, deploy/compose.yaml through
its generated script, the Kubernetes Job) registers exactly that list."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentloop.shared.runs.search_attributes import SEARCH_ATTRIBUTES, create_commands
from tests.helpers.paths import ROOT

#: ``temporal operator search-attribute create ... --name N --type T``
CREATE = re.compile(r"search-attribute create\b[^\n]*?--name[ =](\w+)[^\n]*?--type[ =](\w+)")
#: ``temporal server start-dev --search-attribute N=T`` (and compose's list form)
START_DEV = re.compile(r"--search-attribute[ =](\w+)=(\w+)")
#: A row of docs/operating.md's table: | `AgentX` | Type | ... |
TABLE_ROW = re.compile(r"^\| `(Agent\w+)` \| (\w+) \|", re.MULTILINE)


def registering_files() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "deploy").rglob("*"))]
    return [f for f in files if f.is_file()]


def registered(text: str) -> dict[str, str]:
    return {name: kind for name, kind in CREATE.findall(text) + START_DEV.findall(text)}


@pytest.mark.parametrize("path", registering_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_file_that_registers_search_attributes_registers_all_of_them(path: Path) -> None:
    found = registered(path.read_text())
    if found:
        assert found == SEARCH_ATTRIBUTES, f"{path.relative_to(ROOT)} registers {found}"


def test_the_cluster_docs_and_compose_register_them() -> None:
    operating = (ROOT / "docs" / "operating.md").read_text()
    assert registered(operating) == SEARCH_ATTRIBUTES
    assert dict(TABLE_ROW.findall(operating)) == SEARCH_ATTRIBUTES
    for command in create_commands():
        assert command in operating
    # compose.yaml's search-attributes service runs this script, and the
    # Kubernetes Job carries it (tests/unit/workers/test_deploy.py checks both).
    assert registered((ROOT / "deploy" / "register-search-attributes.sh").read_text()) == SEARCH_ATTRIBUTES
    assert registered((ROOT / "deploy" / "kubernetes" / "search-attributes.yaml").read_text()) == SEARCH_ATTRIBUTES


def test_they_fit_a_sql_visibility_store() -> None:
    """Temporal's SQL visibility (PostgreSQL, MySQL, SQLite: compose.yaml's
    server and the dev server) has per namespace 10 columns for custom
    Keyword attributes and 3 for KeywordList; a cluster with one more refuses
    to register it."""
    kinds = list(SEARCH_ATTRIBUTES.values())
    assert kinds.count("Keyword") <= 10 and kinds.count("KeywordList") <= 3
    assert set(kinds) <= {"Keyword", "KeywordList"}, "other types have their own limits: check them, then widen this"


def test_agent_version_is_one_of_them() -> None:
    assert SEARCH_ATTRIBUTES["AgentVersion"] == "Keyword"
