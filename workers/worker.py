"""The worker process: registration, roles, configuration from the
environment, graceful shutdown.

A run's tool activities (``resolve_tools``, ``execute_tool``) go to their own
task queue, ``<task queue>-tools``, so that they can run in a process that
holds no provider keys: a worker's role says which queues it polls (``models``:
the run's queue, with the workflow and ``call_model``; ``tools``: the tools
queue; ``all``: both, as two Temporal workers in one process).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import importlib
import logging
import signal
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from agentloop.activities import sandbox
from agentloop.activities.agent_activities import AgentActivities
from agentloop.activities.builtin_tools import register_builtin_tools
from agentloop.activities.models import ModelResolver
from agentloop.config import WORKER_ROLES, TemporalConfig, provider_keys_in
from agentloop.errors import UserError
from agentloop.search_attributes import SEARCH_ATTRIBUTES, create_commands
from agentloop.tools import ToolRegistry, default_registry
from agentloop.workflows.agent_run import AgentRunWorkflow
from agentloop.workflows.versions import TOOL_QUEUE_SUFFIX

log = logging.getLogger("agentloop.worker")


async def connect(address: str, namespace: str = "default") -> Client:
    """A Temporal client with the pydantic data converter (use it on both sides)."""
    return await Client.connect(address, namespace=namespace, data_converter=pydantic_data_converter)


def import_modules(modules: list[str]) -> None:
    """Import user modules that register tools and scripted models.

    Raises:
        UserError: A module could not be imported.
    """
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise UserError(f"could not import {name!r} for the worker: {exc}") from exc


def tool_task_queue(task_queue: str) -> str:
    """The queue a run on ``task_queue`` sends its tool activities to."""
    return task_queue + TOOL_QUEUE_SUFFIX


def check_role(role: str) -> str:
    """``role``, checked.

    Raises:
        UserError: Not one of :data:`~agentloop.config.WORKER_ROLES`.
    """
    if role not in WORKER_ROLES:
        raise UserError(f"worker role {role!r} is not one of {', '.join(WORKER_ROLES)} "
                        "(--role or AGENTLOOP_WORKER_ROLE)")
    return role


def check_tools_environment(environ: dict[str, str] | None = None) -> None:
    """Refuse to run tools in a process that holds provider keys.

    Dropping them from ``os.environ`` would not do: ``/proc/<pid>/environ``
    keeps showing what the process started with.

    Raises:
        UserError: One of :data:`~agentloop.config.PROVIDER_KEY_VARIABLES` is set.
    """
    present = provider_keys_in(environ)
    if present:
        raise UserError(
            f"a tools worker must not hold provider keys, but {', '.join(present)} "
            f"{'is' if len(present) == 1 else 'are'} set in its environment; start it without them "
            f"(e.g. env -u {' -u '.join(present)} agentloop worker --role tools), and give the keys "
            "to the models worker only"
        )


class AgentWorker:
    """The Temporal workers of one role, run together.

    ``async with`` runs them (as :class:`temporalio.worker.Worker` does);
    :attr:`workers` holds them: for role ``all`` the models worker (the run's
    task queue) and the tools worker (:func:`tool_task_queue`).

    Attributes:
        role: ``all``, ``models`` or ``tools``.
        task_queue: The run's task queue.
        tool_task_queue: Where its tool activities go.
        workers: The Temporal workers.
    """

    def __init__(self, role: str, task_queue: str, workers: list[Worker]) -> None:
        self.role = role
        self.task_queue = task_queue
        self.tool_task_queue = tool_task_queue(task_queue)
        self.workers = workers
        self._stack: contextlib.AsyncExitStack | None = None

    async def __aenter__(self) -> AgentWorker:
        async with contextlib.AsyncExitStack() as stack:
            for worker in self.workers:
                await stack.enter_async_context(worker)
            self._stack = stack.pop_all()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.__aexit__(*exc_info)

    async def run(self) -> None:
        """Run until :meth:`shutdown` (or cancellation)."""
        await asyncio.gather(*(worker.run() for worker in self.workers))

    async def shutdown(self) -> None:
        """Stop polling; let in-flight activities finish (graceful timeout)."""
        await asyncio.gather(*(worker.shutdown() for worker in self.workers))


def build_worker(
    client: Client,
    *,
    task_queue: str,
    registry: ToolRegistry | None = None,
    models: ModelResolver | None = None,
    workspace: str | Path | None = None,
    role: str = "all",
    graceful_shutdown_timeout: timedelta = timedelta(seconds=30),
    **worker_options: Any,
) -> AgentWorker:
    """The workers that run agent workflows and their activities.

    Args:
        client: Connected with :func:`connect` (pydantic data converter).
        task_queue: The queue runs are started on; tool activities go to
            ``<task_queue>-tools``.
        registry: Tools; the default registry (with the built-in tools) if None.
        models: Model resolution; built-in providers from the environment if None.
        workspace: Default workspace for runs whose spec names none.
        role: ``all`` (both queues, in this process), ``models`` (the run's
            queue: workflows and ``call_model``) or ``tools`` (the tools
            queue: ``resolve_tools`` and ``execute_tool``; refuses to build
            while provider keys are in the environment).
        graceful_shutdown_timeout: On shutdown, how long in-flight activities
            may finish before they are cancelled.
        worker_options: Passed on to each :class:`temporalio.worker.Worker`.

    Raises:
        UserError: An unknown role, a tools worker with provider keys in its
            environment, or a shell sandbox setting that is invalid or cannot
            work here.
    """
    check_role(role)
    if role == "tools":
        check_tools_environment()
    if role != "models":
        sandbox.describe()  # fail now, not at the first shell command
    if registry is None:
        registry = default_registry
        register_builtin_tools(registry)
    acts = AgentActivities(registry, models, workspace)
    # Cancellation reaches an activity on a heartbeat's response; the SDK's
    # default throttle (up to 0.8 x heartbeat timeout) would delay a cancelled
    # shell command by tens of seconds.
    worker_options.setdefault("max_heartbeat_throttle_interval", timedelta(seconds=1))
    workers = []
    if role in ("all", "models"):
        workers.append(Worker(
            client,
            task_queue=task_queue,
            workflows=[AgentRunWorkflow],
            workflow_runner=workflow_runner(),
            # Runs started before tool activities had their own queue still
            # send them here; a role ``all`` worker serves those too.
            activities=[acts.call_model] + ([acts.resolve_tools, acts.execute_tool] if role == "all" else []),
            graceful_shutdown_timeout=graceful_shutdown_timeout,
            **worker_options,
        ))
    if role in ("all", "tools"):
        workers.append(Worker(
            client,
            task_queue=tool_task_queue(task_queue),
            activities=[acts.resolve_tools, acts.execute_tool],
            graceful_shutdown_timeout=graceful_shutdown_timeout,
            **worker_options,
        ))
    return AgentWorker(role, task_queue, workers)


def workflow_runner() -> SandboxedWorkflowRunner:
    """The sandbox agentloop's workflows run in: the ``agentloop`` package is
    passed through (imported once, outside the sandbox). Its workflow code is
    deterministic and keeps no module state, and one class identity for its
    pydantic models is what the data converter needs."""
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules("agentloop")
    )


def protect_process() -> bool:
    """Make this process's memory and ``/proc/<pid>/environ`` unreadable to
    other processes of the same (non-root) user: ``PR_SET_DUMPABLE`` 0.

    Defence in depth for processes that hold provider keys, for when shell
    commands run without a sandbox; root (``CAP_SYS_PTRACE``) still reads
    them. Returns whether it worked (Linux only).
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(4, 0, 0, 0, 0) == 0  # PR_SET_DUMPABLE
    except (OSError, AttributeError):
        return False


