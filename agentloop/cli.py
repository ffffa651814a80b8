"""The ``agentloop`` command.

``agentloop run``, ``agentloop dev`` and ``agentloop worker`` run agents.
With no ``TEMPORAL_ADDRESS`` in the environment, ``run`` and ``dev`` start
the embedded Temporal dev server (SQLite in ``$AGENTLOOP_HOME``, default
``~/.agentloop``) and a worker in this process, and write the server's
address to ``$AGENTLOOP_HOME/server.address`` while it runs.

The ops commands (``approve``, ``submit``, ``stop``, ``cancel``, ``list``,
``show``, ``watch``) talk to runs on ``TEMPORAL_ADDRESS``, or else on the
embedded server another ``agentloop`` command is running; they never start a
server or a worker. Exit codes: 0 done, 1 the run refused the request or was
not found, 2 usage or configuration error; ``run`` and ``watch`` exit 0 when
the run completed or was stopped and 1 when it failed or was cancelled.

``run`` and ``watch`` render the run's event stream (``agentloop.render``):
a live view on a terminal, ``[step N] ...`` lines otherwise, or with
``--jsonl`` one event per line and nothing else on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import getpass
import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from agentloop.config import WORKER_ROLES, TemporalConfig
from agentloop.errors import (
    AgentLoopError,
    AgentRunFailed,
    DecisionRejected,
    UserError,
    describe_validation_error,
)
from agentloop.events import AgentEvent, ApprovalRequested, RunCompleted, is_terminal
from agentloop.render import (
    EventRenderer,
    approve_commands,
    args_json,
    make_renderer,
    submit_command,
    when,
)

if TYPE_CHECKING:
    from agentloop.approvals import PendingApproval
    from agentloop.client import AgentClient, AgentRunHandle
    from agentloop.run import AgentRunResult, RunState

T = TypeVar("T")

#: Tools ``agentloop run`` offers the model unless told otherwise.
DEFAULT_RUN_TOOLS = ["shell_command", "read_file", "write_file", "apply_patch", "grep_files", "list_dir"]

#: The file in the data directory that holds the embedded server's address
#: while a ``run`` or ``dev`` command keeps the server up.
ADDRESS_FILE = "server.address"

#: How long an ops command waits for a worker to answer a query or update.
OPS_TIMEOUT_SECONDS = 15.0

#: The statuses ``agentloop list --status`` filters on.
RUN_STATUSES = ["running", "awaiting_approval", "requires_action", "completed", "failed", "cancelled", "stopped"]


class CommandFailed(AgentLoopError):
    """The command could not do what was asked (unknown run, run ended, no
    worker answered); the CLI prints the message and exits 1."""


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


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _lock_held(data_dir: Path) -> bool:
    """Whether a ``run`` or ``dev`` command holds the data directory's lock now."""
    try:
        lock = open(data_dir / "server.lock", "a")  # noqa: SIM115
    except OSError:
        return False
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        lock.close()  # closing releases the lock if we took it
    return False


def embedded_server_address(data_dir: Path | None = None) -> str:
    """The address of the embedded server a running ``agentloop run`` or
    ``agentloop dev`` started, from ``server.address`` in the data directory.

    Raises:
        UserError: No such command is running.
    """
    data_dir = data_dir or agentloop_home()
    path = data_dir / ADDRESS_FILE
    hint = (
        "set TEMPORAL_ADDRESS to your Temporal server (e.g. export TEMPORAL_ADDRESS=127.0.0.1:7233), "
        "or start a local one with `agentloop dev` in another terminal"
    )
    if not path.is_file():
        raise UserError(f"no Temporal server to talk to: TEMPORAL_ADDRESS is unset and no agentloop "
                        f"command is serving one ({path} does not exist); {hint}")
    if not _lock_held(data_dir):
        raise UserError(f"no Temporal server to talk to: TEMPORAL_ADDRESS is unset and the agentloop "
                        f"command that wrote {path} has ended; {hint}")
    address = path.read_text().strip()
    if not address:
        raise UserError(f"{path} is empty; {hint}")
    return address


