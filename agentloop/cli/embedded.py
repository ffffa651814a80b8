"""The embedded Temporal dev server of ``agentloop run`` and ``agentloop
dev``: the data directory's lock, ``server.address``, and :func:`session`,
which connects to Temporal (or starts the embedded server) and runs a worker."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentloop.cli.common import ADDRESS_FILE, agentloop_home
from agentloop.config import TemporalConfig
from agentloop.errors import UserError

if TYPE_CHECKING:
    from agentloop.client import AgentClient


@dataclass
class Session:
    """A connection for one CLI command, with the server and worker it started."""

    client: Any
    config: TemporalConfig
    ui_url: str | None = None


@contextlib.contextmanager
def data_dir_lock(data_dir: Path) -> Any:
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


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def lock_held(data_dir: Path) -> bool:
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
    if not lock_held(data_dir):
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
            stack.enter_context(data_dir_lock(data_dir))
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
            write_atomically(address_file, server.address + "\n")
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
