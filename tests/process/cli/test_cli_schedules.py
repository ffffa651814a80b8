"""``agentloop schedule`` as a user types it, on the session's dev server:
create (with a typed spec file naming its output by import path), describe,
list, pause, trigger, delete; a bad cron expression is a sentence, not a
traceback."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from tests.helpers.cli import agentloop


def test_schedule_commands(tmp_path: Path, env: dict[str, str]) -> None:
    (tmp_path / "triage_types.py").write_text(
        "from typing import Literal\nfrom pydantic import BaseModel\n\n"
        "class Triage(BaseModel):\n    decision: Literal['refund', 'escalate']\n    reason: str\n")
    (tmp_path / "spec.json").write_text(json.dumps(
        {"model": "scripted:demo", "name": "nightly", "output": "triage_types:Triage"}))
    name = f"nightly-{uuid.uuid4().hex[:6]}"
    created = agentloop("schedule", "create", name, "--spec", "spec.json", "--cron", "0 3 * * *",
                        "--input", "triage the night's tickets", "--time-zone", "Europe/Paris", "--paused",
                        env=env, cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    assert f"created schedule {name}: cron 0 3 * * * (Europe/Paris)" in created.stdout
    described = agentloop("schedule", "describe", name, "--json", env=env, cwd=tmp_path)
    assert described.returncode == 0, described.stderr
    data = json.loads(described.stdout)
    assert data["paused"] and data["agent"] == "nightly on scripted:demo" and data["overlap"] == "skip"
    assert agentloop("schedule", "unpause", name, env=env, cwd=tmp_path).stdout.strip() == f"unpaused {name}"
    assert agentloop("schedule", "pause", name, "--note", "holiday", env=env, cwd=tmp_path).returncode == 0
    assert "(holiday)" in agentloop("schedule", "describe", name, env=env, cwd=tmp_path).stdout
    assert agentloop("schedule", "delete", name, env=env, cwd=tmp_path).stdout.strip() == f"deleted schedule {name}"
    gone = agentloop("schedule", "describe", name, env=env, cwd=tmp_path)
    assert gone.returncode == 2 and gone.stderr.strip() == (
        f"agentloop: no schedule named {name}; `agentloop schedule list` shows the schedules")


def test_a_bad_cron_expression_is_a_sentence(tmp_path: Path, env: dict[str, str]) -> None:
    (tmp_path / "spec.json").write_text(json.dumps({"model": "scripted:demo"}))
    bad = agentloop("schedule", "create", "bad-cron", "--spec", "spec.json", "--cron", "61 * * * *",
                    "--input", "x", env=env, cwd=tmp_path)
    assert bad.returncode == 2
    assert "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    assert "the cron expression '61 * * * *' is not valid" in bad.stderr
    every = agentloop("schedule", "create", "bad-every", "--spec", "spec.json", "--every", "fortnightly",
                      "--input", "x", env=env, cwd=tmp_path)
    assert every.returncode == 2 and "every 'fortnightly' is not a duration" in every.stderr