async def ops_client() -> AgentClient:
    """A client for the ops commands: ``TEMPORAL_ADDRESS``, or the embedded
    server of a running ``agentloop run``/``dev``. Never starts anything."""
    from agentloop.client import AgentClient
    from agentloop.workers.worker import connect

    config = TemporalConfig.from_env()
    if config.address:
        address, where = config.address, "TEMPORAL_ADDRESS"
    else:
        address, where = embedded_server_address(), f"{agentloop_home() / ADDRESS_FILE}"
    try:
        client = await connect(address, config.namespace)
    except Exception as exc:  # the SDK raises RuntimeError with the transport's reason
        raise UserError(f"cannot connect to Temporal at {address} (from {where}): {exc}; check that "
                        "the server is running and the address is right") from None
    return AgentClient(client, task_queue=config.task_queue)


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
    role: str = "all",
) -> AsyncIterator[Session]:
    """Connect to ``config.address``, or start the embedded server; optionally
    run a worker of ``role`` in this process for as long as the block runs.

    A process that runs models holds the provider keys: it makes itself
    non-dumpable (see :func:`agentloop.workers.worker.protect_process`); shell commands
    run in the worker's sandbox (:mod:`agentloop.activities.sandbox`), checked here
    before anything starts.
    """
    from agentloop.workers.worker import (
        build_worker,
        check_role,
        check_tools_environment,
        connect,
        import_modules,
        protect_process,
    )

    if with_worker:
        check_role(role)
        if role == "tools":
            check_tools_environment()
        else:
            protect_process()
        if role != "models":
            from agentloop.activities.sandbox import describe

            describe()  # a bad or unusable AGENTLOOP_SHELL_SANDBOX stops us here, before the server starts
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
            # Ops commands in other terminals find the server here; removed
            # before the server stops (callbacks run last in, first out).
            address_file = data_dir / ADDRESS_FILE
            _write_atomically(address_file, server.address + "\n")
            stack.callback(address_file.unlink, missing_ok=True)
            config = TemporalConfig(
                address=server.address,
                namespace=config.namespace,
                task_queue=config.task_queue,
                imports=config.imports,
                role=config.role,
            )
            ui_url = server.ui_url
        client = await connect(config.address, config.namespace)  # type: ignore[arg-type]
        if with_worker:
            worker = build_worker(client, task_queue=config.task_queue, workspace=workspace, role=role)
            await stack.enter_async_context(worker)
        yield Session(client=client, config=config, ui_url=ui_url)


# Following a run -----------------------------------------------------------------

#: How long ``run``/``watch`` wait for a run's first event before saying that
#: no worker may be answering (reading events needs one, even for ended runs).
FIRST_EVENT_HINT_SECONDS = 15.0


class _TerminalAnswers:
    """Lines typed on a terminal, read without blocking the event loop."""

    def __init__(self, stream: IO[str]) -> None:
        self._fd = stream.fileno()
        self._buffer = b""
        self.lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self._fd, self._readable)

    def _readable(self) -> None:
        try:
            chunk = os.read(self._fd, 4096)
        except OSError:  # the terminal went away
            chunk = b""
        if not chunk:  # end of input: no more answers
            self._loop.remove_reader(self._fd)
            self.lines.put_nowait(None)
            return
        self._buffer += chunk
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            self.lines.put_nowait(line.decode(errors="replace").strip())

    def discard_typed_ahead(self) -> None:
        while not self.lines.empty():
            if self.lines.get_nowait() is None:
                self.lines.put_nowait(None)
                return

    def close(self) -> None:
        self._loop.remove_reader(self._fd)


