"""``agentloop run`` and ``agentloop watch``."""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import sys
import uuid
from typing import TYPE_CHECKING, Any

from temporalio.service import RPCError, RPCStatusCode

from agentloop.cli.common import (
    describe_run,
    say,
    stdin_is_terminal,
    temporal_status,
)
from agentloop.cli.embedded import command_config, reading_client, session
from agentloop.cli.options import agent_options, imports, permission_options, run_id
from agentloop.cli.runs.describe import when
from agentloop.cli.runs.eval_follow import follow_eval
from agentloop.cli.runs.follow import Prompter, TerminalAnswers, exit_code, follow
from agentloop.cli.runs.render import EventRenderer, make_renderer
from agentloop.cli.runs.threads import turn_exit_code
from agentloop.cli.spec_file import spec_of_run
from agentloop.shared.base.errors import UserError
from agentloop.shared.evals.report import EVAL_WORKFLOW_NAME
from agentloop.shared.runs.result import AgentRunFailed

if TYPE_CHECKING:
    from agentloop.client.agent_client import AgentClient
    from agentloop.client.handle import AgentRunHandle
    from agentloop.client.runs import RunIdInUse
    from agentloop.shared.definition.spec import AgentSpec
    from agentloop.shared.runs.events import AgentEvent


#: How long ``agentloop run``, stopped by Ctrl-C or a signal, waits for its
#: run to end cancelled (its own worker, if it runs one, is still up meanwhile).
CANCEL_WAIT_SECONDS = 10.0


async def cmd_run(args: argparse.Namespace) -> int:
    """``agentloop run``, forward: check the command line, build the spec,
    start the run, follow it (rendering its events), and its exit code."""
    check_instruction(args.instruction)
    spec = spec_of_run(args)
    config, dev = command_config(args.imports)
    embedded = config.address is None
    own = [] if embedded else own_worker_reasons(args, spec.model, dev_running=dev is not None)
    if own:
        # What only this process has (imports, a provider key) must be used:
        # a worker here, on a queue no other worker polls, runs this run.
        config.task_queue = f"{config.task_queue}-run-{args.run_id or uuid.uuid4().hex[:12]}"
    renderer = make_renderer(jsonl=args.jsonl)
    async with session(config, with_worker=embedded or bool(own), workspace=spec.workspace, command="run") as s:
        say_server(dev, own, s.config)
        if embedded or own:
            check_scripted(spec.model)  # this process's worker runs it: a typo is found before the run starts
        handle = await start_run(s.client, s.config.task_queue, spec, args, eager=bool(embedded or own))
        try:
            terminal = await follow_run(handle, renderer, tree=bool(spec.sub_agents))
        except asyncio.CancelledError:
            # Ctrl-C, SIGTERM or SIGHUP: cancel the run for real while this
            # process's worker (if any) still runs, then stop what we started.
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            await cancel_run(handle, embedded=embedded, task_queue=s.config.task_queue)
            raise
        if handle.turn is not None:  # a thread: its first turn has ended, the thread waits
            return await turn_exit_code(handle, jsonl=args.jsonl)
        return await exit_code(handle, terminal)


def check_instruction(instruction: str) -> None:
    """An empty instruction is refused before anything starts."""
    if not instruction.strip():
        raise UserError("the instruction is empty: say what the agent should do, e.g. "
                        "agentloop run \"Summarise this project\" --model scripted:demo")


def say_server(dev: Any, own: list[str], config: Any) -> None:
    """On a running ``agentloop dev``'s server: say so, and whose worker runs the run."""
    if dev is not None and own:
        say(f"using the Temporal server of {dev.describe()} at {config.address}, with a worker in this "
            f"process on task queue {config.task_queue!r} (for {', '.join(own)})")
    elif dev is not None:
        say(f"using the Temporal server of {dev.describe()} at {config.address}: its worker runs this run")


async def start_run(temporal: Any, task_queue: str, spec: AgentSpec, args: argparse.Namespace, *,
                    eager: bool = False) -> AgentRunHandle:
    """Start the run (a thread's first turn with ``--thread``), and say what
    started; ``eager``: this process's worker takes its first workflow task
    straight from the start (docs/live-deltas.md)."""
    from agentloop.client.agent_client import AgentClient
    from agentloop.client.runs import RunIdInUse

    client = AgentClient(temporal, task_queue=task_queue)
    client.eager_start = eager
    try:
        handle = await client.start(spec, args.instruction, run_id=args.run_id, allow_reuse=args.allow_reuse,
                                    thread_id=getattr(args, "thread", None), tenant=getattr(args, "tenant", None))
    except RunIdInUse as err:
        raise UserError(run_id_in_use(err)) from None
    say(f"{'thread' if handle.turn else 'run'} {handle.run_id} · {spec.model} · workspace {spec.workspace}")
    return handle


