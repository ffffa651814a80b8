"""``agentloop export``, ``agentloop start --from`` and ``agentloop fork``:
snapshots of runs (:mod:`agentloop.shared.runs.snapshots`). Like the ops commands they
talk to runs on ``TEMPORAL_ADDRESS`` or the embedded server of a running
command (``export`` starts the embedded server when none runs); the new runs
are run by the workers already polling the task queue, and followed unless
``--detach``."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentloop.cli.common import CommandFailed, answer_within, describe_run, say, stdin_is_terminal
from agentloop.cli.embedded import ops_client, reading_client
from agentloop.cli.options import positive, run_id, tenant_option
from agentloop.shared.base.errors import UserError

if TYPE_CHECKING:
    from agentloop.client.agent_client import AgentClient
    from agentloop.client.handle import AgentRunHandle
    from agentloop.shared.runs.snapshots import AgentSnapshot


async def cmd_export(args: argparse.Namespace) -> int:
    async with reading_client("export") as client:
        snapshot = await _export(client, args.run)
    sys.stdout.write(snapshot.to_json() + "\n")
    sys.stdout.flush()
    return 0


async def _export(client: AgentClient, run_id: str) -> AgentSnapshot:
    """Run ``run_id``'s snapshot; CommandFailed when there is no such run."""
    await describe_run(client, run_id)
    try:
        return await answer_within(client.get_handle(run_id).export(), "the export query", run_id)
    except UserError as exc:
        raise CommandFailed(str(exc)) from None


def read_snapshot_file(path: str) -> AgentSnapshot:
    """The snapshot in ``path`` (``-``: stdin), checked.

    Raises:
        UserError: No such file, not readable, not JSON, not a snapshot,
            another major version (``SnapshotError``).
    """
    from agentloop.shared.runs.snapshots import load_snapshot

    if path == "-":
        return load_snapshot(sys.stdin.buffer.read(), "the snapshot on stdin")
    file = Path(path)
    if file.is_dir():
        raise UserError(f"--from {path} is a directory; give the file `agentloop export RUN > run.json` wrote")
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        raise UserError(f"--from {path}: no such file; write one with `agentloop export RUN > {path}`") from None
    except OSError as exc:
        raise UserError(f"--from {path} cannot be read: {exc.strerror}") from None
    return load_snapshot(data, f"{path}")


async def cmd_start(args: argparse.Namespace) -> int:
    from agentloop.cli.runs.run import run_id_in_use
    from agentloop.client.runs import RunIdInUse

    snapshot = read_snapshot_file(args.from_file)
    client = await ops_client()
    try:
        handle = await client.restore(snapshot, run_id=args.run_id, message=args.message, tenant=args.tenant)
    except RunIdInUse as err:
        raise UserError(run_id_in_use(err)) from None
    waiting = [a.call_id for a in snapshot.pending_approvals] + [a.call_id for a in snapshot.pending_actions]
    what = f"{len(snapshot.messages)} messages, {snapshot.step} steps"
    if waiting and args.message is None:
        what += f"; waiting again for {', '.join(waiting)} (`agentloop show {shlex.quote(handle.run_id)}`)"
    what += "; " + _definition_note(handle)
    return await _started(args, handle, f"started run {handle.run_id} from the snapshot of run {snapshot.run_id} "
                                        f"({what})", thread=snapshot.thread_id is not None)


async def cmd_fork(args: argparse.Namespace) -> int:
    from agentloop.cli.runs.run import run_id_in_use
    from agentloop.client.runs import RunIdInUse

    client = await ops_client()
    snapshot = await _export(client, args.run)
    try:
        handle = await client.fork_from(snapshot, args.at_step, args.message, new_run_id=args.run_id,
                                        tenant=args.tenant)
    except RunIdInUse as err:
        raise UserError(run_id_in_use(err)) from None
    then = ", then your message" if args.message is not None else ""
    then += "; " + _definition_note(handle)
    return await _started(args, handle, f"started run {handle.run_id}, forked from run {args.run} at the end of "
                                        f"step {args.at_step} ({snapshot.step_ends[args.at_step]} messages{then})",
                          thread=snapshot.thread_id is not None)


