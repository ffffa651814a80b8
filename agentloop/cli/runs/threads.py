"""``agentloop send`` and ``agentloop steer``, and how ``agentloop run
--thread`` ends: a thread's turn is followed until it ends, and its answer
printed as ``run`` prints a run's."""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from agentloop.cli.common import say
from agentloop.cli.embedded import command_config, ops_client, session
from agentloop.cli.options import imports, run_id
from agentloop.cli.runs.follow import follow
from agentloop.cli.runs.render import make_renderer
from agentloop.shared.base.errors import DecisionRejected, UserError
from agentloop.shared.runs.result import AgentRunFailed

if TYPE_CHECKING:
    from agentloop.client.agent_client import AgentClient
    from agentloop.client.handle import AgentRunHandle


@asynccontextmanager
async def thread_client(args: argparse.Namespace, *, workspace: str | None = None) -> AsyncIterator[AgentClient]:
    """A client as ``agentloop run`` gets one: TEMPORAL_ADDRESS, the running
    ``agentloop dev``, or the embedded server with a worker in this process
    (a thread's run waits in the embedded server's data between commands)."""
    from agentloop.client.agent_client import AgentClient

    config, _ = command_config(getattr(args, "imports", []))
    embedded = config.address is None
    async with session(config, with_worker=embedded or getattr(args, "local_worker", False), workspace=workspace,
                       command="send") as s:
        yield AgentClient(s.client, task_queue=s.config.task_queue)


async def cmd_send(args: argparse.Namespace) -> int:

    if not args.message.strip():
        raise UserError("the message is empty: say something, e.g. "
                        f"agentloop send {shlex.quote(args.thread)} \"and now?\"")
    async with thread_client(args) as client:
        handle = await client.send(args.thread, args.message, strategy=args.strategy)
        say(f"thread {handle.run_id} · turn {handle.turn}")
        renderer = make_renderer(jsonl=args.jsonl)
        await follow(handle, renderer)
        return await turn_exit_code(handle, jsonl=args.jsonl)


async def cmd_steer(args: argparse.Namespace) -> int:

    client = await ops_client()
    try:
        accepted = await client.get_handle(args.run).steer(args.text)
    except DecisionRejected as err:
        raise UserError(str(err)) from None
    turn = f" (turn {accepted.turn})" if accepted.turn else ""
    print(f"run {args.run}{turn}: the model sees it before its next step", flush=True)
    return 0


async def turn_exit_code(handle: AgentRunHandle, *, jsonl: bool = False) -> int:
    """Print the turn's answer and how it ended; 0 unless it failed."""
    try:
        result = await handle.result()
    except AgentRunFailed as failed:
        print(f"agentloop: {failed}", file=sys.stderr, flush=True)
        return 1
    if not jsonl and result.final_text:
        print("\n" + result.final_text, flush=True)
    how = result.status if not result.error or result.status == "completed" else f"{result.status}: {result.error}"
    tokens = f"{result.usage.total_tokens:,} tokens"
    thread = shlex.quote(handle.run_id)
    print(f"\n[turn {handle.turn} {how} · {tokens} · `agentloop send {thread} \"...\"` goes on]",
          file=sys.stderr, flush=True)
    return 0


def add_thread_commands(sub: Any) -> None:
    """The ``send`` and ``steer`` subcommands."""
    send = sub.add_parser(
        "send", help="send a thread its next message and print the answer",
        description="Send the thread ID (started with `agentloop run --thread ID`) its next message; the model "
                    "sees every earlier message of the thread. Prints the answer as `run` does; exits 1 if the "
                    "turn failed.",
    )
    send.add_argument("thread", type=run_id, help="thread id")
    send.add_argument("message", help="the message")
    send.add_argument("--strategy", choices=["enqueue", "interrupt", "rollback", "reject"],
                      help="if the thread is busy: answer after the current turn (enqueue), cut the current "
                      "step short (interrupt), discard the current turn (rollback), or refuse (reject); "
                      "default: the thread's")
    send.add_argument("--jsonl", action="store_true", help="print the turn's events, one JSON object a line")
    send.add_argument("--local-worker", action="store_true",
                      help="with TEMPORAL_ADDRESS set, also run a worker in this process")
    imports(send)
    steer = sub.add_parser(
        "steer", help="tell a running agent something it sees before its next step",
        description="Add a user message to run RUN's conversation, seen by the model before its next LLM "
                    "step (after the results of the step under way), without ending the turn.",
    )
    steer.add_argument("run", type=run_id, help="run or thread id")
    steer.add_argument("text", help="the message, e.g. \"use the v2 API instead\"")