async def follow_run(handle: AgentRunHandle, renderer: EventRenderer, *, tree: bool) -> AgentEvent | None:
    """Follow the run to its end, rendering its events; its approvals are
    asked here when stdin is a terminal."""
    prompter = None
    if stdin_is_terminal():
        prompter = Prompter(handle, TerminalAnswers(sys.stdin), sys.stderr, renderer.note)
    return await follow(handle, renderer, prompter=prompter, tree=tree)


#: The variables a provider's models read, by the model's prefix.
PROVIDER_VARIABLES = {"openai": ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
                      "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")}


def own_worker_reasons(args: argparse.Namespace, model: str, *, dev_running: bool) -> list[str]:
    """Why ``agentloop run`` on a server it did not start runs its own worker
    (on a task queue of its own): ``--import``, ``--local-worker``, or, next
    to ``agentloop dev``, the model's provider settings in this environment
    (dev's worker may lack them, and the key must stay in the process that
    calls the model). Empty: the running workers run it."""
    reasons = []
    if args.imports:
        reasons.append("--import")
    if args.local_worker:
        reasons.append("--local-worker")
    if dev_running:
        provider = model.split(":", 1)[0]
        reasons += [name for name in PROVIDER_VARIABLES.get(provider, ()) if os.environ.get(name)]
    return reasons


def check_scripted(model: str) -> None:
    """A ``scripted:`` model this process's worker cannot play is refused
    before the run starts (its modules are imported by then).

    Raises:
        UserError: No script of that name is registered here.
    """
    from agentloop.activities.providers.scripted_model import scripted_model_problem

    problem = scripted_model_problem(model)
    if problem:
        raise UserError(f"--model {model}: {problem}")


def run_id_in_use(err: RunIdInUse) -> str:
    """What ``agentloop run --run-id`` says about an id that is taken."""
    run = shlex.quote(err.run_id)
    if err.running:
        return (f"run {err.run_id} is already running; follow it with `agentloop watch {run}`, cancel it with "
                f"`agentloop cancel {run}`, or choose another --run-id")
    ended = f", {when(err.closed_at)}" if err.closed_at else ""
    return (f"run {err.run_id} has already ended ({err.status}{ended}; `agentloop show {run}` shows it); choose "
            "another --run-id, or pass --allow-reuse to start a new run under this id (`show` and `watch` then "
            "see the new one)")


async def cancel_run(handle: AgentRunHandle, *, embedded: bool, task_queue: str) -> None:
    """Cancel the run and wait (a while) until it has ended; say plainly
    what became of it. A second Ctrl-C or signal stops the waiting."""
    say(f"\ncancelling run {handle.run_id} ...")
    run = shlex.quote(handle.run_id)
    try:
        said = await asyncio.wait_for(_cancel_and_wait(handle), CANCEL_WAIT_SECONDS)
    except (TimeoutError, asyncio.CancelledError, RPCError) as exc:
        why = ("stopped waiting" if isinstance(exc, asyncio.CancelledError)
               else f"no worker confirmed it within {CANCEL_WAIT_SECONDS:g}s" if isinstance(exc, TimeoutError)
               else f"the server said: {exc}")
        if embedded:
            later = ("it is kept in the embedded server's data ($AGENTLOOP_HOME) and ends cancelled once "
                     "`agentloop dev` or the next `agentloop run` starts a worker there")
        else:
            later = f"it ends cancelled when a worker on task queue {task_queue!r} gets to it"
        say(f"run {handle.run_id} is still running: cancellation requested, but {why}; {later}. "
            f"`agentloop show {run}` tells where it is; `agentloop cancel {run}` asks again")
        return
    say(said)


async def _cancel_and_wait(handle: AgentRunHandle) -> str:
    run = shlex.quote(handle.run_id)
    try:
        await handle.cancel()
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:  # NOT_FOUND: it has just ended
            raise
    try:
        result = await handle.result()
    except AgentRunFailed as failed:
        if failed.reason == "cancelled":
            return f"run {handle.run_id} cancelled; `agentloop show {run}` shows where it stopped"
        return f"{failed} (before the cancellation reached it)"
    return f"run {handle.run_id} ended {result.status} before the cancellation reached it"


