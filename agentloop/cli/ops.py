"""The ops commands: ``approve``, ``submit``, ``stop``, ``cancel``, ``list``
and ``show``. They talk to runs on ``TEMPORAL_ADDRESS`` or the embedded
server of a running command; the read commands ``list`` and ``show`` (like
``watch`` and ``export``) start the embedded server and a worker when none
runs, the others never start anything."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import json
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from temporalio.service import RPCError

from agentloop.cli.common import CommandFailed, answer_within, describe_run, running_handle, say, table
from agentloop.cli.embedded import ops_client, reading_client
from agentloop.shared.runs.result import AgentRunFailed
from agentloop.shared.base.errors import UserError
from agentloop.shared.runs.report import STEP_UNDER_WAY
from agentloop.cli.render import approve_commands, args_json, submit_command, when

if TYPE_CHECKING:
    from agentloop.client.agent_client import AgentClient, RunSummary
    from agentloop.shared.runs.report import AgentRunReport
    from agentloop.shared.runs.result import AgentRunResult
    from agentloop.shared.runs.run import RunState


def _read_output(text: str, stdin_used: list[bool]) -> str:
    if text != "-":
        return text
    if stdin_used:
        raise UserError("only one OUTPUT can be '-' (stdin); give the others as text")
    stdin_used.append(True)
    return sys.stdin.read()


def _default_by() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name in this environment
        return "cli"


def _still_pending(ids: list[str]) -> str:
    if not ids:
        return "nothing else is pending; the run goes on"
    return f"still pending: {', '.join(ids)}"


async def cmd_approve(args: argparse.Namespace) -> int:
    from agentloop.shared.definition.approvals import ApprovalDecision

    if args.deny and args.result is not None:
        raise UserError("--deny takes --reason, not --result; to answer the model with your own text "
                        "instead of running the tool, use --skip --result TEXT (or --result TEXT alone "
                        "to approve with an override)")
    decision = "deny" if args.deny else "skip" if args.skip else "approve"
    client = await ops_client()
    handle = await running_handle(client, args.run, "decisions")
    accepted = await answer_within(
        handle.decide(ApprovalDecision(
            call_id=args.call, decision=decision, reason=args.reason, result=args.result,
            by=args.by or _default_by(),
        )),
        "the decision", args.run,
    )
    if decision == "deny":
        done = f"denied {args.call} in run {args.run}" + (f" ({args.reason})" if args.reason else "")
    elif decision == "skip":
        done = f"skipped {args.call} in run {args.run}" + (
            ": the model sees your --result" if args.result is not None else "")
    elif args.result is not None:
        done = (f"approved {args.call} in run {args.run} with an override: the tool does not run, the "
                "model sees your --result")
    else:
        done = f"approved {args.call} in run {args.run}"
    print(f"{done}; {_still_pending(accepted.still_pending)}")
    return 0


async def cmd_submit(args: argparse.Namespace) -> int:
    from agentloop.shared.definition.approvals import ToolOutput

    pairs: list[tuple[str, str]] = []
    if args.call is not None:
        if args.output_text is None:
            raise UserError(f"give the output of {args.call} after it (or '-' to read it from stdin)")
        pairs.append((args.call, args.output_text))
    pairs += [tuple(p) for p in args.outputs]  # type: ignore[misc]
    if not pairs:
        raise UserError("give at least one output: agentloop submit RUN CALL OUTPUT "
                        "[--output CALL OUTPUT ...]")
    stdin_used: list[bool] = []
    outputs = [ToolOutput(call_id=c, output=_read_output(o, stdin_used), is_error=args.error) for c, o in pairs]
    client = await ops_client()
    handle = await running_handle(client, args.run, "tool outputs")
    accepted = await answer_within(handle.submit_tool_outputs(outputs), "the tool outputs", args.run)
    kind = "error output" if args.error else "output"
    print(f"submitted {kind} for {', '.join(accepted.call_ids)} in run {args.run}; "
          f"{_still_pending(accepted.still_pending)}")
    return 0


#: How long ``stop`` and ``cancel`` watch for a worker to take their request.
PICKUP_SECONDS = 5.0


def request_taken(event_types: Sequence[int], request: int) -> bool:
    """Whether a worker took a request recorded in a run's history: a
    workflow task started after the last event of type ``request`` (the
    cancel request, or the signal). A request that arrives while a task is
    under way is recorded after that task, so it counts only once read."""
    from temporalio.api.enums.v1 import EventType

    last = max((i for i, kind in enumerate(event_types) if kind == request), default=None)
    return last is not None and EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED in event_types[last + 1:]


async def _taken_within(client: AgentClient, run_id: str, request: int, seconds: float) -> tuple[bool, str]:
    """Whether a worker took the request within ``seconds`` (or the run
    ended), and the run's task queue."""
    from temporalio.client import WorkflowExecutionStatus

    handle = client.temporal.get_workflow_handle(run_id)
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        description = await handle.describe()
        if description.status != WorkflowExecutionStatus.RUNNING:
            return True, description.task_queue
        kinds = [event.event_type async for event in handle.fetch_history_events()]
        if request_taken(kinds, request):
            return True, description.task_queue
        if asyncio.get_running_loop().time() >= deadline:
            return False, description.task_queue
        await asyncio.sleep(0.25)


