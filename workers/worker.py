"""The worker process: registration, roles, configuration from the
environment, graceful shutdown.

A run's tool activities (``resolve_tools``, ``execute_tool``) go to their own
task queue, ``<task queue>-tools``, so that they can run in a process that
holds no provider keys: a worker's role says which queues it polls (``models``:
the run's queue, with the workflow and ``call_model``; ``tools``: the tools
queue; ``all``: both, in one process, which also looks a run's tools up as a
local activity and takes its tool calls on the run's queue). :class:`~agentloop.workers.plugin.AgentLoopPlugin`
does the registration; :func:`build_worker` is a Temporal ``Worker`` with it.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import importlib
import logging
import os
import signal
import sys
import warnings
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.worker import Worker, WorkerDeploymentConfig

from agentloop.activities.providers.models import ModelResolver
from agentloop.activities.shell_sandbox import sandbox
from agentloop.shared.base.encryption import converter_from_env
from agentloop.shared.base.errors import UserError
from agentloop.shared.definition.lanes import lane_queue
from agentloop.shared.runs.search_attributes import SEARCH_ATTRIBUTES, create_commands
from agentloop.tools.registry import ToolRegistry
from agentloop.workers.config import TemporalConfig, connect_client, gc_threshold_from_env
from agentloop.workers.plugin import AgentLoopPlugin, check_role, check_tools_environment, tool_task_queue
from agentloop.workers.telemetry import Telemetry, configure_logging, metrics_port_from_env, serve_metrics

__all__ = [
    "build_worker",
    "check_role",
    "check_tools_environment",
    "connect",
    "default_workspace_roots",
    "deployment_config",
    "describe_worker",
    "import_modules",
    "missing_search_attributes",
    "protect_process",
    "run_worker",
    "tool_task_queue",
    "tune_collector",
]

log = logging.getLogger("agentloop.worker")


async def connect(address: str, namespace: str = "default", **options: Any) -> Client:
    """A Temporal client with the pydantic data converter, encrypting when
    ``AGENTLOOP_ENCRYPTION_KEYS`` is set (use it on both sides). It carries no plugin: workers built from it get
    theirs from :func:`build_worker`, and bare Workers built from it stay bare.
    ``options`` (``tls``, ``api_key``...) go to ``Client.connect``."""
    return await Client.connect(address, namespace=namespace, data_converter=converter_from_env(), **options)


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


def build_worker(
    client: Client,
    *,
    task_queue: str,
    registry: ToolRegistry | None = None,
    models: ModelResolver | None = None,
    workspace: str | Path | None = None,
    role: str = "all",
    mcp_servers: Any = None,
    telemetry: Any = None,
    graceful_shutdown_timeout: timedelta = timedelta(seconds=30),
    deployment: tuple[str, str] | None = None,
    workspace_roots: list[str | Path] | None = None,
    lanes: Sequence[str] | None = None,
    **worker_options: Any,
) -> Worker:
    """The Temporal worker of one role: a ``Worker`` with
    :class:`~agentloop.workers.plugin.AgentLoopPlugin`.

    Args:
        client: Connected with :func:`connect` (pydantic data converter).
        task_queue: The queue runs are started on; tool activities go to
            ``<task_queue>-tools``.
        registry: Tools; the default registry (with the built-in tools) if None.
        models: Model resolution; built-in providers from the environment if None.
        workspace: Default workspace for runs whose spec names none.
        role: ``all`` (the run's queue, and the tools queue beside it, in
            this process), ``models`` (the run's queue: workflows and
            ``call_model``) or ``tools`` (the tools queue: ``resolve_tools``
            and ``execute_tool``; refuses to build while provider keys are in
            the environment).
        mcp_servers: MCP servers by name (see :class:`~agentloop.workers.plugin.AgentLoopPlugin`);
            from the file ``AGENTLOOP_MCP_SERVERS`` names when None.
        telemetry: A :class:`~agentloop.workers.telemetry.Telemetry`; from
            the environment when None, none when False.
        graceful_shutdown_timeout: On shutdown, how long in-flight activities
            may finish before they are cancelled.
        deployment: ``(deployment name, build id)``: the worker registers as
            that Worker Deployment Version (:func:`deployment_config`), and
            runs stay on the version they started on (docs/deploying.md);
            None: an unversioned worker.
        workspace_roots: Directories runs' workspaces must lie strictly
            inside, or be ``workspace`` itself; ``AGENTLOOP_WORKSPACE_ROOTS``
            when None (:func:`default_workspace_roots` for the commands).
        lanes: The provider lanes a worker of role ``all`` or ``models``
            polls too (``<task_queue>-llm-<lane>``); from ``AGENTLOOP_LANES``
            when None, the built-in providers' lanes when that is unset.
        worker_options: Passed on to :class:`temporalio.worker.Worker`.

    Raises:
        UserError: An unknown role, a tools worker with provider keys in its
            environment, or a shell sandbox setting that is invalid or cannot
            work here.
    """
    plugin = AgentLoopPlugin(registry=registry, models=models, workspace=workspace, role=role,
                             mcp_servers=mcp_servers, telemetry=telemetry, workspace_roots=workspace_roots,
                             lanes=lanes)
    if deployment is not None:
        worker_options.setdefault("deployment_config", deployment_config(*deployment))
    with warnings.catch_warnings():
        # A client from AgentClient.connect carries a plugin too: this
        # worker's own takes precedence (see AgentLoopPlugin), as intended.
        warnings.filterwarnings("ignore", message="The same plugin type", category=UserWarning)
        return Worker(
            client,
            task_queue=tool_task_queue(task_queue) if role == "tools" else task_queue,
            plugins=[plugin],
            graceful_shutdown_timeout=graceful_shutdown_timeout,
            **worker_options,
        )


def default_workspace_roots(workspace: str | Path | None) -> list[str | Path] | None:
    """The workspace roots of a worker that ``agentloop worker``, ``dev`` or
    ``run`` starts: ``AGENTLOOP_WORKSPACE_ROOTS`` when set (None: read
    there), else the worker's workspace (``--workspace``,
    ``AGENTLOOP_WORKSPACE``, or the directory it was started in). Runs
    then work in that directory or in one inside it, never above or beside."""
    if os.environ.get("AGENTLOOP_WORKSPACE_ROOTS", "").strip():
        return None
    return [workspace or os.environ.get("AGENTLOOP_WORKSPACE") or os.getcwd()]


def deployment_config(deployment_name: str, build_id: str) -> WorkerDeploymentConfig:
    """A Worker's versioning: the Worker Deployment Version
    ``deployment_name``/``build_id``, with Temporal's Worker Versioning on,
    and workflows pinned unless their definition says otherwise (agentloop's
    run is pinned; a thread moves at a turn boundary, see docs/deploying.md)."""
    return WorkerDeploymentConfig(
        version=WorkerDeploymentVersion(deployment_name=deployment_name, build_id=build_id),
        use_worker_versioning=True,
        default_versioning_behavior=VersioningBehavior.PINNED,
    )


def protect_process() -> bool:
    """Make this process's memory and ``/proc/<pid>/environ`` unreadable to
    other processes of the same user: ``PR_SET_DUMPABLE`` 0. Its ``/proc``
    entries then belong to root and need ``CAP_SYS_PTRACE``, which the
    shell sandbox drops in every mode, even for a root worker.

    Every worker role does it, for when shell commands run without a
    namespace; a process with ``CAP_SYS_PTRACE`` (root's debugger, py-spy
    run as root) still reads them. Children it starts are dumpable again
    (exec resets the flag). Returns whether it worked (Linux only).
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(4, 0, 0, 0, 0) == 0  # PR_SET_DUMPABLE
    except (OSError, AttributeError):
        return False