@dataclass
class _Prompter:
    """Asks about pending approvals on a terminal, one at a time, and sends
    the answers; a call decided elsewhere (another terminal, an ops tool) is
    dropped from the questions. ``say`` shows a line to the person."""

    handle: AgentRunHandle
    answers: _TerminalAnswers
    prompt_out: IO[str]
    say: Callable[[str], None]
    queue: list[PendingApproval] = field(default_factory=list)
    asking: PendingApproval | None = None
    wants_reason: bool = False
    closed: bool = False

    def ask(self, approval: PendingApproval) -> None:
        self.queue.append(approval)

    async def step(self, pending_ids: Collection[str]) -> None:
        """Drop questions nobody waits for, then ask the next one."""
        if self.asking is not None and self.asking.call_id not in pending_ids:
            self.say(f"\n  ({self.asking.call_id} was decided elsewhere)")
            self.asking, self.wants_reason = None, False
        self.queue = [a for a in self.queue if a.call_id in pending_ids]
        if self.asking is None and self.queue and not self.closed:
            self.asking = self.queue.pop(0)
            self.answers.discard_typed_ahead()
            self._prompt()

    def _prompt(self) -> None:
        assert self.asking is not None
        if self.wants_reason:
            text = "  reason, told to the model (Enter for none): "
        else:
            text = (f"approve {self.asking.tool_name} {args_json(self.asking.arguments, 100)}? "
                    "[y]es/[n]o/[s]kip: ")
        print(text, end="", file=self.prompt_out, flush=True)

    async def answer(self, line: str | None) -> None:
        """Act on one typed line."""
        from agentloop.approvals import ApprovalDecision

        if line is None:
            if self.asking is not None or self.queue:
                self.say("\n  (no more input: waiting for a decision from elsewhere)")
            self.closed, self.asking = True, None
            return
        approval = self.asking
        if approval is None:
            return  # typed while nothing was asked
        decision: ApprovalDecision | None = None
        if self.wants_reason:
            decision = ApprovalDecision(call_id=approval.call_id, decision="deny", reason=line or None, by="cli")
        elif line.lower() in ("y", "yes"):
            decision = ApprovalDecision(call_id=approval.call_id, decision="approve", by="cli")
        elif line.lower() in ("s", "skip"):
            decision = ApprovalDecision(call_id=approval.call_id, decision="skip", by="cli")
        elif line.lower() in ("n", "no"):
            self.wants_reason = True
        if decision is None:
            self._prompt()
            return
        self.asking, self.wants_reason = None, False
        try:
            await self.handle.decide(decision)
        except DecisionRejected as exc:
            self.say(f"  not sent: {exc}")
            return
        verb = {"approve": "approved", "deny": "denied", "skip": "skipped"}[decision.decision]
        self.say(f"  {verb} {approval.call_id}")


async def follow(
    handle: AgentRunHandle,
    renderer: EventRenderer,
    *,
    from_offset: int = 0,
    prompter: _Prompter | None = None,
) -> AgentEvent | None:
    """Render the run's events from ``from_offset`` until it ends.

    With a ``prompter`` (stdin is a terminal), each approval is also asked
    there and the answer sent.

    Returns:
        The run's terminal event; None when the stream ended without one (a
        terminated run, or ``from_offset`` past the end of an ended run).
    """
    events: asyncio.Queue[Any] = asyncio.Queue()
    end = object()

    async def pump() -> None:
        try:
            async for event in handle.events(from_offset):
                events.put_nowait(event)
        finally:
            events.put_nowait(end)

    pump_task = asyncio.ensure_future(pump())
    next_event: asyncio.Future[Any] | None = None
    line_task: asyncio.Future[str | None] | None = None
    terminal: AgentEvent | None = None
    hinted = from_offset > 0  # past offset 0, a quiet stream is no sign of a missing worker
    try:
        while True:
            if next_event is None:
                next_event = asyncio.ensure_future(events.get())
            waiting: set[asyncio.Future[Any]] = {next_event}
            if prompter is not None and not prompter.closed:
                if line_task is None:
                    line_task = asyncio.ensure_future(prompter.answers.lines.get())
                waiting.add(line_task)
            done, _ = await asyncio.wait(waiting, timeout=None if hinted else FIRST_EVENT_HINT_SECONDS,
                                         return_when=asyncio.FIRST_COMPLETED)
            if not done:
                hinted = True
                print(f"(no events from run {handle.run_id} yet: reading them needs a worker on its task "
                      "queue, even once the run has ended; is `agentloop worker` or `agentloop dev` running?)",
                      file=sys.stderr, flush=True)
                continue
            if next_event.done():
                hinted = True
                # Render all that arrived before asking anything, so a
                # replayed approval that is already decided is never asked.
                batch = [next_event.result()]
                next_event = None
                while not events.empty():
                    batch.append(events.get_nowait())
                for event in batch:
                    if event is end:
                        await pump_task  # raises what reading the stream raised
                        return terminal
                    renderer.render(event)
                    if is_terminal(event):
                        terminal = event
                    elif prompter is not None and isinstance(event, ApprovalRequested):
                        prompter.ask(event.approval)
                if prompter is not None and terminal is None:
                    await prompter.step(renderer.pending)
            if prompter is not None and line_task is not None and line_task.done():
                line, line_task = line_task.result(), None
                await prompter.answer(line)
    finally:
        for task in (pump_task, next_event, line_task):
            if task is not None and not task.done():
                task.cancel()
        if prompter is not None:
            prompter.answers.close()