def untaken(run_id: str, what: str, task_queue: str, seconds: float) -> str:
    """What ``stop`` or ``cancel`` says when no worker took its request."""
    return (f"the {what} of run {run_id} is recorded on the server, but no worker on task queue {task_queue!r} "
            f"picked it up within {seconds:g}s, so the run has not ended: a worker polling {task_queue!r} "
            f"(`agentloop worker`, `agentloop dev`, or the program that started the run) carries it out when it "
            f"comes; to end the run now without one, `agentloop cancel {run_id} --terminate` (or "
            f"`temporal workflow terminate --workflow-id {run_id}`)")


async def cmd_stop(args: argparse.Namespace) -> int:
    from temporalio.api.enums.v1 import EventType

    client = await ops_client()
    handle = await running_handle(client, args.run, "stop request")
    await handle.stop(args.reason)
    taken, queue = await _taken_within(client, args.run, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
                                       PICKUP_SECONDS)
    if not taken:
        raise CommandFailed(untaken(args.run, "stop request", queue, PICKUP_SECONDS))
    print(f"asked run {args.run} to stop: it ends `stopped` once its current step is done "
          "(calls waiting for a decision are answered as stopped)")
    return 0


async def cmd_cancel(args: argparse.Namespace) -> int:
    from temporalio.api.enums.v1 import EventType

    client = await ops_client()
    handle = await running_handle(client, args.run, "cancellation")
    if args.terminate:
        await handle.workflow_handle.terminate(reason="agentloop cancel --terminate")
        print(f"terminated run {args.run}: it ended at once on the server, without a worker and without "
              f"the cleanup a cancellation does; `agentloop show {args.run}` shows its status")
        return 0
    await handle.cancel()
    taken, queue = await _taken_within(client, args.run, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED,
                                       PICKUP_SECONDS)
    if not taken:
        raise CommandFailed(untaken(args.run, "cancellation", queue, PICKUP_SECONDS))
    print(f"cancelled run {args.run}: its running LLM calls and tools are cancelled and it ends "
          f"`cancelled`; `agentloop show {args.run}` shows where it stopped")
    return 0


async def cmd_list(args: argparse.Namespace) -> int:
    async with reading_client("list") as client:
        return await _list(client, args)


async def _list(client: AgentClient, args: argparse.Namespace) -> int:
    from temporalio.service import RPCError, RPCStatusCode

    from agentloop.client.agent_client import runs_query

    try:
        runs = await client.list_runs(status=args.status, name=args.name, query=args.query, limit=args.limit)
    except RPCError as err:
        if err.status == RPCStatusCode.INVALID_ARGUMENT:
            raise UserError(f"the server rejected the query {runs_query(args.status, args.name, args.query)!r}: "
                            f"{err.message}; fix --query (Temporal's list filter syntax, e.g. "
                            "'AgentModel=\"openai:gpt-4.1\"')") from None
        raise
    placed = tree_order(runs) if args.tree else [(0, run) for run in runs]
    if args.json:
        for _, run in placed:
            print(run.model_dump_json())
        return 0
    if not runs:
        print("no runs match", file=sys.stderr)
        return 0
    rows = [["RUN ID", "STATUS", "AGENT", "MODEL", "PENDING TOOLS", "STARTED"]]
    rows += [[("  " * (depth - 1) + "└ " if depth else "") + r.run_id, str(r.status), r.agent_name or "-",
              r.model or "-", ",".join(r.pending_tools) or "-", when(r.started_at)] for depth, r in placed]
    print("\n".join(table(rows)))
    return 0


