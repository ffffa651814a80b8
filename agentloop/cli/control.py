"""Commands that act on a run: ``approve``, ``submit``, ``stop`` and
``cancel``. They talk to runs on ``TEMPORAL_ADDRESS`` or the embedded server
of a running command, and never start anything."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentloop.cli.common import CommandFailed, answer_within, running_handle
from agentloop.cli.embedded import ops_client
from agentloop.cli.options import run_id
from agentloop.shared.base.errors import UserError

if TYPE_CHECKING:
    from agentloop.client.agent_client import AgentClient


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
        handle.decide(ApprovalDecision.model_validate({
            "call_id": args.call, "decision": decision, "reason": args.reason, "result": args.result,
            "by": args.by or _default_by(),
        })),
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
    pairs += [(call, text) for call, text in args.outputs]
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


def add_approve_parser(sub: Any) -> None:
    """The ``approve`` command and its options."""
    approve = sub.add_parser(
        "approve", help="decide a call waiting for approval (approve, --deny or --skip)",
        description="Decide a call waiting for approval. `agentloop show RUN` lists the pending calls.",
    )
    approve.add_argument("run", type=run_id, help="run id")
    approve.add_argument("call", help="the pending call's id")
    choice = approve.add_mutually_exclusive_group()
    choice.add_argument("--deny", action="store_true", help="do not run it; the model hears it was denied")
    choice.add_argument("--skip", action="store_true",
                        help="do not run it; the model gets --result, or a note that it was skipped")
    approve.add_argument("--reason", help="why; a denial's reason reaches the model")
    approve.add_argument("--result", help="answer the model with this text instead of running the tool")
    approve.add_argument("--by", help="who decided, kept in the run report (default: your user name)")


def add_submit_parser(sub: Any) -> None:
    """The ``submit`` command and its options."""
    submit = sub.add_parser(
        "submit", help="submit the outputs of calls the client runs (requires_action)",
        description="Answer every call the run waits for in one go. OUTPUT '-' reads it from stdin.",
    )
    submit.add_argument("run", type=run_id, help="run id")
    submit.add_argument("call", nargs="?", help="a pending call's id")
    submit.add_argument("output_text", nargs="?", metavar="output", help="its output ('-': read stdin)")
    submit.add_argument("--output", dest="outputs", nargs=2, action="append", default=[],
                        metavar=("CALL", "OUTPUT"), help="another call's output; repeatable")
    submit.add_argument("--error", action="store_true", help="the outputs are errors (the calls failed)")


def add_stop_parser(sub: Any) -> None:
    """The ``stop`` command and its options."""
    stop = sub.add_parser(
        "stop", help="end a run `stopped` after its current step",
        description="Ask a run to end `stopped` once its current step is done; calls waiting for a decision "
                    "are answered as stopped. A worker on the run's task queue carries it out: when none picks "
                    "the request up within a few seconds, the command says so and names the queue.",
    )
    stop.add_argument("run", type=run_id, help="run id")
    stop.add_argument("--reason", help="why, kept in the run's report")


def add_cancel_parser(sub: Any) -> None:
    """The ``cancel`` command and its options."""
    cancel = sub.add_parser(
        "cancel", help="cancel a run now (running tools are killed)",
        description="Cancel a run: its running LLM calls and tools are cancelled and it ends `cancelled`. A "
                    "worker on the run's task queue carries it out: when none picks the request up within a "
                    "few seconds, the command says so, names the queue, and suggests --terminate, which ends "
                    "the run at once without a worker (nothing of it runs after that, no cleanup).",
    )
    cancel.add_argument("run", type=run_id, help="run id")
    cancel.add_argument("--terminate", action="store_true",
                        help="end the run now on the server, without a worker (Temporal's terminate)")
