"""Two runs aligned step by step (``agentloop diff``, ``GET /v1/diff``, docs/diff.md).

:func:`diff_runs` takes two snapshots (what ``agentloop export`` writes) and
returns a :class:`RunDiff`: how the agent definitions differ, then one row
per aligned part of the two runs, in order, each row a tagged union on
``type``: :class:`Same`, :class:`Changed` (with the changed words marked),
:class:`OnlyA` or :class:`OnlyB`; then the output, the usage and cost with
their deltas, and notes on what the alignment could not see.

How the runs are aligned:

- A run is cut into *steps*: each assistant message (the model's text and
  its tool calls) with the tool results that answer its calls. A user
  message after the input (a thread's next turn) is a step of its own.
- The two lists of steps are matched on each step's *signature* (the tools
  it called, in order; ``user`` for a turn) with :mod:`difflib`, so a step
  one run inserted shows as only in that run and the steps after it still
  line up. Steps in a replaced block are paired in order and the rest are
  only in one run.
- Inside a pair of steps the model's text is compared word by word; the tool
  calls are matched by tool name the same way, and each call is compared on
  its tool and arguments (canonical JSON: sorted keys), then its result.
- Runs of different lengths: the steps past the shorter run are only in the
  longer one. A run still going is compared on the steps it has finished (a
  note says so, and its output is empty). A run whose conversation was
  compacted has fewer messages than steps: it is compared on the messages it
  still holds (the summary is a message like any other) and a note says how
  many steps were folded into it; usage and cost still count every step.

Pure: no Temporal, no I/O.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from agentloop.shared.base.messages import Message, ToolCallPart, ToolResultPart
from agentloop.shared.definition.spec_diff import DefinitionDiff, definition_diff
from agentloop.shared.runs.report import LIVE_STATUSES
from agentloop.shared.runs.snapshots import AgentSnapshot

#: What a row compares.
RowPart = Literal["input", "user", "message", "tool_call", "tool_result", "output"]

#: A word with the spaces after it (so a run of changed words is one change), a mark, or spaces.
_WORDS = re.compile(r"\w+\s*|[^\w\s]\s*|\s+")


class Segment(BaseModel):
    """A piece of a changed text: in both runs, only in A (removed) or only in B (added)."""

    op: Literal["same", "removed", "added"]
    text: str


class _Row(BaseModel):
    part: RowPart
    step_a: int | None = Field(default=None, description="the step in run A (1-based; 0: the input)")
    step_b: int | None = Field(default=None, description="the step in run B")
    tool_a: str | None = None
    tool_b: str | None = None


class Same(_Row):
    """The same in both runs."""

    type: Literal["same"] = "same"
    text: str


class Changed(_Row):
    """In both runs, different: ``a`` and ``b`` in full and ``words``, the word-level diff."""

    type: Literal["changed"] = "changed"
    a: str
    b: str
    words: list[Segment] = Field(default_factory=list)


class OnlyA(_Row):
    """Only in run A."""

    type: Literal["only_a"] = "only_a"
    text: str


class OnlyB(_Row):
    """Only in run B."""

    type: Literal["only_b"] = "only_b"
    text: str


Row = Annotated[Same | Changed | OnlyA | OnlyB, Field(discriminator="type")]


class RunSide(BaseModel):
    """What a diff says of one of the two runs."""

    run_id: str
    status: str
    fingerprint: str
    model: str
    steps: int
    tool_calls: list[str] = Field(default_factory=list, description="tool names called, in order")
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None


class Delta(BaseModel):
    """A figure of both runs and B minus A (None when either is unknown)."""

    name: str
    a: float | None
    b: float | None
    delta: float | None


class RunDiff(BaseModel):
    """Two runs, aligned (:func:`diff_runs`)."""

    a: RunSide
    b: RunSide
    definition: DefinitionDiff
    rows: list[Row] = Field(default_factory=list)
    usage: list[Delta] = Field(default_factory=list)
    same_tools: bool = Field(description="both runs called the same tools in the same order")
    changed: int = Field(description="rows that differ (changed, only in A, only in B)")
    notes: list[str] = Field(default_factory=list)


# Words and canonical text --------------------------------------------------------------


def word_diff(a: str, b: str) -> list[Segment]:
    """``a`` to ``b``, word by word (a word keeps the spaces after it; each mark is a word)."""
    wa, wb = _WORDS.findall(a), _WORDS.findall(b)
    segments: list[Segment] = []

    def add(op: Literal["same", "removed", "added"], words: Sequence[str]) -> None:
        text = "".join(words)
        if not text:
            return
        if segments and segments[-1].op == op:
            segments[-1].text += text
        else:
            segments.append(Segment(op=op, text=text))

    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, wa, wb, autojunk=False).get_opcodes():
        if tag == "equal":
            add("same", wa[i1:i2])
        else:
            add("removed", wa[i1:i2])
            add("added", wb[j1:j2])
    return segments


def canonical(value: Any) -> str:
    """``value`` as canonical JSON: sorted keys, no spaces after separators' commas
    beyond one, non-ASCII kept (two equal arguments are the same text)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(", ", ": "), default=str)


