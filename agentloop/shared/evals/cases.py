"""Eval cases: a recorded run's input, tool results and outcome, or one
line of a dataset file (JSONL, one :class:`EvalCase` per line).

A dataset line is a JSON object; ``agentloop eval save`` writes them and
``EvalCase.model_json_schema()`` is its JSON schema (docs/evals.md). The
least a line holds is ``{"id": "...", "input": "..."}``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agentloop.shared.base.errors import UserError, describe_validation_error
from agentloop.shared.base.messages import Message
from agentloop.shared.definition.pricing import run_cost
from agentloop.shared.definition.spec import AgentSpec
from agentloop.shared.evals.checks import Check
from agentloop.shared.runs.eval_tools import RecordedCall, RecordedDecision
from agentloop.shared.runs.snapshots import AgentSnapshot


class RecordedStats(BaseModel):
    """What the recorded run cost."""

    model_config = ConfigDict(extra="forbid")

    cost_usd: float | None = None
    tokens: int = 0
    steps: int = 0


class EvalCase(BaseModel):
    """One case of an eval: a line of a dataset file.

    Attributes:
        id: The case's name (unique in the eval; letters, digits, ``-_.``).
        input: The run's input: a user instruction, or messages.
        messages: For a case at a later turn of a thread: the thread's
            messages before that turn (the conversation the candidate's run
            starts with, before ``input``).
        turn: The thread's turn the case was recorded at (None: a run's,
            or a thread's first turn from an older snapshot).
        spec: The recorded run's spec (the candidate is this with overrides
            when the eval names no spec of its own).
        expected_text: The recorded (or wanted) final answer text.
        expected_output: The recorded (or wanted) typed output.
        tools: The tools the recorded run called, in order.
        recorded_calls: The recorded tool calls with their results.
        decisions: The recorded approval decisions.
        recorded: The recorded run's cost, tokens and steps.
        recorded_run_id: The run the case came from.
        checks: This case's own checks (the eval's when None).
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
    input: list[Message] = Field(min_length=1)
    messages: list[Message] = Field(default_factory=list)
    turn: int | None = Field(default=None, ge=1)
    spec: AgentSpec | None = None
    expected_text: str | None = None
    expected_output: Any = None
    tools: list[str] | None = None
    recorded_calls: list[RecordedCall] = Field(default_factory=list)
    decisions: list[RecordedDecision] = Field(default_factory=list)
    recorded: RecordedStats | None = None
    recorded_run_id: str | None = None
    checks: list[Check] | None = None

    @field_validator("input", mode="before")
    @classmethod
    def _text_input(cls, value: Any) -> Any:
        return [Message.user(value).model_dump()] if isinstance(value, str) else value


def case_id_of(run_id: str) -> str:
    """A case id from a run id (characters a case id cannot hold become ``-``)."""
    cleaned = "".join(c if c.isalnum() or c in "_.-" else "-" for c in run_id).strip("-._")
    return cleaned[:200] or "case"


def _recorded_tools(messages: list[Message]) -> tuple[list[str], list[RecordedCall], set[str]]:
    """The tools called in ``messages`` in order, the calls with their
    results, and the call ids."""
    results = {r.id: r for m in messages for r in m.tool_results}
    recorded: list[RecordedCall] = []
    tools: list[str] = []
    ids: set[str] = set()
    for message in messages:
        for call in message.tool_calls:
            tools.append(call.name)
            ids.add(call.id)
            result = results.get(call.id)
            if result is not None:
                recorded.append(RecordedCall(tool=call.name, arguments=call.arguments, content=result.content,
                                             is_error=result.is_error))
    return tools, recorded, ids


def _decisions(snapshot: AgentSnapshot, call_ids: set[str] | None = None) -> list[RecordedDecision]:
    """The operators' decisions of the recorded run (of the calls ``call_ids`` only, when given)."""
    return [
        RecordedDecision(tool=c.tool_name, arguments=c.arguments, reason=None,
                         decision="approve" if c.decision == "override" else c.decision,
                         result=None)
        for step in snapshot.report.steps for c in step.tool_calls
        if c.decision in ("approve", "deny", "skip", "override") and not c.arguments_cut
        and (call_ids is None or c.call_id in call_ids)
    ]


def case_from_snapshot(snapshot: AgentSnapshot, case_id: str | None = None) -> EvalCase:
    """The case of a recorded run: its input, its tool calls with their
    results, its approval decisions, its answer and what it cost."""
    count = snapshot.input_count or 1
    messages = snapshot.messages
    tools, recorded, _ = _recorded_tools(messages[count:])
    report = snapshot.report
    return EvalCase(
        id=case_id or case_id_of(snapshot.run_id),
        input=messages[:count],
        spec=snapshot.spec,
        expected_text=report.final_text or None,
        expected_output=report.output,
        tools=tools,
        recorded_calls=recorded,
        decisions=_decisions(snapshot),
        recorded=RecordedStats(cost_usd=report.total_cost_usd, tokens=report.total_usage.total_tokens,
                               steps=report.step_count),
        recorded_run_id=snapshot.run_id,
    )