def tune_collector(environ: dict[str, str] | None = None) -> tuple[int, ...] | None:
    """Set this worker process's garbage-collector thresholds from
    ``AGENTLOOP_GC_THRESHOLD`` (:func:`agentloop.workers.config.gc_threshold_from_env`):
    what it set, or None when it kept Python's (the variable unset). For
    processes of the ``agentloop`` command; a worker in your own process
    keeps your settings.

    Raises:
        UserError: ``AGENTLOOP_GC_THRESHOLD`` is malformed.
    """
    thresholds = gc_threshold_from_env(environ)
    if thresholds is not None:
        gc.set_threshold(*thresholds)
    return thresholds


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


async def run_worker(config: TemporalConfig, *, workspace: str | None = None, metrics_port: int | None = None,
                     lanes: Sequence[str] | None = None) -> None:
    """Run a worker of ``config.role`` until SIGINT, SIGTERM or SIGHUP, then
    shut down gracefully. Prints one line on stderr when it polls (where, which
    queues, which tools) and one when it has stopped. Telemetry comes from
    the environment (:meth:`~agentloop.workers.telemetry.Telemetry.from_env`);
    with a metrics port, ``/metrics`` there serves agentloop's metrics and
    Temporal's runtime metrics."""
    if not config.address:
        raise UserError("no Temporal server to work for: set TEMPORAL_ADDRESS (or an address in a profile "
                        "of Temporal's temporal.toml), or run `agentloop dev` for a local server and a worker")
    role = check_role(config.role)
    deployment = config.deployment_version()
    tune_collector()
    if role == "tools":
        check_tools_environment()
    protect_process()  # every role: its own shell commands must not read its memory or environment
    import_modules(config.imports)
    configure_logging()
    telemetry = Telemetry.from_env(metrics_port=metrics_port)
    port = metrics_port if metrics_port is not None else metrics_port_from_env()
    runtime, temporal_url = temporal_runtime(port)
    client = await connect_client(config, data_converter=converter_from_env(), **runtime)
    if role != "tools":
        missing = await missing_search_attributes(client)
        if missing:
            raise UserError(
                f"namespace {config.namespace!r} lacks the search attributes {', '.join(missing)}, which "
                "every run keeps up to date; register them once, then start the worker again:\n  "
                + "\n  ".join(create_commands(config.namespace))
            )
    worker = build_worker(client, task_queue=config.task_queue, workspace=workspace, role=role,
                          telemetry=telemetry or False, deployment=deployment,
                          workspace_roots=default_workspace_roots(workspace), lanes=lanes)
    metrics_server = serve_metrics(telemetry, port, temporal_url)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    sandbox_line = sandbox.describe() if role != "models" else None
    async with worker:
        plugins = worker.config().get("plugins", [])
        plugin_lanes = next((p.lanes for p in plugins if isinstance(p, AgentLoopPlugin)), ())
        print(f"agentloop worker: {describe_worker(config, role, plugin_lanes)}", file=sys.stderr, flush=True)
        if sandbox_line:
            print(f"agentloop worker: {sandbox_line}", file=sys.stderr, flush=True)
        await stop.wait()
        print("agentloop worker: stopping; in-flight activities may finish (up to 30 s)", file=sys.stderr,
              flush=True)
    if metrics_server is not None:
        metrics_server.stop()
    flush_traces()
    print("agentloop worker: stopped", file=sys.stderr, flush=True)