async def _exit_code(handle: AgentRunHandle, terminal: AgentEvent | None) -> int:
    """0 for a run that completed or was stopped, 1 for one that failed or
    was cancelled; a stream without a terminal event asks the run's result."""
    if terminal is not None:
        return 0 if isinstance(terminal, RunCompleted) else 1
    try:
        result = await handle.result()
    except AgentRunFailed as failed:
        print(f"agentloop: {failed}", file=sys.stderr)
        return 1
    print(f"run {handle.run_id} has ended ({result.status}); no more events", file=sys.stderr)
    return 0


# Commands ---------------------------------------------------------------------


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
        if _stdin_is_terminal():
            prompter = _Prompter(handle, _TerminalAnswers(sys.stdin), sys.stderr, renderer.note)
        try:
            terminal = await follow(handle, renderer, prompter=prompter)
        except (KeyboardInterrupt, asyncio.CancelledError):
            await handle.cancel()
            print(f"\nrun {handle.run_id} cancelled", file=sys.stderr)
            return 130
        return await _exit_code(handle, terminal)


async def cmd_watch(args: argparse.Namespace) -> int:
    if args.from_offset < 0:
        raise UserError(f"--from {args.from_offset}: an offset is 0 or more (an event's seq)")
    from agentloop.search_attributes import AGENT_STATUS

    client = await ops_client()
    description = await _describe(client, args.run)
    handle = client.get_handle(args.run)
    status = _temporal_status(description)
    if status == "running":  # the run's own word says more (e.g. awaiting_approval)
        status = description.typed_search_attributes.get(AGENT_STATUS) or status
    print(f"watching run {args.run} ({status}) from offset {args.from_offset}; "
          "Ctrl-C stops watching, not the run", file=sys.stderr, flush=True)
    terminal = await follow(handle, make_renderer(jsonl=args.jsonl), from_offset=args.from_offset)
    return await _exit_code(handle, terminal)


