"""Evals from backend code (docs/evals.md): cases from recorded runs, the
candidate's spec, and the eval workflow (start, progress, report, list).

    cases = await cases_from_query(client, 'AgentName="support"', limit=50)
    handle = await start_eval(client, cases, overrides=Overrides(system_prompt="Be brief."))
    report = await handle.result()
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ValidationError
from temporalio.client import WorkflowExecutionStatus, WorkflowHandle
from temporalio.service import RPCError

from agentloop.client.agent_client import AgentClient
from agentloop.shared.base.errors import UserError, describe_validation_error
from agentloop.shared.definition.spec import AgentSpec
from agentloop.shared.evals.cases import EvalCase, cases_from_snapshot, unique_ids
from agentloop.shared.evals.report import (
    EVAL_WORKFLOW_NAME,
    MAX_CASES,
    MAX_EVAL_INPUT_BYTES,
    EvalCaseRun,
    EvalInput,
    EvalProgress,
    EvalReport,
)
from agentloop.shared.runs.result import AgentRunResult
from agentloop.shared.runs.run import AgentRunInput
from agentloop.shared.runs.search_attributes import AGENT_STATUS, AGENT_THREAD
from agentloop.shared.runs.snapshots import AgentSnapshot


def new_eval_id() -> str:
    """A fresh eval id."""
    return f"eval-{uuid.uuid4().hex[:12]}"


@dataclass
class Overrides:
    """Changes to the recorded spec (or the candidate's): ``--model``,
    ``--prompt-file``, ``--set key=value`` (a dotted key reaches into a
    mapping; a value that parses as JSON is that JSON, else a string)."""

    model: str | None = None
    system_prompt: str | None = None
    sets: list[str] = field(default_factory=list)

    def describe(self) -> str:
        parts = ([f"model={self.model}"] if self.model else []) + (
            ["system_prompt changed"] if self.system_prompt is not None else []) + self.sets
        return ", ".join(parts)


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def apply_overrides(spec: AgentSpec, overrides: Overrides) -> AgentSpec:
    """``spec`` with the overrides.

    Raises:
        UserError: A ``--set`` without ``=``, or a result that is not a valid spec.
    """
    data = spec.model_dump(mode="json", exclude_unset=True)
    if overrides.model:
        data["model"] = overrides.model
    if overrides.system_prompt is not None:
        data["system_prompt"] = overrides.system_prompt
    for item in overrides.sets:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise UserError(f"--set {item!r}: give KEY=VALUE, e.g. --set max_steps=8")
        *path, last = key.split(".")
        target = data
        for part in path:
            target = target.setdefault(part, {})
            if not isinstance(target, dict):
                raise UserError(f"--set {item!r}: {part} is not a mapping")
        target[last] = _parse_value(value)
    try:
        return AgentSpec.model_validate(data)
    except ValidationError as exc:
        raise UserError(f"the candidate spec is not valid: {describe_validation_error(exc)}") from None


def case_runs(cases: Sequence[EvalCase], *, spec: AgentSpec | None = None,
              overrides: Overrides | None = None) -> tuple[list[EvalCaseRun], list[AgentSpec]]:
    """Each case (without its recorded spec) with its candidate's spec:
    ``spec`` (or the case's recorded spec) with the overrides; and the specs,
    each once.

    Raises:
        UserError: A case has no spec and no ``spec`` was given.
    """
    runs: list[EvalCaseRun] = []
    specs: dict[str, int] = {}
    ordered: list[AgentSpec] = []
    for case in unique_ids(list(cases)):
        base = spec or case.spec
        if base is None:
            raise UserError(f"case {case.id} holds no recorded spec: give the candidate's (--spec or --agent)")
        candidate = apply_overrides(base, overrides) if overrides else base
        key = candidate.model_dump_json()
        if key not in specs:
            specs[key] = len(ordered)
            ordered.append(candidate)
        runs.append(EvalCaseRun(case=case.model_copy(update={"spec": None}), spec=specs[key]))
    return runs, ordered


async def snapshot_from_history(client: AgentClient, run_id: str) -> AgentSnapshot | None:
    """A completed run's snapshot read from its history's first and last
    events (its input and its result), without asking a worker to replay it
    as the ``export`` query does; None for a run its history does not answer
    alone (not completed, a thread, continued as new, restored or forked, or
    a result that left its messages or its report's steps out): export it."""
    history = await client.temporal.get_workflow_handle(run_id).fetch_history()
    if len(history.events) < 2:
        return None
    first, last = history.events[0], history.events[-1]
    if not (first.HasField("workflow_execution_started_event_attributes")
            and last.HasField("workflow_execution_completed_event_attributes")):
        return None
    converter = client.temporal.data_converter
    try:
        [raw_input] = await converter.decode(first.workflow_execution_started_event_attributes.input.payloads)
        [raw_result] = await converter.decode(last.workflow_execution_completed_event_attributes.result.payloads)
        run_input, result = AgentRunInput.model_validate(raw_input), AgentRunResult.model_validate(raw_result)
    except Exception:  # not this version's input or result, or a codec this client lacks: the worker knows
        return None
    if (run_input.carry or run_input.thread or run_input.origin or result.messages_omitted
            or result.report_steps_omitted or result.status != "completed"):
        return None
    ended = result.report.completed_at or datetime.now(UTC)
    return AgentSnapshot(run_id=run_id, status=result.status, exported_at=ended, spec=run_input.spec,
                         messages=[*run_input.messages, *result.messages], input_count=len(run_input.messages),
                         report=result.report, usage=result.usage)


def run_and_turn(run_id: str) -> tuple[str, int | None]:
    """A run id, or ``<thread id>~<turn>`` (a thread's turn, as the A2A door
    names it): the run and the turn (None: every completed turn of a thread).

    Raises:
        UserError: What follows ``~`` is not a turn number.
    """
    head, tilde, tail = run_id.rpartition("~")
    if not tilde:
        return run_id, None
    if not head or not tail.isdigit() or int(tail) < 1:
        raise UserError(f"{run_id!r}: give RUN or THREAD~TURN (a turn number from 1), e.g. support-42~3")
    return head, int(tail)


async def cases_from_runs(client: AgentClient, run_ids: Sequence[str], *, turn: int | None = None,
                          at_once: int = 10) -> list[EvalCase]:
    """The cases of recorded runs, in order (each exported with the
    ``export`` query, ``at_once`` at a time). A thread gives one case per
    completed turn, each starting with the thread's messages before it;
    ``<thread id>~<n>`` (or ``turn``) takes turn ``n`` only.

    Raises:
        UserError: A run does not exist or cannot be exported, or has no such turn.
    """
    import asyncio

    gate = asyncio.Semaphore(at_once)
    wanted = [run_and_turn(run_id) for run_id in run_ids]

    async def one(run_id: str, its_turn: int | None) -> list[EvalCase]:
        async with gate:
            try:
                snapshot = await snapshot_from_history(client, run_id)
                if snapshot is None:
                    snapshot = await client.get_handle(run_id).export()
            except RPCError as err:
                raise UserError(f"run {run_id} cannot be exported: {err.message}") from None
        return cases_from_snapshot(snapshot, its_turn if its_turn is not None else turn)

    found = await asyncio.gather(*(one(run_id, its_turn) for run_id, its_turn in wanted))
    return [case for cases in found for case in cases]


async def cases_from_query(client: AgentClient, query: str, *, limit: int = 100,
                           turn: int | None = None) -> list[EvalCase]:
    """The cases of the completed runs and threads (idle, or stopped) a visibility query
    finds (newest first, at most ``limit`` runs; a thread gives a case per
    completed turn, or turn ``turn`` only); runs of earlier evals are left out."""
    threads = f'({AGENT_THREAD.name} IS NOT NULL AND {AGENT_STATUS.name} IN ("idle", "stopped"))'
    runs = await client.list_runs(
        query=f'({query}) AND AgentEval IS NULL AND ({AGENT_STATUS.name}="completed" OR {threads})', limit=limit)
    return await cases_from_runs(client, [r.run_id for r in runs], turn=turn)


async def start_eval(
    client: AgentClient, cases: Sequence[EvalCase], *, spec: AgentSpec | None = None,
    overrides: Overrides | None = None, checks: Sequence[Any] = (), concurrency: int = 10,
    task_queue: str | None = None, policy: str = "recorded", fallback: str = "refuse",
    tools: dict[str, str] | None = None, eval_id: str | None = None, candidate: str = "",
) -> WorkflowHandle[Any, EvalReport]:
    """Start an eval of ``cases`` (see :class:`EvalInput`) on the client's
    task queue; its case runs on ``task_queue`` (default: the same).

    Raises:
        UserError: No cases, more than ``MAX_CASES``, or an invalid option.
    """
    if not cases:
        raise UserError("the eval has no cases: check the query, the run ids or the dataset")
    if len(cases) > MAX_CASES:
        raise UserError(f"{len(cases)} cases: an eval holds at most {MAX_CASES}; split the suite")
    eval_id = eval_id or new_eval_id()
    runs, specs = case_runs(cases, spec=spec, overrides=overrides)
    try:
        input = EvalInput(eval_id=eval_id, cases=runs, specs=specs, checks=list(checks), concurrency=concurrency,
                          task_queue=task_queue, policy=policy, fallback=fallback, tools=tools or {},  # type: ignore[arg-type]
                          candidate=candidate or (overrides.describe() if overrides else "") or "recorded spec")
    except ValidationError as exc:
        raise UserError(f"the eval's options are not valid: {describe_validation_error(exc)}") from None
    size = len(input.model_dump_json().encode())
    if size > MAX_EVAL_INPUT_BYTES:
        raise UserError(f"the eval's {len(cases)} cases come to {size / 1e6:.1f} MB with their recorded tool "
                        f"results; an eval's input is at most {MAX_EVAL_INPUT_BYTES / 1e6:.1f} MB: split the suite "
                        "into several evals")
    return await client.temporal.start_workflow(
        EVAL_WORKFLOW_NAME, input, id=eval_id, task_queue=client.task_queue, result_type=EvalReport,
        static_summary=f"eval of {len(cases)} cases: {input.candidate}"[:200])


def eval_handle(client: AgentClient, eval_id: str) -> WorkflowHandle[Any, EvalReport]:
    return client.temporal.get_workflow_handle(eval_id, result_type=EvalReport)


async def eval_progress(client: AgentClient, eval_id: str) -> EvalProgress | None:
    """The cases an eval has done so far (query ``progress``)."""
    return await eval_handle(client, eval_id).query("progress", result_type=EvalProgress)


class EvalSummary(BaseModel):
    """One eval in a list."""

    eval_id: str
    status: str
    started_at: datetime | None = None
    closed_at: datetime | None = None
    summary: str = ""


async def list_evals(client: AgentClient, *, limit: int = 50) -> list[EvalSummary]:
    """Evals, newest first."""
    out = []
    async for execution in client.temporal.list_workflows(f'WorkflowType="{EVAL_WORKFLOW_NAME}"', limit=limit):
        status = execution.status.name.lower() if isinstance(execution.status, WorkflowExecutionStatus) else "unknown"
        out.append(EvalSummary(eval_id=execution.id, status=status, started_at=execution.start_time,
                               closed_at=execution.close_time))
    return out


async def eval_report(client: AgentClient, eval_id: str) -> tuple[str, EvalReport | EvalProgress | None]:
    """An eval's status (``running``, ``completed``, ``failed``,
    ``terminated``...) and its report when it has completed, else its
    progress while it runs (None once it ended otherwise)."""
    handle = eval_handle(client, eval_id)
    description = await handle.describe()
    status = description.status.name.lower() if description.status is not None else "unknown"
    if description.status == WorkflowExecutionStatus.COMPLETED:
        return status, await handle.result()
    if description.status == WorkflowExecutionStatus.RUNNING:
        return status, await eval_progress(client, eval_id)
    return status, None