def call_text(call: ToolCallPart) -> str:
    """A tool call as one line: ``name {canonical arguments}``."""
    args = call.raw_arguments if call.arguments_error and call.raw_arguments else canonical(call.arguments)
    return f"{call.name} {args}"


def result_text(result: ToolResultPart | None) -> str:
    """A tool result as the model saw it (``error: ...`` when it failed)."""
    if result is None:
        return "(no result yet)"
    return f"error: {result.content}" if result.is_error else result.content


def output_text(snapshot: AgentSnapshot) -> str:
    """The run's output: its typed answer as canonical JSON, else its final text."""
    report = snapshot.report
    if report.output is not None:
        return canonical(report.output)
    return report.final_text


# Steps ---------------------------------------------------------------------------------


class _Step(BaseModel):
    number: int
    user: str | None = None
    text: str = ""
    calls: list[tuple[ToolCallPart, ToolResultPart | None]] = Field(default_factory=list)

    @property
    def signature(self) -> tuple[str, ...]:
        return ("user",) if self.user is not None else tuple(c.name for c, _ in self.calls)


def steps_of(messages: list[Message], input_count: int) -> list[_Step]:
    """The conversation after the input as steps (see the module's doc)."""
    steps: list[_Step] = []
    results: dict[str, ToolResultPart] = {}
    for message in messages[input_count:]:
        for part in message.tool_results:
            results[part.id] = part
    for message in messages[input_count:]:
        if message.role == "user" and not message.tool_results:
            steps.append(_Step(number=len(steps) + 1, user=message.text))
        elif message.role == "assistant":
            calls = [(c, results.get(c.id)) for c in message.tool_calls]
            steps.append(_Step(number=len(steps) + 1, text=message.text, calls=calls))
    return steps


def input_text(snapshot: AgentSnapshot) -> str:
    """The run's input: its user and system messages before the first step, one per line."""
    return "\n".join(m.text for m in snapshot.messages[: snapshot.input_count or 1] if m.text)


# Rows ----------------------------------------------------------------------------------


def compare(part: RowPart, a: str, b: str, step_a: int | None, step_b: int | None,
            tools: tuple[str | None, str | None] = (None, None)) -> Row:
    """One row: ``Same`` when ``a == b``, else ``Changed`` with the word diff."""
    where: dict[str, Any] = {"part": part, "step_a": step_a, "step_b": step_b, "tool_a": tools[0], "tool_b": tools[1]}
    if a == b:
        return Same(text=a, **where)
    return Changed(a=a, b=b, words=word_diff(a, b), **where)


def _only(side: Literal["a", "b"], part: RowPart, text: str, step: int, tool: str | None = None) -> Row:
    if side == "a":
        return OnlyA(part=part, text=text, step_a=step, tool_a=tool)
    return OnlyB(part=part, text=text, step_b=step, tool_b=tool)


def one_side(step: _Step, side: Literal["a", "b"]) -> list[Row]:
    """The rows of a step only one run took."""
    if step.user is not None:
        return [_only(side, "user", step.user, step.number)]
    rows: list[Row] = [_only(side, "message", step.text, step.number)] if step.text else []
    for call, result in step.calls:
        rows.append(_only(side, "tool_call", call_text(call), step.number, call.name))
        rows.append(_only(side, "tool_result", result_text(result), step.number, call.name))
    return rows


def _call_rows(a: _Step, b: _Step) -> list[Row]:
    rows: list[Row] = []
    names_a, names_b = [c.name for c, _ in a.calls], [c.name for c, _ in b.calls]
    matcher = difflib.SequenceMatcher(None, names_a, names_b, autojunk=False)
    for _tag, i1, i2, j1, j2 in matcher.get_opcodes():
        for k in range(max(i2 - i1, j2 - j1)):
            ca = a.calls[i1 + k] if i1 + k < i2 else None
            cb = b.calls[j1 + k] if j1 + k < j2 else None
            if ca is not None and cb is not None:
                tools = (ca[0].name, cb[0].name)
                rows.append(compare("tool_call", call_text(ca[0]), call_text(cb[0]), a.number, b.number, tools))
                rows.append(compare("tool_result", result_text(ca[1]), result_text(cb[1]), a.number, b.number,
                                    tools))
            elif ca is not None:
                rows += one_side(_Step(number=a.number, calls=[ca]), "a")
            elif cb is not None:
                rows += one_side(_Step(number=b.number, calls=[cb]), "b")
    return rows