def _definition_note(handle: AgentRunHandle) -> str:
    """Whether the new run's agent definition differs from the snapshot's,
    and how (from the input it was started with)."""
    change = handle.definition_change
    return change.describe() if change is not None else "agent definition not compared"


async def _started(args: argparse.Namespace, handle: AgentRunHandle, what: str, *, thread: bool) -> int:
    """Follow the new run as ``agentloop run`` does (Ctrl-C stops following,
    not the run); with ``--detach``, or for a thread (which waits for its
    next message), print what started and return."""
    from agentloop.cli.runs.follow import Prompter, TerminalAnswers, exit_code, follow
    from agentloop.cli.runs.render import make_renderer

    if args.detach or thread:
        print(f"{what}; follow it with `agentloop watch {shlex.quote(handle.run_id)}`")
        return 0
    say(f"{what}; following it (Ctrl-C stops following, not the run)")
    renderer = make_renderer(jsonl=args.jsonl)
    prompter = Prompter(handle, TerminalAnswers(sys.stdin), sys.stderr, renderer.note) if stdin_is_terminal() else None
    terminal = await follow(handle, renderer, prompter=prompter)
    return await exit_code(handle, terminal)


def following(p: argparse.ArgumentParser) -> None:
    """``--detach`` and ``--jsonl`` of a command that starts a run and follows it."""
    p.add_argument("--detach", action="store_true",
                   help="print the new run's id and return instead of following the run")
    p.add_argument("--jsonl", action="store_true", help="one JSON event per line on stdout while following")


def add_export_parser(sub: Any) -> None:
    """The ``export`` command and its options."""
    export = sub.add_parser(
        "export", help="print a run's snapshot as JSON (agentloop export RUN > run.json)",
        description="Print a versioned snapshot of the run on stdout: spec, messages, report, usage, pending "
                    "calls, thread id. Works for running, finished and continued-as-new runs.",
    )
    export.add_argument("run", type=run_id, help="run id")


def add_start_parser(sub: Any) -> None:
    """The ``start`` command and its options."""
    start = sub.add_parser(
        "start", help="start a run from a snapshot (agentloop start --from run.json)",
        description="Start a new run from a snapshot `agentloop export` wrote: the run goes on where the "
                    "snapshot was taken, and calls that waited for a decision or outputs wait again. "
                    "The workers polling the task queue run it; the command follows it as `agentloop run` does "
                    "(Ctrl-C stops following, not the run), or returns at once with --detach.",
    )
    start.add_argument("--from", dest="from_file", required=True, metavar="FILE",
                       help="the snapshot ('-': read it from stdin)")
    start.add_argument("--run-id", type=run_id, help="the new run's id (default: generated)")
    tenant_option(start)
    start.add_argument("--message", help="a new user message after the snapshot's conversation")
    following(start)


def add_fork_parser(sub: Any) -> None:
    """The ``fork`` command and its options."""
    fork = sub.add_parser(
        "fork", help="start a run on a run's conversation up to the end of one of its steps",
        description="Start a new run whose conversation is RUN's up to the end of step N (1-based), then "
                    "--message if given. The fork's report names RUN; `agentloop list --query "
                    "'AgentForkedFrom=\"RUN\"'` finds the forks of RUN.",
    )
    fork.add_argument("run", type=run_id, help="the run to fork")
    fork.add_argument("--at-step", type=positive, required=True, metavar="N", help="the step to cut after")
    fork.add_argument("--message", help="a new user message after the cut")
    fork.add_argument("--run-id", type=run_id, help="the fork's run id (default: generated)")
    tenant_option(fork)
    following(fork)
