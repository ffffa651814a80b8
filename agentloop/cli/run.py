"""``agentloop run`` and ``agentloop watch``."""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import sys
import uuid
from typing import TYPE_CHECKING

from pydantic import ValidationError
from temporalio.service import RPCError, RPCStatusCode

from agentloop.cli.common import DEFAULT_RUN_TOOLS, describe_run, existing_workspace, say, temporal_status
from agentloop.cli.embedded import command_config, reading_client, session
from agentloop.cli.follow import Prompter, TerminalAnswers, exit_code, follow
from agentloop.shared.runs.result import AgentRunFailed
from agentloop.shared.base.errors import UserError, describe_validation_error
from agentloop.cli.render import make_renderer, when

if TYPE_CHECKING:
    from agentloop.client.agent_client import AgentClient, AgentRunHandle, RunIdInUse


#: How long ``agentloop run``, stopped by Ctrl-C or a signal, waits for its
#: run to end cancelled (its own worker, if it runs one, is still up meanwhile).
CANCEL_WAIT_SECONDS = 10.0


async def cmd_run(args: argparse.Namespace) -> int:
    from agentloop.client.agent_client import AgentClient, RunIdInUse

    if not args.instruction.strip():
        raise UserError("the instruction is empty: say what the agent should do, e.g. "
                        "agentloop run \"Summarise this project\" --model scripted:demo")
    spec = spec_of_run(args)
    model, workspace = spec.model, spec.workspace
    config, dev = command_config(args.imports)
    embedded = config.address is None
    own = [] if embedded else own_worker_reasons(args, model, dev_running=dev is not None)
    if own:
        # What only this process has (imports, a provider key) must be used:
        # a worker here, on a queue no other worker polls, runs this run.
        config.task_queue = f"{config.task_queue}-run-{args.run_id or uuid.uuid4().hex[:12]}"
    renderer = make_renderer(jsonl=args.jsonl)
    async with session(config, with_worker=embedded or bool(own), workspace=workspace, command="run") as s:
        if dev is not None and own:
            say(f"using the Temporal server of {dev.describe()} at {s.config.address}, with a worker in this "
                f"process on task queue {s.config.task_queue!r} (for {', '.join(own)})")
        elif dev is not None:
            say(f"using the Temporal server of {dev.describe()} at {s.config.address}: its worker runs this run")
        if embedded or own:
            check_scripted(model)  # this process's worker runs it: a typo is found before the run starts
        client = AgentClient(s.client, task_queue=s.config.task_queue)
        try:
            handle = await client.start(spec, args.instruction, run_id=args.run_id, allow_reuse=args.allow_reuse,
                                        thread_id=getattr(args, "thread", None))
        except RunIdInUse as err:
            raise UserError(run_id_in_use(err)) from None
        say(f"{'thread' if handle.turn else 'run'} {handle.run_id} · {model} · workspace {workspace}")
        prompter = None
        if stdin_is_terminal():
            prompter = Prompter(handle, TerminalAnswers(sys.stdin), sys.stderr, renderer.note)
        try:
            terminal = await follow(handle, renderer, prompter=prompter, tree=bool(spec.sub_agents))
        except asyncio.CancelledError:
            # Ctrl-C, SIGTERM or SIGHUP: cancel the run for real while this
            # process's worker (if any) still runs, then stop what we started.
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            await cancel_run(handle, embedded=embedded, task_queue=s.config.task_queue)
            raise
        if handle.turn is not None:  # a thread: its first turn has ended, the thread waits
            from agentloop.cli.threads import turn_exit_code

            return await turn_exit_code(handle, jsonl=args.jsonl)
        return await exit_code(handle, terminal)


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
    from agentloop.activities.scripted_model import scripted_model_problem

    problem = scripted_model_problem(model)
    if problem:
        raise UserError(f"--model {model}: {problem}")


def spec_of_run(args: argparse.Namespace):
    """The run's AgentSpec: from ``--spec FILE`` with the flags' overrides, or from the flags."""
    from agentloop.shared.definition.approvals import PermissionRule
    from agentloop.cli.spec_file import spec_from_file
    from agentloop.shared.definition.spec import AgentSpec

    model = args.model or os.environ.get("AGENTLOOP_MODEL")
    if args.spec:
        return spec_from_file(args.spec, args, default_model=model,
                              workspace=existing_workspace(args.workspace) if args.workspace else None)
    if not model:
        raise UserError(
            "choose a model: --model openai:gpt-4.1-mini, --model anthropic:claude-sonnet-4-5, "
            "or --model scripted:demo to try it offline (or set AGENTLOOP_MODEL)"
        )
    workspace = existing_workspace(args.workspace or ".")
    try:
        return AgentSpec(
            model=model,
            tools=args.tool or DEFAULT_RUN_TOOLS,
            system_prompt=args.system or "",
            max_steps=16 if args.max_steps is None else args.max_steps,
            max_tokens=args.max_tokens,
            workspace=workspace,
            # In the order given: the first rule that matches a call decides.
            permissions=[PermissionRule(tool=tool, action=action) for action, tool in args.rules],
            default_permission="allow" if args.yes else "auto",
        )
    except ValidationError as exc:
        raise UserError(describe_validation_error(exc)) from None


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
    handle = client.get_handle(args.run)
    status = temporal_status(description)
    if status == "running":  # the run's own word says more (e.g. awaiting_approval)
        status = description.typed_search_attributes.get(AGENT_STATUS) or status
    print(f"watching run {args.run} ({status}) from offset {args.from_offset}; "
          "Ctrl-C stops watching, not the run", file=sys.stderr, flush=True)
    terminal = await follow(handle, make_renderer(jsonl=args.jsonl), from_offset=args.from_offset, tree=args.tree)
    return await exit_code(handle, terminal)


def stdin_is_terminal() -> bool:
    """Stdin is a terminal we may read: a background job (``agentloop run
    ... &``) that read it would be stopped by SIGTTIN, so it only waits."""
    try:
        if sys.stdin is None or not sys.stdin.isatty():
            return False
        fd = sys.stdin.fileno()
    except (ValueError, OSError):  # closed or detached stdin
        return False
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:  # a terminal, but not our controlling one: no job control applies
        return True