async def cmd_watch(args: argparse.Namespace) -> int:
    if args.from_offset < 0:
        raise UserError(f"--from {args.from_offset}: an offset is 0 or more (an event's seq)")
    async with reading_client("watch") as client:
        return await _watch(client, args)


async def _watch(client: AgentClient, args: argparse.Namespace) -> int:
    from agentloop.shared.runs.search_attributes import AGENT_STATUS

    description = await describe_run(client, args.run)
    if description.workflow_type == EVAL_WORKFLOW_NAME:  # an eval: its cases as they end, then its report
        return await follow_eval(client, args.run, json=args.jsonl)
    handle = client.get_handle(args.run)
    status = temporal_status(description)
    if status == "running":  # the run's own word says more (e.g. awaiting_approval)
        status = description.typed_search_attributes.get(AGENT_STATUS) or status
    print(f"watching run {args.run} ({status}) from offset {args.from_offset}; "
          "Ctrl-C stops watching, not the run", file=sys.stderr, flush=True)
    terminal = await follow(handle, make_renderer(jsonl=args.jsonl), from_offset=args.from_offset, tree=args.tree)
    return await exit_code(handle, terminal)


def add_run_parser(sub: Any) -> None:
    """The ``run`` command and its options."""
    run = sub.add_parser(
        "run", help="run an agent and print its steps as they happen",
        description="Run an agent on INSTRUCTION and print its steps as they happen; calls that need approval "
                    "are asked here (or decided from another terminal with `agentloop approve`). With no "
                    "TEMPORAL_ADDRESS and no `agentloop dev` running, it starts the embedded Temporal server "
                    "and a worker for the run. Exits 0 when the run completed or was stopped, 1 when it failed "
                    "or was cancelled.",
    )
    run.add_argument("instruction", help="what the agent should do")
    agent_options(run, spec_help="the agent's AgentSpec in a JSON or YAML file (sub-agents "
                                 "included, e.g. examples/team.yaml); the flags below override its fields",
                  max_steps_help="most LLM steps (default: 16)",
                  max_tokens_help="most tokens the model may write in one step "
                                  "(AgentSpec.max_tokens; default: 4096, the providers' default)")
    run.add_argument("--run-id", type=run_id, help="run id (default: generated); refused while a run with this id runs")
    run.add_argument("--thread", type=run_id, metavar="ID", help="start thread ID with this as its first message: "
                     "the run stays open for `agentloop send ID ...` (docs/conversations.md)")
    run.add_argument("--allow-reuse", action="store_true", help="start even if a run with --run-id has ended "
                     "(the new run takes over the id); without it, such an id is refused")
    run.add_argument("--local-worker", action="store_true",
                     help="on a server this command did not start (TEMPORAL_ADDRESS, agentloop dev), run the run "
                          "on a worker in this process, on a task queue of its own (--import does too)")
    permission_options(run, allow_help="run TOOL's calls without asking; repeatable "
                                       "(a glob such as 'git_*' works)",
                       ask_help="ask before each call of TOOL, even a read-only "
                                "one; repeatable",
                       yes_help="run every call without asking (tools named "
                                "with --ask still ask); by default read-only tools run and others ask")
    run.add_argument("--jsonl", action="store_true", help="print the run's events, one JSON object a line, "
                     "and nothing else on stdout")
    imports(run)


def add_watch_parser(sub: Any) -> None:
    """The ``watch`` command and its options."""
    watch = sub.add_parser(
        "watch", help="follow a run's events until it ends (a finished run's are replayed)",
        description="Show a run's events as `agentloop run` does, from its start or from an offset, until "
                    "the run ends. Exits 0 when it completed or was stopped, 1 when it failed or was cancelled.",
    )
    watch.add_argument("run", type=run_id, help="run id")
    watch.add_argument("--from", dest="from_offset", type=int, default=0, metavar="OFFSET",
                       help="start at this offset of the stream (an event's seq; default: 0, the start)")
    watch.add_argument("--jsonl", action="store_true", help="one JSON object per event and line, "
                       "and nothing else on stdout")
    watch.add_argument("--tree", action="store_true", help="follow its sub-agents' runs too, in one view "
                       "(each line labelled with the sub-agent's name; with --jsonl, their events too)")