async def cmd_dev(args: argparse.Namespace) -> int:
    config = TemporalConfig.from_env()
    config.imports += args.imports
    if config.address:
        raise UserError("TEMPORAL_ADDRESS is set: `agentloop dev` starts its own server; unset it, "
                        "or run `agentloop worker` against that server")
    data_dir = Path(args.data_dir) if args.data_dir else None
    role = args.role or config.role
    async with session(
        config, with_worker=True, workspace=args.workspace, ui=not args.headless,
        port=args.port, ui_port=args.ui_port, data_dir=data_dir, role=role,
    ) as s:
        from agentloop.activities.sandbox import describe
        from agentloop.workers.worker import tool_task_queue

        print(f"Temporal dev server: {s.config.address} (namespace {s.config.namespace})")
        if s.ui_url:
            print(f"Temporal UI:         {s.ui_url}")
        queues = {"all": f"{s.config.task_queue!r} and {tool_task_queue(s.config.task_queue)!r}",
                  "models": f"{s.config.task_queue!r} (start a tools worker: agentloop worker --role tools)",
                  "tools": f"{tool_task_queue(s.config.task_queue)!r}"}[role]
        print(f"Worker ({role}) polling task queue {queues}. Ctrl-C stops both.")
        if role != "models":
            print(describe())
        print(f"\n  export TEMPORAL_ADDRESS={s.config.address}", flush=True)
        print("\nRuns waiting for you (from another terminal):  agentloop list --status awaiting_approval",
              flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        import signal

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        print("stopping", file=sys.stderr)
    return 0


async def cmd_worker(args: argparse.Namespace) -> int:
    from agentloop.workers.worker import run_worker

    config = TemporalConfig.from_env()
    config.imports += args.imports
    if args.role:
        config.role = args.role
    await run_worker(config, workspace=args.workspace)
    return 0


def _stdin_is_terminal() -> bool:
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


async def _answer(request: Awaitable[T], what: str, run_id: str) -> T:
    """Wait for a query or update that a worker must answer, with a limit."""
    try:
        return await asyncio.wait_for(request, OPS_TIMEOUT_SECONDS)
    except asyncio.TimeoutError:
        raise CommandFailed(
            f"no worker answered {what} for run {run_id} within {OPS_TIMEOUT_SECONDS:g}s, so nothing was "
            "changed; start a worker for the run's task queue (`agentloop worker`, or `agentloop dev`) "
            "and try again"
        ) from None


async def _describe(client: AgentClient, run_id: str) -> Any:
    """The run's Temporal description; CommandFailed when there is no such run."""
    from temporalio.service import RPCError, RPCStatusCode

    try:
        return await client.temporal.get_workflow_handle(run_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise CommandFailed(
                f"no run {run_id!r} in namespace {client.temporal.namespace!r}; "
                "`agentloop list` shows the runs there"
            ) from None
        raise


def _temporal_status(description: Any) -> str:
    from temporalio.client import WorkflowExecutionStatus as S

    return {
        S.RUNNING: "running", S.COMPLETED: "completed", S.FAILED: "failed", S.CANCELED: "cancelled",
        S.TERMINATED: "terminated", S.TIMED_OUT: "timed_out", S.CONTINUED_AS_NEW: "continued",
    }.get(description.status, "unknown")


async def _running_handle(client: AgentClient, run_id: str, request: str) -> AgentRunHandle:
    """The handle of a run that is still going; CommandFailed otherwise."""
    from temporalio.client import WorkflowExecutionStatus

    from agentloop.search_attributes import AGENT_STATUS

    description = await _describe(client, run_id)
    if description.status != WorkflowExecutionStatus.RUNNING:
        status = description.typed_search_attributes.get(AGENT_STATUS) or _temporal_status(description)
        if status in ("running", "awaiting_approval", "requires_action"):
            status = _temporal_status(description)
        raise CommandFailed(f"run {run_id} has ended ({status}); it takes no {request} any more")
    return client.get_handle(run_id)


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
    from agentloop.approvals import ApprovalDecision

    if args.deny and args.result is not None:
        raise UserError("--deny takes --reason, not --result; to answer the model with your own text "
                        "instead of running the tool, use --skip --result TEXT (or --result TEXT alone "
                        "to approve with an override)")
    decision = "deny" if args.deny else "skip" if args.skip else "approve"
    client = await ops_client()
    handle = await _running_handle(client, args.run, "decisions")
    accepted = await _answer(
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
    from agentloop.approvals import ToolOutput

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
    handle = await _running_handle(client, args.run, "tool outputs")
    accepted = await _answer(handle.submit_tool_outputs(outputs), "the tool outputs", args.run)
    kind = "error output" if args.error else "output"
    print(f"submitted {kind} for {', '.join(accepted.call_ids)} in run {args.run}; "
          f"{_still_pending(accepted.still_pending)}")
    return 0


async def cmd_stop(args: argparse.Namespace) -> int:
    client = await ops_client()
    handle = await _running_handle(client, args.run, "stop request")
    await handle.stop(args.reason)
    print(f"asked run {args.run} to stop: it ends `stopped` once its current step is done "
          "(calls waiting for a decision are answered as stopped)")
    return 0


async def cmd_cancel(args: argparse.Namespace) -> int:
    client = await ops_client()
    handle = await _running_handle(client, args.run, "cancellation")
    await handle.cancel()
    print(f"cancelled run {args.run}: its running LLM calls and tools are cancelled and it ends "
          f"`cancelled`; `agentloop show {args.run}` shows where it stopped")
    return 0


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]


async def cmd_list(args: argparse.Namespace) -> int:
    from temporalio.service import RPCError, RPCStatusCode

    from agentloop.client import runs_query

    client = await ops_client()
    try:
        runs = await client.list_runs(status=args.status, name=args.name, query=args.query, limit=args.limit)
    except RPCError as err:
        if err.status == RPCStatusCode.INVALID_ARGUMENT:
            raise UserError(f"the server rejected the query {runs_query(args.status, args.name, args.query)!r}: "
                            f"{err.message}; fix --query (Temporal's list filter syntax, e.g. "
                            "'AgentModel=\"openai:gpt-4.1\"')") from None
        raise
    if args.json:
        for run in runs:
            print(run.model_dump_json())
        return 0
    if not runs:
        print("no runs match", file=sys.stderr)
        return 0
    rows = [["RUN ID", "STATUS", "AGENT", "MODEL", "PENDING TOOLS", "STARTED"]]
    rows += [[r.run_id, str(r.status), r.agent_name or "-", r.model or "-",
              ",".join(r.pending_tools) or "-", when(r.started_at)] for r in runs]
    print("\n".join(_table(rows)))
    return 0


async def _ended_state(client: AgentClient, run_id: str, description: Any) -> tuple[RunState, str]:
    """A finished run's state and final text, from its result (no worker needed)."""
    from agentloop.run import RunState
    from agentloop.search_attributes import AGENT_MODEL, AGENT_NAME

    attrs = description.typed_search_attributes
    state = RunState(run_id=run_id, status="failed", agent_name=attrs.get(AGENT_NAME) or "",
                     model=attrs.get(AGENT_MODEL) or "")
    result: AgentRunResult | None
    try:
        result = await client.get_handle(run_id).result()
    except AgentRunFailed as failed:
        result = failed.result
        state.status = "cancelled" if failed.reason == "cancelled" else "failed"
        state.reason = failed.reason  # type: ignore[assignment]
        state.error = None if failed.reason == "cancelled" else str(failed)
    if result is None:
        return state, ""
    state.status, state.reason, state.error = result.status, result.reason, result.error
    state.step, state.usage = result.report.step_count, result.usage
    return state, result.final_text


async def cmd_show(args: argparse.Namespace) -> int:
    from temporalio.client import WorkflowExecutionStatus

    client = await ops_client()
    description = await _describe(client, args.run)
    final_text = ""
    if description.status == WorkflowExecutionStatus.RUNNING:
        state = await _answer(client.get_handle(args.run).state(), "the state query", args.run)
    else:
        state, final_text = await _ended_state(client, args.run, description)
    if args.json:
        print(json.dumps({**state.model_dump(mode="json"), "final_text": final_text}, ensure_ascii=False))
        return 0
    for line in describe_state(state, final_text, started=description.start_time, closed=description.close_time):
        print(line)
    return 0


def describe_state(state: RunState, final_text: str = "", *, started: datetime | None = None,
                   closed: datetime | None = None) -> list[str]:
    """What ``agentloop show`` prints about a run."""
    lines = [f"run {state.run_id}"]
    if state.agent_name or state.model:
        lines.append(f"  agent:    {state.agent_name or '-'} on {state.model or '-'}")
    status = state.status + (f" ({state.reason})" if state.reason and state.reason not in ("done", state.status)
                             else "")
    if state.stop_requested and state.status not in ("stopped", "completed", "failed", "cancelled"):
        status += ", stop requested"
    lines.append(f"  status:   {status}")
    if state.error:
        lines.append(f"  error:    {state.error}")
    if state.status in ("running", "awaiting_approval", "requires_action"):
        # RunState.step counts the steps done; the one under way is the next.
        lines.append(f"  step:     {state.step + 1} (under way)")
    else:
        lines.append(f"  steps:    {state.step}")
    usage = state.usage
    lines.append(f"  usage:    {usage.input_tokens} in / {usage.output_tokens} out tokens, "
                 f"{usage.requests} LLM request{'' if usage.requests == 1 else 's'}")
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
    # Both flags append (action, tool) to one list, so rules keep the order given.
    run.add_argument("--allow", dest="rules", action="append", default=[], metavar="TOOL",
                     type=lambda tool: ("allow", tool), help="run TOOL's calls without asking; repeatable "
                     "(a glob such as 'git_*' works)")
    run.add_argument("--ask", dest="rules", action="append", metavar="TOOL",
                     type=lambda tool: ("ask", tool), help="ask before each call of TOOL, even a read-only "
                     "one; repeatable")
    run.add_argument("--yes", action="store_true", help="run every call without asking (tools named "
                     "with --ask still ask); by default read-only tools run and others ask")
    run.add_argument("--jsonl", action="store_true", help="print the run's events, one JSON object a line, "
                     "and nothing else on stdout")
    imports(run)

    dev = sub.add_parser("dev", help="keep a local Temporal server and a worker running")
    dev.add_argument("--port", type=int, default=7233)
    dev.add_argument("--ui-port", type=int, default=8233)
    dev.add_argument("--headless", action="store_true", help="no web UI")
    dev.add_argument("--data-dir", help="where the SQLite file lives (default: $AGENTLOOP_HOME)")
    dev.add_argument("--workspace", help="default workspace for runs that name none")
    dev.add_argument("--role", choices=WORKER_ROLES, help="what its worker runs (default: "
                     "$AGENTLOOP_WORKER_ROLE, else all); see `agentloop worker --help`")
    imports(dev)

    worker = sub.add_parser(
        "worker", help="run a worker against $TEMPORAL_ADDRESS",
        description="Run a worker. Role models polls the task queue (workflows and LLM calls: give it the "
                    "provider keys); role tools polls <task queue>-tools (tool calls: it refuses to start "
                    "with provider keys in its environment); role all does both in one process.",
    )
    worker.add_argument("--workspace", help="default workspace for runs that name none")
    worker.add_argument("--role", choices=WORKER_ROLES,
                        help="models, tools or all (default: $AGENTLOOP_WORKER_ROLE, else all)")
    imports(worker)

    approve = sub.add_parser(
        "approve", help="decide a call waiting for approval (approve, --deny or --skip)",
        description="Decide a call waiting for approval. `agentloop show RUN` lists the pending calls.",
    )
    approve.add_argument("run", help="run id")
    approve.add_argument("call", help="the pending call's id")
    choice = approve.add_mutually_exclusive_group()
    choice.add_argument("--deny", action="store_true", help="do not run it; the model hears it was denied")
    choice.add_argument("--skip", action="store_true",
                        help="do not run it; the model gets --result, or a note that it was skipped")
    approve.add_argument("--reason", help="why; a denial's reason reaches the model")
    approve.add_argument("--result", help="answer the model with this text instead of running the tool")
    approve.add_argument("--by", help="who decided, kept in the run report (default: your user name)")

    submit = sub.add_parser(
        "submit", help="submit the outputs of calls the client runs (requires_action)",
        description="Answer every call the run waits for in one go. OUTPUT '-' reads it from stdin.",
    )
    submit.add_argument("run", help="run id")
    submit.add_argument("call", nargs="?", help="a pending call's id")
    submit.add_argument("output_text", nargs="?", metavar="output", help="its output ('-': read stdin)")
    submit.add_argument("--output", dest="outputs", nargs=2, action="append", default=[],
                        metavar=("CALL", "OUTPUT"), help="another call's output; repeatable")
    submit.add_argument("--error", action="store_true", help="the outputs are errors (the calls failed)")

    stop = sub.add_parser("stop", help="end a run `stopped` after its current step")
    stop.add_argument("run", help="run id")
    stop.add_argument("--reason", help="why, kept in the run's report")

    cancel = sub.add_parser("cancel", help="cancel a run now (running tools are killed)")
    cancel.add_argument("run", help="run id")

    listing = sub.add_parser("list", help="list runs, newest first")
    listing.add_argument("--status", choices=RUN_STATUSES)
    listing.add_argument("--name", help="agent name (AgentSpec.name)")
    listing.add_argument("--query", metavar="EXTRA",
                         help="extra Temporal list filter, e.g. 'AgentModel=\"openai:gpt-4.1\"'")
    listing.add_argument("--limit", type=int, default=50, help="most runs to show (default: 50)")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")

    watch = sub.add_parser(
        "watch", help="follow a run's events until it ends (a finished run's are replayed)",
        description="Show a run's events as `agentloop run` does, from its start or from an offset, until "
                    "the run ends. Exits 0 when it completed or was stopped, 1 when it failed or was cancelled.",
    )
    watch.add_argument("run", help="run id")
    watch.add_argument("--from", dest="from_offset", type=int, default=0, metavar="OFFSET",
                       help="start at this offset of the stream (an event's seq; default: 0, the start)")
    watch.add_argument("--jsonl", action="store_true", help="one JSON object per event and line, "
                       "and nothing else on stdout")

    show = sub.add_parser("show", help="a run's status, usage, pending calls and final text")
    show.add_argument("run", help="run id")
    show.add_argument("--json", action="store_true", help="the state as one JSON object")
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
    command = {
        "run": cmd_run, "dev": cmd_dev, "worker": cmd_worker, "approve": cmd_approve, "submit": cmd_submit,
        "stop": cmd_stop, "cancel": cmd_cancel, "list": cmd_list, "show": cmd_show, "watch": cmd_watch,
    }[args.command]
    try:
        return asyncio.run(command(args))
    except UserError as exc:
        print(f"agentloop: {exc}", file=sys.stderr)
        return 2
    except (DecisionRejected, CommandFailed) as exc:
        print(f"agentloop: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`agentloop watch RUN --jsonl | head`): stop
        # quietly, and let nothing write to the closed pipe again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


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
