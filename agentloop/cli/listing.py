"""Commands that read runs: ``list`` and ``show``. They talk to runs on
``TEMPORAL_ADDRESS`` or the embedded server of a running command; when none
runs, they start the embedded server and a worker for as long as they read
(as ``watch`` and ``export`` do)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from datetime import datetime
from typing import TYPE_CHECKING, Any

from temporalio.service import RPCError

from agentloop.cli.common import RUN_STATUSES, CommandFailed, answer_within, describe_run, say, table
from agentloop.cli.embedded import reading_client
from agentloop.cli.options import positive, run_id
from agentloop.cli.runs.describe import approve_commands, args_json, submit_command, when
from agentloop.shared.base.errors import UserError
from agentloop.shared.runs.report import STEP_UNDER_WAY
from agentloop.shared.runs.result import AgentRunFailed

if TYPE_CHECKING:
    from agentloop.client.agent_client import AgentClient
    from agentloop.client.runs import RunSummary
    from agentloop.shared.runs.report import AgentRunReport
    from agentloop.shared.runs.result import AgentRunResult
    from agentloop.shared.runs.run import RunState


async def cmd_list(args: argparse.Namespace) -> int:
    async with reading_client("list") as client:
        return await _list(client, args)


async def _list(client: AgentClient, args: argparse.Namespace) -> int:
    from temporalio.service import RPCError, RPCStatusCode

    from agentloop.client.runs import runs_query

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


def add_list_parser(sub: Any) -> None:
    """The ``list`` command and its options."""
    listing = sub.add_parser(
        "list", help="list runs, newest first",
        description="List runs, newest first: id, status, agent, model, tools waiting for a decision, start "
                    "time. With no server running, it starts the embedded one on $AGENTLOOP_HOME for as long "
                    "as it reads, as `show` does.",
    )
    listing.add_argument("--status", choices=RUN_STATUSES)
    listing.add_argument("--name", help="agent name (AgentSpec.name)")
    listing.add_argument("--query", metavar="EXTRA",
                         help="extra Temporal list filter, e.g. 'AgentModel=\"openai:gpt-4.1\"'")
    listing.add_argument("--limit", type=positive, default=50, help="most runs to show (default: 50)")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    listing.add_argument("--tree", action="store_true", help="sub-agents' runs under the run that delegated "
                         "to them (top runs newest first)")


def add_show_parser(sub: Any) -> None:
    """The ``show`` command and its options."""
    show = sub.add_parser(
        "show", help="a run's status, usage, pending calls and final text",
        description="Print a run's status, steps, usage, the calls waiting for a decision (with the commands "
                    "that decide them) and its final text. With no server running, it starts the embedded one "
                    "on $AGENTLOOP_HOME for as long as it reads.",
    )
    show.add_argument("run", type=run_id, help="run id")
    show.add_argument("--json", action="store_true", help="the state as one JSON object")
