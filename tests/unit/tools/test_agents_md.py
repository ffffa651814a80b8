"""The workspace's AGENTS.md as the load_context activity reads it."""

from __future__ import annotations

from pathlib import Path

from agentloop.activities.context_providers import read_agents_md
from agentloop.shared.definition.context_providers import MAX_AGENTS_MD_CHARS, agents_md_layer


def test_a_short_agents_md_is_read_whole(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("Run the tests first.")
    assert read_agents_md(tmp_path, allowed=True) == "Run the tests first."
    assert read_agents_md(tmp_path, allowed=False) is None
    assert read_agents_md(tmp_path / "nowhere", allowed=True) is None


def test_a_long_agents_md_is_cut_and_the_mark_counts_the_whole_file(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("a" * MAX_AGENTS_MD_CHARS + "b" * 200_000)
    text = read_agents_md(tmp_path, allowed=True)
    assert text is not None and len(text) <= MAX_AGENTS_MD_CHARS
    kept = text.index("…[")
    assert text == "a" * kept + f"…[{MAX_AGENTS_MD_CHARS + 200_000 - kept:,} characters cut]"
    # The layer keeps the cut as it is (it is not cut a second time).
    assert agents_md_layer(text).content.endswith(text)