def tree_order(runs: list[RunSummary]) -> list[tuple[int, RunSummary]]:
    """Runs as a tree, each with its depth: every run listed whose parent is
    not (a top run, or a child whose parent is past --limit) in the order
    given, each followed by its children, oldest first, recursively."""
    listed = {r.run_id for r in runs}
    children: dict[str, list[RunSummary]] = {}
    for run in runs:
        if run.parent_run_id in listed:
            children.setdefault(run.parent_run_id, []).append(run)
    placed: list[tuple[int, RunSummary]] = []

    def place(run: RunSummary, depth: int) -> None:
        placed.append((depth, run))
        kids = children.get(run.run_id, [])
        for child in sorted(kids, key=lambda r: (r.started_at is None, r.started_at or 0, r.run_id)):
            place(child, depth + 1)

    for run in runs:
        if run.parent_run_id not in listed:
            place(run, 0)
    return placed


async def _ended_state(client: AgentClient, run_id: str,
                       description: Any) -> tuple[RunState, str, str | None, AgentRunReport | None]:
    """A finished run's state, final text, and a note when steps and usage
    are unknown. They come from the run's result; a cancelled (or
    terminated) run has none, so they come from its ``state`` query, which a
    worker answers."""
    from agentloop.shared.runs.run import RunState
    from agentloop.shared.runs.search_attributes import AGENT_MODEL, AGENT_NAME

    attrs = description.typed_search_attributes
    state = RunState(run_id=run_id, status="failed", agent_name=attrs.get(AGENT_NAME) or "",
                     model=attrs.get(AGENT_MODEL) or "")
    result: AgentRunResult | None
    handle = client.get_handle(run_id)
    try:
        result = await handle.result()
    except AgentRunFailed as failed:
        result = failed.result
        state.status = "cancelled" if failed.reason == "cancelled" else "failed"
        state.reason = failed.reason  # type: ignore[assignment]
        state.error = None if failed.reason == "cancelled" else str(failed)
    if result is not None:
        state.status, state.reason, state.error = result.status, result.reason, result.error
        state.step, state.usage = result.report.step_count, result.usage
        state.steps_taken = result.report.step_count
        return state, result.final_text, None, result.report
    try:
        queried = await answer_within(handle.state(), "the state query", run_id)
    except (CommandFailed, RPCError) as exc:
        why = exc.message if isinstance(exc, RPCError) else "no worker answered"
        return state, "", (f"steps and usage unknown: a {state.status} run keeps them in its workflow state, "
                           f"which a worker on its task queue reads ({why})"), None
    state.step, state.usage, state.steps_taken = queried.step, queried.usage, queried.steps_taken
    # ``step`` counts the steps finished; a run cancelled while its calls
    # waited or ran had taken one more (its LLM answered, its request
    # counted): ``steps_taken`` counts it (from a worker that predates it,
    # each step taken left one assistant message).
    if not state.steps_taken:
        with contextlib.suppress(CommandFailed, RPCError):
            messages = await answer_within(handle.messages(), "the messages query", run_id)
            state.steps_taken = max(state.step, sum(1 for m in messages if m.role == "assistant"))
    state.pending_approvals, state.pending_actions = [], []
    state.rejected_signals = queried.rejected_signals
    report = None
    with contextlib.suppress(CommandFailed, RPCError):
        report = await answer_within(handle.report(), "the report query", run_id)
    return state, "", None, report


async def cmd_show(args: argparse.Namespace) -> int:
    async with reading_client("show") as client:
        return await _show(client, args)


