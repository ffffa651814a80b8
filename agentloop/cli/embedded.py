"""The embedded Temporal dev server of ``agentloop run`` and ``agentloop
dev``, and how every command finds a server.

A command that starts the embedded server holds ``server.lock`` in the data
directory (``$AGENTLOOP_HOME``) for as long as the server runs; the lock file
says which command holds it (``run`` or ``dev``, its pid, and once the server
is up its address, namespace and task queue), and ``server.address`` holds the
address for ops commands in other terminals. A server that outlived its
command (killed before it could stop it) is found by its data file and
stopped by the next command that takes the lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from agentloop.cli.common import say
from agentloop.shared.base.errors import UserError
from agentloop.shared.base.text import cut
from agentloop.workers.config import (
    ADDRESS_FILE,
    LOCK_FILE,
    Holder,
    TemporalConfig,
    agentloop_home,
    connect_client,
    lock_held,
    read_holder,
)

if TYPE_CHECKING:
    from agentloop.client.agent_client import AgentClient

def default_workspace(workspace: str | None) -> str:
    """The workspace a worker of this process gives runs that name none (as
    its activities resolve it)."""
    return os.path.abspath(workspace or os.environ.get("AGENTLOOP_WORKSPACE") or os.getcwd())


@dataclass
class Session:
    """A connection for one CLI command, with the server and worker it started."""

    client: Any
    config: TemporalConfig
    ui_url: str | None = None


def _write_lock_info(lock: IO[str], info: dict[str, Any]) -> None:
    lock.seek(0)
    lock.truncate()
    lock.write(json.dumps(info) + "\n")
    lock.flush()


def busy_message(data_dir: Path, holder: Holder | None) -> str:
    """Why a command cannot start the embedded server in ``data_dir``, and what to do."""
    holder = holder or Holder()
    elsewhere = "or set AGENTLOOP_HOME to another directory for a server of your own"
    if holder.command == "run":
        at = f" at {holder.address}" if holder.address else ""
        return (f"{holder.describe()} is using the embedded Temporal server in {data_dir}{at}, and stops it when "
                f"its run ends; wait for it to end, or keep a server up with `agentloop dev` in another terminal "
                f"(`agentloop run` then uses it), {elsewhere}")
    if holder.command == "dev":
        at = f" at {holder.address}" if holder.address else ""
        return (f"{holder.describe()} is already serving {data_dir}{at}; use that one "
                f"(export TEMPORAL_ADDRESS={holder.address or '...'}), {elsewhere}")
    return f"{holder.describe()} is using the embedded Temporal server in {data_dir}; wait for it to end, {elsewhere}"


@contextlib.contextmanager
def data_dir_lock(data_dir: Path, command: str) -> Iterator[IO[str]]:
    """Hold the data directory for ``command`` (``run`` or ``dev``).

    Raises:
        UserError: Another command holds it; the message names it and its address.
    """
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        lock = open(data_dir / LOCK_FILE, "a+")  # noqa: SIM115 - "a+": a refused open must not wipe the holder's note
    except OSError as exc:
        raise UserError(f"cannot keep the embedded server's data in {data_dir}: {exc.strerror}; set AGENTLOOP_HOME "
                        "(or `agentloop dev --data-dir`) to a directory you can write") from None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise UserError(busy_message(data_dir, read_holder(data_dir))) from None
    try:
        _write_lock_info(lock, {"command": command, "pid": os.getpid()})
        yield lock
    finally:
        lock.close()


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def stop_stale_servers(db_file: Path) -> None:
    """Stop a Temporal server an earlier agentloop command left running on
    ``db_file`` (its command was killed before it could stop it). Call with
    the data directory's lock held: then no live command owns such a server.

    Raises:
        UserError: A server agentloop did not start uses the file, or one
            would not stop.
    """
    from agentloop.workers.devserver import servers_using, stop_process

    for pid, ours in servers_using(db_file):
        if not ours:
            raise UserError(
                f"a Temporal server that agentloop did not start (pid {pid}) is using {db_file}; stop it "
                f"(kill {pid}) and try again, or set AGENTLOOP_HOME to another directory"
            )
        say(f"agentloop: stopping the Temporal server (pid {pid}) that an earlier agentloop command left "
            f"running on {db_file}")
        if not stop_process(pid):
            raise UserError(f"the Temporal server (pid {pid}) left running on {db_file} did not stop; "
                            f"kill it (kill -9 {pid}) and try again")


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
    if not lock_held(data_dir):
        raise UserError(f"no Temporal server to talk to: TEMPORAL_ADDRESS is unset and the agentloop "
                        f"command that wrote {path} has ended; {hint}")
    address = path.read_text().strip()
    if not address:
        raise UserError(f"{path} is empty; {hint}")
    return address


def running_dev_server(data_dir: Path | None = None) -> Holder | None:
    """The ``agentloop dev`` serving the data directory, when one is up.

    Raises:
        UserError: Another ``agentloop run`` holds the directory (its
            server stops with it); the message gives its address.
    """
    data_dir = data_dir or agentloop_home()
    holder = read_holder(data_dir)
    if holder is None:
        return None
    if holder.command == "dev" and holder.address:
        return holder
    raise UserError(busy_message(data_dir, holder))


def command_config(imports: list[str]) -> tuple[TemporalConfig, Holder | None]:
    """The Temporal configuration of a command that runs agents (``run``,
    ``send``, ``chat``): Temporal's environment configuration, else the
    running ``agentloop dev`` (its server, namespace and task queue), else
    none (the command embeds a server). Also the dev server used, if any."""
    config = TemporalConfig.from_env()
    config.imports += imports
    dev = running_dev_server() if config.address is None else None
    if dev is not None:
        # `agentloop dev` keeps a server and a worker up: run there, as with TEMPORAL_ADDRESS.
        config = config.for_dev_server(dev)
    return config, dev


async def ops_client() -> AgentClient:
    """A client for the ops commands: Temporal's environment configuration
    (``TEMPORAL_ADDRESS``...), or the embedded server of a running
    ``agentloop run``/``dev``. Never starts anything."""
    from agentloop.client.agent_client import AgentClient
    from agentloop.shared.base.encryption import converter_from_env

    config = TemporalConfig.from_env()
    if not config.address:
        config = config.for_address(embedded_server_address())
        config.source = str(agentloop_home() / ADDRESS_FILE)
    client = await connect_client(config, data_converter=converter_from_env())
    return AgentClient(client, task_queue=config.task_queue)


@contextlib.asynccontextmanager
async def reading_client(command: str) -> AsyncIterator[AgentClient]:
    """A client for a command that reads runs (``list``, ``show``, ``watch``,
    ``export``): as :func:`ops_client`, but when no server is running and
    the embedded server's data is there (an earlier ``agentloop run`` or
    ``dev``), it starts that server and a worker, as ``run`` does, for as
    long as the block runs."""
    from agentloop.client.agent_client import AgentClient

    config = TemporalConfig.from_env()
    data_dir = agentloop_home()
    if config.address or lock_held(data_dir) or not (data_dir / "temporal.db").is_file():
        yield await ops_client()
        return
    say(f"agentloop: no Temporal server is running; starting the embedded one on {data_dir} for this command")
    async with session(config, with_worker=True, command=command) as s:
        yield AgentClient(s.client, task_queue=s.config.task_queue)


def no_such_namespace(message: str) -> str:
    """The sentence for a namespace the Temporal server does not have."""
    return (f"the Temporal server has no such namespace ({message}); set TEMPORAL_NAMESPACE to one it "
            "has, or create it (`temporal operator namespace create`)")


@contextlib.asynccontextmanager
async def _running(worker: Any) -> AsyncIterator[None]:
    """Run ``worker`` for the block. A worker the server refuses at its start
    (a namespace it does not have) cancels the block and fails with the
    SDK's ``RuntimeError``; that becomes the sentence ``agentloop run`` says
    when its own client meets the same namespace first."""
    try:
        async with worker:
            yield
    except RuntimeError as exc:
        text = " ".join(str(exc).split())
        if text.startswith("Worker validation failed") and "NamespaceNotFoundFailure" in text:
            found = text.split('message: "', 1)[-1].split('"', 1)[0] if 'message: "' in text else text[:200]
            raise UserError(no_such_namespace(found)) from None
        raise


@contextlib.asynccontextmanager
async def session(
    config: TemporalConfig,
    *,
    with_worker: bool,
    command: str = "run",
    workspace: str | None = None,
    ui: bool = False,
    port: int | None = None,
    ui_port: int | None = None,
    ui_codec_endpoint: str | None = None,
    data_dir: Path | None = None,
    role: str = "all",
) -> AsyncIterator[Session]:
    """Connect to ``config.address``, or start the embedded server for
    ``command``; optionally run a worker of ``role`` in this process for as
    long as the block runs. Everything started is stopped when the block
    ends, however it ends (an error, or a signal that cancels the command).

    A process that runs models holds the provider keys: it makes itself
    non-dumpable (see :func:`agentloop.workers.worker.protect_process`); shell commands
    run in the worker's sandbox (:mod:`agentloop.activities.shell_sandbox.sandbox`), checked here
    before anything starts.
    """
    from agentloop.shared.base.encryption import converter_from_env
    from agentloop.workers.worker import (
        build_worker,
        check_role,
        check_tools_environment,
        default_workspace_roots,
        import_modules,
        protect_process,
        tune_collector,
    )

    if with_worker:
        check_role(role)
        tune_collector()
        if role == "tools":
            check_tools_environment()
        protect_process()
        if role != "models":
            from agentloop.activities.shell_sandbox.sandbox import describe

            describe()  # a bad or unusable AGENTLOOP_SHELL_SANDBOX stops us here, before the server starts
    import_modules(config.imports)
    async with contextlib.AsyncExitStack() as stack:
        ui_url = None
        if config.address is None:
            from agentloop.workers.devserver import DevServer

            data_dir = data_dir or agentloop_home()
            lock = stack.enter_context(data_dir_lock(data_dir, command))
            server = DevServer(
                db_file=data_dir / "temporal.db",
                log_file=data_dir / "temporal.log",
                ui=ui,
                port=port,
                ui_port=ui_port,
                ui_codec_endpoint=ui_codec_endpoint,
                namespace=config.namespace,
            )
            stop_stale_servers(server.db_file)  # type: ignore[arg-type]
            stack.callback(server.stop)
            server.start()
            await server.wait_ready()
            # Ops commands in other terminals find the server here; removed
            # before the server stops (callbacks run last in, first out).
            address_file = data_dir / ADDRESS_FILE
            write_atomically(address_file, server.address + "\n")
            stack.callback(address_file.unlink, missing_ok=True)
            _write_lock_info(lock, {"command": command, "pid": os.getpid(), "namespace": config.namespace,
                                    "task_queue": config.task_queue, "server_pid": server.pid,
                                    "ui_url": server.ui_url, "workspace": default_workspace(workspace)})
            config = config.for_address(server.address)
            ui_url = server.ui_url
        client = await connect_client(config, data_converter=converter_from_env())
        if with_worker:
            worker = build_worker(client, task_queue=config.task_queue, workspace=workspace, role=role,
                                  workspace_roots=default_workspace_roots(workspace))
            await stack.enter_async_context(_running(worker))
        yield Session(client=client, config=config, ui_url=ui_url)


def describe_rpc_error(err: Exception) -> str:
    """A sentence for a request the Temporal server refused or could not take."""
    from temporalio.service import RPCError, RPCStatusCode

    assert isinstance(err, RPCError)
    message = " ".join(err.message.split())
    message = cut(message, 300)
    status = err.status
    if status == RPCStatusCode.NOT_FOUND and "namespace" in message.lower():
        return no_such_namespace(message)
    if status in (RPCStatusCode.UNAUTHENTICATED, RPCStatusCode.PERMISSION_DENIED):
        return (f"the Temporal server refused this client ({status.name}: {message}); check TEMPORAL_API_KEY "
                "or the client certificate (TEMPORAL_TLS_CLIENT_CERT_PATH), and the namespace")
    if status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED):
        return (f"lost the connection to the Temporal server ({status.name}: {message}); check that it is "
                "running, then try again")
    name = status.name if status is not None else "error"
    return f"the Temporal server refused the request ({name}: {message})"
