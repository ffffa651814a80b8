"""The ``agentloop`` command.

``agentloop run``, ``agentloop dev`` and ``agentloop worker``. With no
``TEMPORAL_ADDRESS`` in the environment, ``run`` and ``dev`` start the
embedded Temporal dev server (SQLite in ``$AGENTLOOP_HOME``, default
``~/.agentloop``) and a worker in this process.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import json
import logging
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pydantic import ValidationError

from agentloop.config import TemporalConfig
from agentloop.errors import AgentRunFailed, UserError, describe_validation_error
from agentloop.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart

#: Tools ``agentloop run`` offers the model unless told otherwise.
DEFAULT_RUN_TOOLS = ["shell_command", "read_file", "write_file", "apply_patch", "grep_files", "list_dir"]


def agentloop_home() -> Path:
    """Where the embedded server keeps its SQLite file and log."""
    return Path(os.environ.get("AGENTLOOP_HOME") or Path.home() / ".agentloop")


@dataclass
class Session:
    """A connection for one CLI command, with the server and worker it started."""

    client: Any
    config: TemporalConfig
    ui_url: str | None = None


@contextlib.contextmanager
def _data_dir_lock(data_dir: Path) -> Any:
    data_dir.mkdir(parents=True, exist_ok=True)
    lock = open(data_dir / "server.lock", "w")  # noqa: SIM115
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise UserError(
            f"another agentloop command is using the embedded server in {data_dir}; connect to "
            "it instead (`agentloop dev` prints its address: export TEMPORAL_ADDRESS=...), or "
            "set AGENTLOOP_HOME to another directory"
        ) from None
    try:
        yield
    finally:
        lock.close()


@contextlib.asynccontextmanager
async def session(
    config: TemporalConfig,
    *,
    with_worker: bool,
    workspace: str | None = None,
    ui: bool = False,
    port: int | None = None,
    ui_port: int | None = None,
    data_dir: Path | None = None,
) -> AsyncIterator[Session]:
    """Connect to ``config.address``, or start the embedded server; optionally
    run a worker in this process for as long as the block runs."""
    from workers.worker import build_worker, connect, import_modules

    import_modules(config.imports)
    async with contextlib.AsyncExitStack() as stack:
        ui_url = None
        if config.address is None:
            from agentloop.devserver import DevServer

            data_dir = data_dir or agentloop_home()
            stack.enter_context(_data_dir_lock(data_dir))
            server = DevServer(
                db_file=data_dir / "temporal.db",
                log_file=data_dir / "temporal.log",
                ui=ui,
                port=port,
                ui_port=ui_port,
                namespace=config.namespace,
            )
            server.start()
            stack.callback(server.stop)
            await server.wait_ready()
            config = TemporalConfig(
                address=server.address,
                namespace=config.namespace,
                task_queue=config.task_queue,
                imports=config.imports,
            )
            ui_url = server.ui_url
        client = await connect(config.address, config.namespace)  # type: ignore[arg-type]
        if with_worker:
            worker = build_worker(client, task_queue=config.task_queue, workspace=workspace)
            await stack.enter_async_context(worker)
        yield Session(client=client, config=config, ui_url=ui_url)


# Printing ---------------------------------------------------------------------


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_message(message: Message, step: int) -> list[str]:
    """Lines that show a new message as it arrives."""
    lines: list[str] = []
    for part in message.content:
        # The final answer (no tool calls) is printed whole at the end, not here.
        if isinstance(part, TextPart) and message.role == "assistant" and part.text and message.tool_calls:
            lines.append(f"[step {step}] assistant: {_short(part.text)}")
        elif isinstance(part, ThinkingPart):
            lines.append(f"[step {step}] thinking: {_short(part.text)}")
        elif isinstance(part, ToolCallPart):
            args = json.dumps(part.arguments, ensure_ascii=False)
            lines.append(f"[step {step}] tool call {part.name} {_short(args, 160)}")
        elif isinstance(part, ToolResultPart):
            status = "error" if part.is_error else "ok"
            lines.append(f"[step {step}] tool result {part.name} ({status}): {_short(part.content, 160)}")
    return lines


async def follow(handle: Any, out: IO[str], poll: float = 0.2) -> Any:
    """Print messages as they arrive until the run ends; return its result."""
    seen = 0
    step = 0
    result_task = asyncio.ensure_future(handle.result())
    try:
        while True:
            done = result_task.done()
            try:
                messages = await handle.messages()
            except Exception:  # the first workflow task may not have run yet
                messages = []
            if seen == 0 and messages:
                seen = sum(1 for m in messages if m.role == "user")  # the input
            for message in messages[seen:]:
                if message.role == "assistant":
                    step += 1
                for line in describe_message(message, step):
                    print(line, file=out, flush=True)
            seen = max(seen, len(messages))
            if done:
                return result_task.result()
            await asyncio.wait([result_task], timeout=poll)
    finally:
        if not result_task.done():
            result_task.cancel()


# Commands ---------------------------------------------------------------------


async def cmd_run(args: argparse.Namespace) -> int:
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
            workspace=workspace,
        )
    except ValidationError as exc:
        raise UserError(describe_validation_error(exc)) from None
    config = TemporalConfig.from_env()
    config.imports += args.imports
    embedded = config.address is None
    async with session(config, with_worker=embedded or args.local_worker, workspace=workspace) as s:
        client = AgentClient(s.client, task_queue=s.config.task_queue)
        handle = await client.start(spec, args.instruction, run_id=args.run_id)
        print(f"run {handle.run_id} · {model} · workspace {workspace}", file=sys.stderr, flush=True)
        try:
            result = await follow(handle, sys.stdout)
        except AgentRunFailed as failed:
            print(f"\nrun {handle.run_id} failed ({failed.reason}): "
                  f"{failed.result.error if failed.result else failed}", file=sys.stderr)
            return 1
        except (KeyboardInterrupt, asyncio.CancelledError):
            await handle.cancel()
            print(f"\nrun {handle.run_id} cancelled", file=sys.stderr)
            return 130
        print("\n" + result.final_text)
        usage = result.usage
        print(
            f"\n[{result.report.step_count} steps, {result.report.tool_call_count} tool calls, "
            f"{usage.input_tokens} in / {usage.output_tokens} out tokens]",
            file=sys.stderr,
        )
        return 0


async def cmd_dev(args: argparse.Namespace) -> int:
    config = TemporalConfig.from_env()
    config.imports += args.imports
    if config.address:
        raise UserError("TEMPORAL_ADDRESS is set: `agentloop dev` starts its own server; unset it, "
                        "or run `agentloop worker` against that server")
    data_dir = Path(args.data_dir) if args.data_dir else None
    async with session(
        config, with_worker=True, workspace=args.workspace, ui=not args.headless,
        port=args.port, ui_port=args.ui_port, data_dir=data_dir,
    ) as s:
        print(f"Temporal dev server: {s.config.address} (namespace {s.config.namespace})")
        if s.ui_url:
            print(f"Temporal UI:         {s.ui_url}")
        print(f"Worker polling task queue {s.config.task_queue!r}. Ctrl-C stops both.")
        print(f"\n  export TEMPORAL_ADDRESS={s.config.address}", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        import signal

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        print("stopping", file=sys.stderr)
    return 0


async def cmd_worker(args: argparse.Namespace) -> int:
    from workers.worker import run_worker

    config = TemporalConfig.from_env()
    config.imports += args.imports
    await run_worker(config, workspace=args.workspace)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentloop", description="Durable LLM agent runs on Temporal.")
    sub = parser.add_subparsers(dest="command", required=True)

    def imports(p: argparse.ArgumentParser) -> None:
        p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                       help="import MODULE first (it registers tools or scripted models); repeatable")

    run = sub.add_parser("run", help="run an agent and print its steps as they happen")
    run.add_argument("instruction", help="what the agent should do")
    run.add_argument("--model", help="provider:model (default: $AGENTLOOP_MODEL)")
    run.add_argument("--workspace", default=".", help="directory the tools work in (default: .)")
    run.add_argument("--tool", action="append", help="tool the model may call; repeatable "
                     f"(default: {', '.join(DEFAULT_RUN_TOOLS)})")
    run.add_argument("--system", help="system prompt")
    run.add_argument("--max-steps", type=int, default=16)
    run.add_argument("--run-id", help="run id (default: generated)")
    run.add_argument("--local-worker", action="store_true",
                     help="with TEMPORAL_ADDRESS set, also run a worker in this process")
    imports(run)

    dev = sub.add_parser("dev", help="keep a local Temporal server and a worker running")
    dev.add_argument("--port", type=int, default=7233)
    dev.add_argument("--ui-port", type=int, default=8233)
    dev.add_argument("--headless", action="store_true", help="no web UI")
    dev.add_argument("--data-dir", help="where the SQLite file lives (default: $AGENTLOOP_HOME)")
    dev.add_argument("--workspace", help="default workspace for runs that name none")
    imports(dev)

    worker = sub.add_parser("worker", help="run a worker against $TEMPORAL_ADDRESS")
    worker.add_argument("--workspace", help="default workspace for runs that name none")
    imports(worker)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    level = os.environ.get("AGENTLOOP_LOG_LEVEL")
    logging.basicConfig(level=level or "WARNING", format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not level and args.command == "run":
        # A failed LLM or tool attempt is reported in the run's own output; the
        # SDK's warning with a traceback would only repeat it.
        logging.getLogger("temporalio.activity").setLevel(logging.ERROR)
    # Run from a checkout, `agentloop --import tests.x` should find the checkout's modules.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    command = {"run": cmd_run, "dev": cmd_dev, "worker": cmd_worker}[args.command]
    try:
        return asyncio.run(command(args))
    except UserError as exc:
        print(f"agentloop: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def entrypoint() -> None:
    """The console script: :func:`main`, then exit without interpreter teardown.

    Temporal's native bridge keeps threads that can touch the GIL while
    CPython finalizes, which aborts a process that had finished cleanly
    (temporalio/sdk-python#300). By here every run, worker and server this
    command started has been shut down, so output is flushed and the process
    exits at once with the command's code.
    """
    code = main()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    entrypoint()
