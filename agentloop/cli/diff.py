"""``agentloop diff RUN_A RUN_B``: two runs aligned step by step
(:mod:`agentloop.shared.runs.diff`, docs/diff.md). Each of the two may be a
run id (exported from the runs on ``TEMPORAL_ADDRESS``, or the embedded
server's) or a snapshot file ``agentloop export`` wrote. Text by default,
the changed words marked (in colour on a terminal, ``[-removed-]{+added+}``
otherwise or with ``--no-color``); ``--json`` prints the whole diff."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentloop.cli.common import table
from agentloop.cli.options import run_id
from agentloop.shared.base.text import clip

if TYPE_CHECKING:
    from agentloop.shared.runs.diff import Row, RunDiff, Segment
    from agentloop.shared.runs.snapshots import AgentSnapshot

RED, GREEN, DIM, BOLD, RESET = "\x1b[31m", "\x1b[32m", "\x1b[2m", "\x1b[1m", "\x1b[0m"

#: The mark of each row type in the first column.
MARKS = {"same": " ", "changed": "~", "only_a": "-", "only_b": "+"}

#: The longest a row that is the same in both runs is printed (the JSON has it all).
SAME_CHARS = 160


def is_snapshot_file(arg: str) -> bool:
    """``arg`` names a snapshot file rather than a run: a file that exists, or ``-``."""
    return arg == "-" or Path(arg).is_file()


def read_snapshot(arg: str) -> AgentSnapshot:
    """The snapshot in file ``arg`` (``-``: stdin), checked (SnapshotError: a sentence)."""
    from agentloop.shared.base.errors import UserError
    from agentloop.shared.runs.snapshots import load_snapshot

    if arg == "-":
        return load_snapshot(sys.stdin.buffer.read(), "the snapshot on stdin")
    try:
        data = Path(arg).read_bytes()
    except OSError as exc:
        raise UserError(f"{arg} cannot be read: {exc.strerror}") from None
    return load_snapshot(data, arg)


async def _snapshots(args: list[str]) -> list[AgentSnapshot]:
    from agentloop.cli.embedded import reading_client
    from agentloop.cli.snapshots import _export

    if all(is_snapshot_file(a) for a in args):
        return [read_snapshot(a) for a in args]
    async with reading_client("diff") as client:
        return [read_snapshot(a) if is_snapshot_file(a) else await _export(client, a) for a in args]


async def cmd_diff(args: argparse.Namespace) -> int:
    from agentloop.shared.runs.diff import diff_runs

    if args.run_a == "-" and args.run_b == "-":
        from agentloop.shared.base.errors import UserError

        raise UserError("only one of RUN_A and RUN_B can be read from stdin ('-')")
    a, b = await _snapshots([args.run_a, args.run_b])
    diff = diff_runs(a, b)
    if args.json:
        sys.stdout.write(diff.model_dump_json(indent=1) + "\n")
    else:
        color = not args.no_color and sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        sys.stdout.write("\n".join(render(diff, color=color)) + "\n")
    sys.stdout.flush()
    return 0


# Text ----------------------------------------------------------------------------------


def marked(words: list[Segment], color: bool) -> str:
    """A changed text with its changes marked: colours on a terminal, else
    ``[-removed-]`` and ``{+added+}`` (as ``git diff --word-diff``)."""
    out = []
    for seg in words:
        if seg.op == "same":
            out.append(seg.text)
        elif color:
            out.append((RED if seg.op == "removed" else GREEN) + seg.text + RESET)
        else:
            out.append(f"[-{seg.text}-]" if seg.op == "removed" else f"{{+{seg.text}+}}")
    return "".join(out)


def _where(row: Row) -> str:
    a = "" if row.step_a is None else str(row.step_a)
    b = "" if row.step_b is None else str(row.step_b)
    if row.part == "input":
        return "input"
    if row.part == "output":
        return "output"
    return f"step {a or '·'}|{b or '·'}"


def _short(text: str, limit: int = SAME_CHARS) -> str:
    line = " ".join(text.split())
    return clip(line, limit)


def row_line(row: Row, color: bool) -> str:
    """One aligned row as a line of text (a changed row: both values, words marked)."""
    label = f"{MARKS[row.type]} {_where(row):<11} {row.part:<11} "
    if row.type == "changed":
        tools = row.part == "tool_call" and row.tool_a != row.tool_b
        head = f"tool {row.tool_a} -> {row.tool_b}: " if tools else ""
        return label + head + marked(row.words, color)
    text = _short(row.text) if row.type == "same" else row.text
    if color and row.type != "same":
        return (RED if row.type == "only_a" else GREEN) + label + text + RESET
    return (DIM + label + text + RESET) if color else label + text


def _fmt(value: float | None, name: str) -> str:
    if value is None:
        return "unknown"
    if name == "cost_usd":
        return f"{value:+.6f}".lstrip("+") if value >= 0 else f"{value:.6f}"
    return f"{value:g}"


def render(diff: RunDiff, *, color: bool = False) -> list[str]:
    """The diff as lines of text: the runs, the definition, the rows, the usage, the notes."""
    a, b = diff.a, diff.b
    lines = [f"A {a.run_id} ({a.status}, {a.steps} steps, agent {a.fingerprint}, {a.model})",
             f"B {b.run_id} ({b.status}, {b.steps} steps, agent {b.fingerprint}, {b.model})",
             diff.definition.describe()]
    lines += [f"  {f.part} {f.field}: {f.a} -> {f.b}" for f in diff.definition.fields]
    same_tools = "the same tools in the same order" if diff.same_tools else (
        f"different tools: A {', '.join(a.tool_calls) or 'none'}; B {', '.join(b.tool_calls) or 'none'}")
    lines += ["", f"{diff.changed} of {len(diff.rows)} rows differ; {same_tools}", ""]
    lines += [row_line(row, color) for row in diff.rows]
    usage = [["", "A", "B", "B-A"]] + [
        [d.name, _fmt(d.a, d.name), _fmt(d.b, d.name),
         "unknown" if d.delta is None else (f"{d.delta:+.6f}" if d.name == "cost_usd" else f"{d.delta:+g}")]
        for d in diff.usage]
    lines += ["", *table(usage)]
    lines += [f"note: {n}" for n in diff.notes]
    return lines


def add_diff_parser(sub: Any) -> None:
    """The ``diff`` command and its options."""
    p = sub.add_parser(
        "diff", help="compare two runs step by step (agentloop diff RUN_A RUN_B)",
        description="Align two runs step by step and say what differs: the agent definitions (from their "
                    "fingerprints and specs), the model's messages (changed words marked), the tool calls and "
                    "their arguments, the results, the output, and usage and cost with the deltas. RUN_A and "
                    "RUN_B are run ids or snapshot files `agentloop export` wrote ('-': stdin).",
    )
    p.add_argument("run_a", type=run_id, metavar="RUN_A", help="the first run: a run id or a snapshot file")
    p.add_argument("run_b", type=run_id, metavar="RUN_B", help="the second run: a run id or a snapshot file")
    p.add_argument("--json", action="store_true", help="print the whole diff as JSON")
    p.add_argument("--no-color", action="store_true",
                   help="mark changes as [-removed-]{+added+} even on a terminal (also $NO_COLOR)")