def turn_case_id(run_id: str, turn: int) -> str:
    """The id of the case at a thread's turn: ``<thread>.turn-<n>``."""
    return f"{case_id_of(run_id)[:190]}.turn-{turn}"


def case_at_turn(snapshot: AgentSnapshot, turn: int) -> EvalCase:
    """The case at turn ``turn`` of a thread's snapshot: the thread's
    messages before the turn, the turn's message, its tool calls with their
    results and decisions, its answer and what it cost.

    Raises:
        UserError: The snapshot does not hold that turn, or the turn did not complete.
    """
    result = next((t for t in snapshot.turns if t.turn == turn), None)
    where = f"thread {snapshot.run_id}"
    if result is None:
        kept = ", ".join(str(t.turn) for t in snapshot.turns) or "none"
        raise UserError(f"{where} holds no turn {turn} (turns kept: {kept})")
    if result.status != "completed":
        raise UserError(f"{where}, turn {turn} is {result.status}: only a completed turn is a case")
    messages, first, end = snapshot.messages, result.first_message, result.end_message
    if not 0 <= first < end <= len(messages) or messages[first].role != "user":
        raise UserError(f"{where}, turn {turn}: its messages are no longer in the thread's conversation "
                        "(compacted or cut); take the case from a snapshot exported before")
    # Turn 1 answers the run's input (all of it); a later turn, its one message.
    history = [] if turn == 1 else messages[:first]
    start = max(snapshot.input_count or 1, first + 1) if turn == 1 else first + 1
    tools, recorded, ids = _recorded_tools(messages[start:end])
    return EvalCase(
        id=turn_case_id(snapshot.run_id, turn), input=messages[len(history):start], messages=history, turn=turn,
        spec=snapshot.spec, expected_text=result.final_text or None, expected_output=result.output, tools=tools,
        recorded_calls=recorded, decisions=_decisions(snapshot, ids),
        recorded=RecordedStats(cost_usd=run_cost(result.usage, snapshot.spec.model, snapshot.spec.budget),
                               tokens=result.usage.total_tokens, steps=result.steps),
        recorded_run_id=snapshot.run_id,
    )


def cases_from_snapshot(snapshot: AgentSnapshot, turn: int | None = None) -> list[EvalCase]:
    """The cases of a recorded run: one for a run; for a thread, one per
    completed turn (or only turn ``turn``). A thread's snapshot from before
    version 1.1 holds no turns: its one case is its first turn, as a run's.

    Raises:
        UserError: ``turn`` is given and the snapshot is not a thread's, or
            does not hold that completed turn.
    """
    if snapshot.thread_id is None or not snapshot.turns:
        if turn is not None and turn != 1:
            raise UserError(f"run {snapshot.run_id} is not a thread (or its snapshot holds no turns): "
                            f"it has no turn {turn}")
        return [case_from_snapshot(snapshot)]
    if turn is not None:
        return [case_at_turn(snapshot, turn)]
    return [case_at_turn(snapshot, t.turn) for t in snapshot.turns if t.status == "completed"]


def read_dataset(lines: Iterable[str], *, source: str = "the dataset") -> list[EvalCase]:
    """The cases of a JSONL dataset (blank lines and ``#`` comments skipped).

    Raises:
        UserError: A line is not JSON or not a case (the message names the line).
    """
    cases: list[EvalCase] = []
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            cases.append(EvalCase.model_validate(json.loads(line)))
        except json.JSONDecodeError as exc:
            raise UserError(f"{source}, line {number}: not JSON ({exc.msg})") from None
        except ValidationError as exc:
            raise UserError(f"{source}, line {number}: not an eval case: {describe_validation_error(exc)}") from None
    return cases


def dataset_line(case: EvalCase) -> str:
    """One line of a dataset file."""
    return case.model_dump_json(exclude_none=True)


def unique_ids(cases: list[EvalCase]) -> list[EvalCase]:
    """The cases, a repeated id made unique with a suffix (``-2``, ``-3``...)."""
    seen: dict[str, int] = {}
    out = []
    for case in cases:
        n = seen.get(case.id, 0) + 1
        seen[case.id] = n
        out.append(case if n == 1 else case.model_copy(update={"id": f"{case.id}-{n}"}))
    return out
