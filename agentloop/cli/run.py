"""``agentloop run`` and ``agentloop watch``."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from pydantic import ValidationError

from agentloop.cli.common import DEFAULT_RUN_TOOLS, describe_run, temporal_status
from agentloop.cli.embedded import ops_client, session
from agentloop.cli.follow import Prompter, TerminalAnswers, exit_code, follow
from agentloop.config import TemporalConfig
from agentloop.errors import UserError, describe_validation_error
from agentloop.render import make_renderer


async def cmd_run(args: argparse.Namespace) -> int:
    from agentloop.approvals import PermissionRule
    from agentloop.client import AgentClient
    from agentloop.spec import AgentSpec

    model = args.model or os.environ.get("AGENTLOOP_MODEL")
    if not model:
        raise UserError(
            "choose a model: --model openai:gpt-4.1-mini, --model anthropic:claude-sonnet-4-5, "
            "or --model scripted:demo to try it offline (or set AGENTLOOP_MODEL)"
        )
    workspace = str(Path(args.workspace).resolve())
    if not Path(workspace).is_dir():
        raise UserError(f"--workspace {args.workspace} is not a directory")
    try:
        spec = AgentSpec(
            model=model,
            tools=args.tool or DEFAULT_RUN_TOOLS,
            system_prompt=args.system or "",
            max_steps=args.max_steps,
            max_tokens=args.max_tokens,
            workspace=workspace,
            # In the order given: the first rule that matches a call decides.
            permissions=[PermissionRule(tool=tool, action=action) for action, tool in args.rules],
            default_permission="allow" if args.yes else "auto",
        )
    except ValidationError as exc:
        raise UserError(describe_validation_error(exc)) from None
    config = TemporalConfig.from_env()
    config.imports += args.imports
    embedded = config.address is None
    renderer = make_renderer(jsonl=args.jsonl)
    async with session(config, with_worker=embedded or args.local_worker, workspace=workspace) as s:
        client = AgentClient(s.client, task_queue=s.config.task_queue)
        handle = await client.start(spec, args.instruction, run_id=args.run_id)
        print(f"run {handle.run_id} · {model} · workspace {workspace}", file=sys.stderr, flush=True)
        prompter = None
        if stdin_is_terminal():
            prompter = Prompter(handle, TerminalAnswers(sys.stdin), sys.stderr, renderer.note)
        try:
            terminal = await follow(handle, renderer, prompter=prompter)
        except (KeyboardInterrupt, asyncio.CancelledError):
            await handle.cancel()
            print(f"\nrun {handle.run_id} cancelled", file=sys.stderr)
            return 130
        return await exit_code(handle, terminal)


async def cmd_watch(args: argparse.Namespace) -> int:
    if args.from_offset < 0:
        raise UserError(f"--from {args.from_offset}: an offset is 0 or more (an event's seq)")
    from agentloop.search_attributes import AGENT_STATUS

    client = await ops_client()
    description = await describe_run(client, args.run)
    handle = client.get_handle(args.run)
    status = temporal_status(description)
    if status == "running":  # the run's own word says more (e.g. awaiting_approval)
        status = description.typed_search_attributes.get(AGENT_STATUS) or status
    print(f"watching run {args.run} ({status}) from offset {args.from_offset}; "
          "Ctrl-C stops watching, not the run", file=sys.stderr, flush=True)
    terminal = await follow(handle, make_renderer(jsonl=args.jsonl), from_offset=args.from_offset)
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


# Ops commands -------------------------------------------------------------------