def step_rows(a: _Step, b: _Step) -> list[Row]:
    """The rows of two steps that line up."""
    if a.user is not None or b.user is not None:
        if a.user is not None and b.user is not None:
            return [compare("user", a.user, b.user, a.number, b.number)]
        return one_side(a, "a") + one_side(b, "b")
    rows: list[Row] = []
    if a.text or b.text:
        rows.append(compare("message", a.text, b.text, a.number, b.number))
    return rows + _call_rows(a, b)


def align(a: list[_Step], b: list[_Step]) -> list[Row]:
    """The rows of two runs' steps, aligned on the steps' signatures."""
    rows: list[Row] = []
    matcher = difflib.SequenceMatcher(None, [s.signature for s in a], [s.signature for s in b], autojunk=False)
    for _tag, i1, i2, j1, j2 in matcher.get_opcodes():
        for k in range(max(i2 - i1, j2 - j1)):
            sa = a[i1 + k] if i1 + k < i2 else None
            sb = b[j1 + k] if j1 + k < j2 else None
            if sa is not None and sb is not None:
                rows += step_rows(sa, sb)
            elif sa is not None:
                rows += one_side(sa, "a")
            elif sb is not None:
                rows += one_side(sb, "b")
    return rows


# The whole diff -------------------------------------------------------------------------


def side_of(snapshot: AgentSnapshot, steps: list[_Step]) -> RunSide:
    report = snapshot.report
    return RunSide(
        run_id=snapshot.run_id, status=snapshot.status, fingerprint=report.agent_version, model=snapshot.spec.model,
        steps=report.step_count or len(steps), tool_calls=[c.name for s in steps for c, _ in s.calls],
        input_tokens=report.total_usage.input_tokens, output_tokens=report.total_usage.output_tokens,
        cost_usd=report.total_cost_usd,
    )


def usage_deltas(a: RunSide, b: RunSide) -> list[Delta]:
    """Tokens, cost and steps of both runs, with B minus A."""
    figures = [("input_tokens", a.input_tokens, b.input_tokens), ("output_tokens", a.output_tokens, b.output_tokens),
               ("total_tokens", a.input_tokens + a.output_tokens, b.input_tokens + b.output_tokens),
               ("cost_usd", a.cost_usd, b.cost_usd), ("steps", a.steps, b.steps),
               ("tool_calls", len(a.tool_calls), len(b.tool_calls))]
    return [Delta(name=name, a=x, b=y, delta=None if x is None or y is None else round(y - x, 9))
            for name, x, y in figures]


def notes_on(snapshot: AgentSnapshot, steps: list[_Step], label: str) -> list[str]:
    """What the alignment could not see of one run."""
    notes = []
    if snapshot.status in LIVE_STATUSES:
        notes.append(f"run {label} ({snapshot.run_id}) is still going ({snapshot.status}): compared on the steps "
                     "it has taken so far")
    taken = sum(1 for s in steps if s.user is None)
    recorded = snapshot.report.step_count
    if recorded > taken:
        notes.append(f"run {label} ({snapshot.run_id}) took {recorded} steps but its conversation holds {taken}: "
                     f"the other {recorded - taken} were compacted into a summary (or handed over), so they are "
                     "compared as that summary; usage and cost count them all")
    return notes


def diff_runs(a: AgentSnapshot, b: AgentSnapshot) -> RunDiff:
    """Run ``a`` and run ``b`` aligned step by step (see the module's doc)."""
    steps_a, steps_b = steps_of(a.messages, a.input_count), steps_of(b.messages, b.input_count)
    side_a, side_b = side_of(a, steps_a), side_of(b, steps_b)
    rows: list[Row] = [compare("input", input_text(a), input_text(b), 0, 0)]
    rows += align(steps_a, steps_b)
    ended_a, ended_b = a.status not in LIVE_STATUSES, b.status not in LIVE_STATUSES
    rows.append(compare("output", output_text(a) if ended_a else "", output_text(b) if ended_b else "", None, None))
    definition = definition_diff(a.spec, b.spec)
    side_a.fingerprint = side_a.fingerprint or definition.a
    side_b.fingerprint = side_b.fingerprint or definition.b
    return RunDiff(
        a=side_a, b=side_b, definition=definition, rows=rows, usage=usage_deltas(side_a, side_b),
        same_tools=side_a.tool_calls == side_b.tool_calls, changed=sum(1 for r in rows if r.type != "same"),
        notes=notes_on(a, steps_a, "A") + notes_on(b, steps_b, "B"),
    )
