"""What the CLI prints without a server: ``--help`` texts, ``schedule list``
columns, and the test configuration a new user meets first."""

from __future__ import annotations

import argparse
import tomllib
from types import SimpleNamespace

from agentloop.cli.parser import build_parser
from agentloop.cli.schedules import schedule_lines
from tests.helpers.paths import ROOT


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_command_s_help_has_a_description() -> None:
    undescribed = sorted(name for name, sub in subcommands().items() if not sub.description)
    assert undescribed == []


def test_cancel_offers_terminate() -> None:
    assert "--terminate" in subcommands()["cancel"].format_help()


def test_schedule_list_lines_up_its_columns() -> None:
    found = [SimpleNamespace(name="triage", when=["every 15m"], paused=False, agent="triage-bot"),
             SimpleNamespace(name="morning-digest", when=["cron 0 7 * * 1-5"], paused=True, agent="")]
    lines = schedule_lines(found)
    assert lines[0].split() == ["NAME", "WHEN", "STATE", "AGENT"]
    # Each column starts at the same place on every line.
    for header in ("WHEN", "STATE", "AGENT"):
        at = lines[0].index(header)
        assert all(line[at - 2:at] == "  " and line[at] != " " for line in lines[1:]), lines
    assert lines[2].split()[-2:] == ["paused", "-"]


def test_pytest_shows_skip_reasons_by_default() -> None:
    # A skipped test says how to install what it needs: the summary must show it.
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "-rs" in config["addopts"].split()


def test_a_request_counts_as_taken_once_a_workflow_task_started_after_it() -> None:
    from temporalio.api.enums.v1 import EventType as E

    from agentloop.cli.control import request_taken

    cancel = E.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED
    before = [E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, E.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
              E.EVENT_TYPE_WORKFLOW_TASK_STARTED, E.EVENT_TYPE_WORKFLOW_TASK_COMPLETED]
    assert not request_taken(before, cancel)  # not asked
    assert not request_taken([*before, cancel, E.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED], cancel)  # no worker read it
    assert request_taken([*before, cancel, E.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
                          E.EVENT_TYPE_WORKFLOW_TASK_STARTED], cancel)
    signal = E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
    # A second signal, not yet read, is the one that counts.
    assert not request_taken([*before, signal, E.EVENT_TYPE_WORKFLOW_TASK_STARTED, signal], signal)


def test_durations_read_as_people_say_them() -> None:
    from agentloop.cli.listing import duration_text

    assert [duration_text(ms) for ms in (340.4, 2_500, 42_000, 492_000, 7_500_000)] == [
        "340 ms", "2.5 s", "42 s", "8 min 12 s", "2 h 05 min"]