def temporal_runtime(metrics_port: int | None) -> tuple[dict[str, Any], str | None]:
    """With a metrics port: ``Client.connect`` options giving the client a
    Temporal runtime whose metrics are served in Prometheus's format on a
    local port of its own, and that endpoint's URL (the worker's
    ``/metrics`` serves them). Otherwise nothing."""
    if metrics_port is None:
        return {}, None
    from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

    from agentloop.workers.metrics import free_local_port

    address = f"127.0.0.1:{free_local_port()}"
    runtime = Runtime(telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=address)))
    return {"runtime": runtime}, f"http://{address}/metrics"


def flush_traces() -> None:
    """Export the spans still buffered (the global tracer provider's)."""
    try:
        import opentelemetry.trace
    except ImportError:
        return
    provider = opentelemetry.trace.get_tracer_provider()
    if hasattr(provider, "force_flush"):
        provider.force_flush()


def describe_worker(config: TemporalConfig, role: str, lanes: Sequence[str] = ()) -> str:
    """What a worker of ``role`` polls, where, which tools it runs and
    which provider lanes it serves: one line, no secrets."""
    tools_queue = tool_task_queue(config.task_queue)
    queues = {"all": f"task queues {config.task_queue!r} and {tools_queue!r}",
              "models": f"task queue {config.task_queue!r}", "tools": f"task queue {tools_queue!r}"}[role]
    if role == "models":
        tools = f"tools run by a tools worker on {tools_queue!r}"
    else:
        from agentloop.activities.builtin_tools import register_builtin_tools
        from agentloop.tools.registry import default_registry

        register_builtin_tools(default_registry)
        tools = "tools " + ", ".join(sorted(default_registry.names()))
    version = (f", version {config.build_id!r} of deployment {config.deployment_name!r}"
               if config.deployment_name and config.build_id else ", unversioned")
    lanes_clause = ""
    if role != "tools":
        lanes_clause = (f"; model calls of lanes {', '.join(lanes)} on {lane_queue(config.task_queue, '<lane>')!r}"
                        if lanes else "; no provider lane")
    return (f"role {role}, polling {queues} on {config.address} (namespace {config.namespace!r}, "
            f"{config.describe_security()}{version}); {tools}{lanes_clause}")
