"""``--tenant`` and ``--priority`` on the commands that start runs: the
priority goes into the spec, a bad one is a sentence."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentloop.cli.parser import build_parser
from agentloop.cli.spec_file import spec_of_run
from agentloop.shared.base.errors import UserError


def test_run_and_chat_take_a_tenant_and_a_priority(tmp_path: Path) -> None:
    parser = build_parser()
    args = parser.parse_args(["run", "hi", "--model", "scripted:demo", "--workspace", str(tmp_path),
                              "--tenant", "acme", "--priority", "1"])
    assert args.tenant == "acme" and spec_of_run(args).priority == 1
    spec_file = tmp_path / "a.yaml"
    spec_file.write_text("model: scripted:demo\npriority: 4\n")
    args = parser.parse_args(["chat", "--spec", str(spec_file), "--workspace", str(tmp_path), "--priority", "2"])
    assert args.tenant is None and spec_of_run(args).priority == 2
    args = parser.parse_args(["run", "hi", "--model", "scripted:demo", "--workspace", str(tmp_path),
                              "--priority", "7"])
    with pytest.raises(UserError, match="priority 7 is out of range: use 1"):
        spec_of_run(args)


def test_schedules_and_snapshot_starts_take_a_tenant() -> None:
    parser = build_parser()
    args = parser.parse_args(["schedule", "create", "nightly", "--spec", "a.yaml", "--every", "1h",
                              "--input", "go", "--tenant", "acme"])
    assert args.tenant == "acme"
    assert parser.parse_args(["fork", "run-1", "--at-step", "1", "--tenant", "acme"]).tenant == "acme"
    assert parser.parse_args(["start", "--from", "s.json", "--tenant", "acme"]).tenant == "acme"