async def _show(client: AgentClient, args: argparse.Namespace) -> int:
    from temporalio.client import WorkflowExecutionStatus

    description = await describe_run(client, args.run)
    final_text, note, report = "", None, None
    if description.status == WorkflowExecutionStatus.RUNNING:
        handle = client.get_handle(args.run)
        state = await answer_within(handle.state(), "the state query", args.run)
        with contextlib.suppress(CommandFailed, RPCError):  # a worker answered the state: it answers this too
            report = await answer_within(handle.report(), "the report query", args.run)
    else:
        state, final_text, note, report = await _ended_state(client, args.run, description)
    if args.json:
        print(json.dumps({**state.model_dump(mode="json"), "final_text": final_text}, ensure_ascii=False))
        if note:
            say(f"agentloop: {note}")
        return 0
    for line in describe_state(state, final_text, started=description.start_time, closed=description.close_time,
                               unknown=note, report=report):
        print(line)
    return 0


def duration_text(ms: float) -> str:
    """A duration for people: ``340 ms``, ``2.5 s``, ``8 min 12 s``, ``2 h 05 min``."""
    if ms < 1000:
        return f"{round(ms)} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s" if seconds < 10 else f"{round(seconds)} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest:02d} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def describe_state(state: RunState, final_text: str = "", *, started: datetime | None = None,
                   closed: datetime | None = None, unknown: str | None = None,
                   report: AgentRunReport | None = None) -> list[str]:
    """What ``agentloop show`` prints about a run; ``unknown`` says why its
    steps and usage are not known (printed instead of zeros); ``report``
    gives the time the LLM, the tools and the approvals took."""
    lines = [f"run {state.run_id}"]
    if state.agent_name or state.model:
        lines.append(f"  agent:    {state.agent_name or '-'} on {state.model or '-'}")
    status = state.status + (f" ({state.reason})" if state.reason and state.reason not in ("done", state.status)
                             else "")
    if state.stop_requested and state.status not in ("stopped", "completed", "failed", "cancelled"):
        status += ", stop requested"
    lines.append(f"  status:   {status}")
    if state.waiting_on:
        lines.append(f"  {state.waiting_on}")
    if state.error:
        lines.append(f"  error:    {state.error}")
    if unknown:
        lines.append(f"  steps:    ? ({unknown})")
    elif state.status in STEP_UNDER_WAY:
        # Steps are numbered from 1; RunState.step counts the steps done, the one under way is the next.
        lines.append(f"  step:     {state.current_step or state.step + 1} (under way)")
    else:
        lines.append(f"  steps:    {max(state.steps_taken, state.step)}")
    usage = state.usage
    if not unknown:
        lines.append(f"  usage:    {usage.input_tokens} in / {usage.output_tokens} out tokens, "
                     f"{usage.requests} LLM request{'' if usage.requests == 1 else 's'}")
    if report is not None:
        lines.append(f"  time:     LLM {duration_text(report.total_llm_time_ms)}, tools "
                     f"{duration_text(report.total_tool_time_ms)}, waiting for approval "
                     f"{duration_text(report.total_approval_wait_ms)}")
    if started:
        lines.append(f"  started:  {when(started)}" + (f", ended {when(closed)}" if closed else ""))
    for call in state.running_tool_calls:
        lines.append(f"  running:  {call.name} {args_json(call.arguments, 100)} (call {call.id})")
    if state.pending_approvals:
        lines.append("\npending approvals:")
        for a in state.pending_approvals:
            lines.append(f"  {a.call_id}  {a.tool_name} {args_json(a.arguments)}")
            lines.append(f"    step {a.step}, asked at {when(a.asked_at)}"
                         + (f", denied automatically at {when(a.expires_at)}" if a.expires_at else ""))
            if a.reason:
                lines.append(f"    why: {a.reason}")
            lines += [f"    {command}" for command in approve_commands(state.run_id, a.call_id)]
    if state.pending_actions:
        lines.append("\npending actions (the client runs these and submits their outputs):")
        for action in state.pending_actions:
            lines.append(f"  {action.call_id}  {action.tool_name} {args_json(action.arguments)}")
            lines.append(f"    step {action.step}, asked at {when(action.asked_at)}, {action.reason}")
        lines.append(f"    {submit_command(state.run_id, state.pending_actions)}   (OUTPUT '-' reads stdin)")
    if state.rejected_signals:
        lines.append("\nrejected signals (newest last):")
        lines += [f"  {note}" for note in state.rejected_signals]
    if final_text:
        lines += ["\nfinal text:", final_text]
    return lines