async def missing_search_attributes(client: Client) -> list[str] | None:
    """Names of agentloop's search attributes the client's namespace lacks,
    or None when the server will not say (e.g. no operator permission)."""
    from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
    from temporalio.service import RPCError

    try:
        known = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=client.namespace)
        )
    except RPCError as err:
        log.warning("could not check search attributes (%s); runs fail to index if they are missing", err.message)
        return None
    names = set(known.custom_attributes) | set(known.system_attributes)
    return [name for name in SEARCH_ATTRIBUTES if name not in names]


async def run_worker(config: TemporalConfig, *, workspace: str | None = None) -> None:
    """Run a worker of ``config.role`` until SIGINT or SIGTERM, then shut down
    gracefully."""
    if not config.address:
        raise UserError("TEMPORAL_ADDRESS is not set: point the worker at a Temporal server")
    role = check_role(config.role)
    if role == "tools":
        check_tools_environment()
    else:
        protect_process()
    import_modules(config.imports)
    client = await connect(config.address, config.namespace)
    if role != "tools":
        missing = await missing_search_attributes(client)
        if missing:
            raise UserError(
                f"namespace {config.namespace!r} lacks the search attributes {', '.join(missing)}, which "
                "every run keeps up to date; register them once, then start the worker again:\n  "
                + "\n  ".join(create_commands(config.namespace))
            )
    worker = build_worker(client, task_queue=config.task_queue, workspace=workspace, role=role)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    queues = {"all": f"{worker.task_queue} and {worker.tool_task_queue}", "models": worker.task_queue,
              "tools": worker.tool_task_queue}[role]
    log.info("%s worker polling %s on %s (%s)", role, queues, config.address, config.namespace)
    if role != "models":
        log.info("%s", sandbox.describe())
    async with worker:
        await stop.wait()
        log.info("shutting down: letting in-flight activities finish")
