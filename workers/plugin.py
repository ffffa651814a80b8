"""AgentLoopPlugin: agentloop in your own Temporal application, in one line.

::

    from temporalio.client import Client
    from temporalio.worker import Worker
    from agentloop import AgentLoopPlugin

    client = await Client.connect("localhost:7233", plugins=[AgentLoopPlugin()])
    worker = Worker(client, task_queue="orders", workflows=[OrderWorkflow])

A plugin given to ``Client.connect`` sets the pydantic data converter on the
client and is applied by Temporal to every Worker built from that client:
each gets :class:`~agentloop.workflows.agent_run.AgentRunWorkflow`, its
activities, the sandbox passthrough, the failure types and the heartbeat
throttle, next to the user's own workflows. Give it to a ``Worker`` (or a
``Replayer``) instead to configure just that one, e.g. with another role or
registry; a Worker's own plugin takes precedence over its client's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import temporalio.client
from temporalio.contrib.pydantic import PydanticPayloadConverter, pydantic_data_converter
from temporalio.converter import DataConverter, DefaultPayloadConverter, PayloadCodec
from temporalio.plugin import SimplePlugin
from temporalio.worker import ReplayerConfig, Worker, WorkerConfig, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from agentloop.shared.base.encryption import codec_from_env, with_codec
from agentloop.shared.base.errors import UserError
from agentloop.shared.definition.lanes import check_lane, lane_queue
from agentloop.shared.runs.result import AgentRunFailed
from agentloop.workers.config import WORKER_ROLES, lanes_from_env, provider_keys_in

if TYPE_CHECKING:
    from agentloop.activities.agent_activities import AgentActivities
    from agentloop.activities.providers.models import ModelResolver
    from agentloop.tools.registry import ToolRegistry

log = logging.getLogger("agentloop.workers.plugin")

#: The plugin's name, as Temporal reports it.
PLUGIN_NAME = "agentloop.AgentLoopPlugin"

#: Cancellation reaches an activity on a heartbeat's response; the SDK's
#: default throttle (up to 0.8 x heartbeat timeout, at most 60 s) would
#: delay a cancelled shell command by tens of seconds.
HEARTBEAT_THROTTLE = timedelta(seconds=1)

#: The SDK's default ``max_heartbeat_throttle_interval``: a Worker that has
#: it was not given one, and gets :data:`HEARTBEAT_THROTTLE`.
SDK_DEFAULT_HEARTBEAT_THROTTLE = timedelta(seconds=60)

#: Options of the user's Worker that its role ``all`` sibling on the tools
#: queue takes over (the rest are about workflows, or are the SDK's defaults).
TOOLS_WORKER_OPTIONS = (
    "interceptors",
    "identity",
    "max_concurrent_activities",
    "max_concurrent_activity_task_polls",
    "max_activities_per_second",
    "max_task_queue_activities_per_second",
    "max_heartbeat_throttle_interval",
    "default_heartbeat_throttle_interval",
    "graceful_shutdown_timeout",
    "debug_mode",
    "on_fatal_error",
    "activity_task_poller_behavior",
    # The same Worker Deployment Version: a pinned run's tool calls go to its own version's tools.
    "deployment_config",
)


def tool_task_queue(task_queue: str) -> str:
    """The queue a run on ``task_queue`` sends its tool activities to."""
    from agentloop.shared.base.contracts import TOOL_QUEUE_SUFFIX

    return task_queue + TOOL_QUEUE_SUFFIX


def check_role(role: str) -> str:
    """``role``, checked.

    Raises:
        UserError: Not one of :data:`~agentloop.workers.config.WORKER_ROLES`.
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
        UserError: One of :data:`~agentloop.workers.config.PROVIDER_KEY_VARIABLES` is set.
    """
    present = provider_keys_in(environ)
    if present:
        raise UserError(
            f"a tools worker must not hold provider keys, but {', '.join(present)} "
            f"{'is' if len(present) == 1 else 'are'} set in its environment; start it without them "
            f"(e.g. env -u {' -u '.join(present)} agentloop worker --role tools), and give the keys "
            "to the models worker only"
        )


def data_converter(converter: DataConverter | None) -> DataConverter:
    """The data converter agentloop needs, from the one a client or replayer has.

    Temporal's default becomes ``pydantic_data_converter``; a converter with
    the default payload converter and a codec or failure converter of its own
    keeps them, with the pydantic payload converter; one whose payload
    converter is pydantic's (or a subclass) is kept as it is.

    Raises:
        UserError: The converter has a payload converter of its own that is
            not pydantic's: agentloop's models would not survive it.
    """
    if converter is None or converter is DataConverter.default:
        return pydantic_data_converter
    payload_class = converter.payload_converter_class
    if payload_class is DefaultPayloadConverter:
        return dataclasses.replace(converter, payload_converter_class=PydanticPayloadConverter)
    if issubclass(payload_class, PydanticPayloadConverter):
        return converter
    raise UserError(
        f"agentloop needs temporalio.contrib.pydantic.pydantic_data_converter, but this client's data "
        f"converter uses the payload converter {payload_class.__module__}.{payload_class.__qualname__}; "
        "leave data_converter unset (AgentLoopPlugin sets it), pass pydantic_data_converter, or make "
        "your payload_converter_class subclass temporalio.contrib.pydantic.PydanticPayloadConverter"
    )


def plugin_codec(codec: PayloadCodec | bool | None) -> PayloadCodec | None:
    """The codec of ``AgentLoopPlugin(codec=...)``: the one given, the
    environment's (None), or none (False).

    Raises:
        UserError: ``True``, or malformed keys in the environment.
    """
    if codec is None:
        return codec_from_env()
    if codec is False:
        return None
    if not isinstance(codec, PayloadCodec):
        raise UserError(f"AgentLoopPlugin(codec=...) takes a temporalio.converter.PayloadCodec, None (from "
                        f"AGENTLOOP_ENCRYPTION_KEYS) or False (none), not {codec!r}")
    return codec


def workflow_runner(runner: WorkflowRunner | None = None) -> WorkflowRunner:
    """``runner`` (a new ``SandboxedWorkflowRunner`` when None) with the
    ``agentloop`` package passed through the sandbox.

    Passed through, agentloop is imported once, outside the sandbox: its
    workflow code is deterministic and keeps no module state, and one class
    identity for its pydantic models is what the data converter needs. A
    user's own sandbox restrictions are kept; a runner that is not sandboxed
    is returned as it is.
    """
    if runner is None:
        runner = SandboxedWorkflowRunner()
    if isinstance(runner, SandboxedWorkflowRunner):
        return dataclasses.replace(runner, restrictions=runner.restrictions.with_passthrough_modules("agentloop"))
    return runner


class AgentLoopPlugin(SimplePlugin):
    """agentloop for a Temporal Client, Worker or Replayer.

    On a client: the pydantic data converter. On a worker: the workflow
    ``AgentRunWorkflow`` and its activities (``call_model``,
    ``resolve_tools``, ``resolve_tools_here``, ``execute_tool``) as the role says, the workflow
    sandbox with ``agentloop`` passed through (added to the worker's own
    ``SandboxedWorkflowRunner`` if it has one), :class:`UserError` and
    :class:`AgentRunFailed` (with its subclasses) as workflow failure types,
    so that an agent failure a workflow does not catch fails that workflow
    instead of retrying its task forever, and ``max_heartbeat_throttle_interval``
    of 1 s (unless the worker was given one), so cancelled tool calls stop at
    once. On a replayer: converter, workflow, sandbox and failure types.

    Roles (the worker's task queue is the queue runs start on):

    * ``all``: the workflow and every activity on the worker's queue, and,
      for as long as the worker runs, a second Temporal worker on
      ``<queue>-tools`` for the tool activities that go there. It takes the
      worker's activity options and stops after it. A run looks its
      tools up here, as a local activity (``resolve_tools_here``) in its
      first workflow task; the answer tells the run that its queue serves
      the tools too, and the run's ``execute_tool`` calls then go to its
      own queue, where the worker that completes a workflow task starts
      them at once (a call that finds a worker without them there, one of
      role ``models`` that joined later, goes to the tools queue instead).
      Tools registered ``local=True`` are called as local activities
      (``execute_tool_here``) of the worker running the run.
    * ``models``: the workflow, ``call_model`` and the guardrail activities
      (``resolve_guardrails``, ``run_guardrail``: LLM judges need the
      keys), on the worker's queue; ``resolve_tools_here`` and
      ``execute_tool_here`` refuse here, and the run asks the tools queue
      (``resolve_tools``, ``execute_tool``).
    * ``tools``: ``resolve_tools``, ``execute_tool``, ``load_context``
      (AGENTS.md, context providers) and ``run_tool_hooks`` (hooks around
      activity-tools); the worker's queue
      must be the tools queue (:func:`tool_task_queue` of the runs' queue),
      and the process must hold no provider keys.

    The plugin is applied once per worker: with one on the client and one
    on the worker, the worker's configures it (Temporal warns about the
    pair); the same plugin twice is applied once.

    Args:
        registry: The tools workers run; the default registry, with the
            built-in tools added, when None.
        models: Resolves ``provider:model`` to a chat model; the built-in
            providers, configured from the environment, when None.
        workspace: Workspace of runs whose spec names none; from
            ``AGENTLOOP_WORKSPACE`` or the current directory when None.
        workspace_roots: Directories runs' workspaces must lie strictly
            inside (``AGENTLOOP_WORKSPACE_ROOTS`` when None); see
            :class:`~agentloop.activities.agent_activities.AgentActivities`.
        role: ``all``, ``models`` or ``tools`` (see above).
        mcp_servers: The MCP servers tool workers reach, by name
            (``{name: McpServer or its settings}``, or an ``McpServers``);
            from the file ``AGENTLOOP_MCP_SERVERS`` names when None.
        telemetry: Traces, metrics and structured logs of the runs
            (:class:`~agentloop.workers.telemetry.Telemetry`); from the
            environment (``Telemetry.from_env``) when None, none when False.
        codec: The payload codec the client's data converter gets (e.g.
            :class:`~agentloop.shared.base.encryption.EncryptionCodec`, or your own
            KMS-backed ``PayloadCodec``); when None, an ``EncryptionCodec``
            with the keys of ``AGENTLOOP_ENCRYPTION_KEYS`` (or
            ``AGENTLOOP_ENCRYPTION_KEY_FILE``) if one is set; False: none.
            A worker this plugin configures refuses a client without a codec
            when it has one (docs/security.md).
        lanes: The provider lanes a worker of role ``all`` or ``models``
            polls beside its queue, each ``<queue>-llm-<lane>`` with
            ``call_model`` alone (runs send their model calls there,
            :mod:`agentloop.shared.definition.lanes`); from
            ``AGENTLOOP_LANES`` when None (the built-in providers' lanes
            when that is unset).

    Raises:
        UserError: An unknown role, or malformed encryption keys. When a
            worker is built: a tools worker with provider keys in the
            environment or not on a tools queue, a shell sandbox setting that
            is invalid or cannot work here, a client whose data converter is
            not pydantic's, or one without a codec when the plugin has one.
    """

    def __init__(
        self,
        *,
        registry: ToolRegistry | None = None,
        models: ModelResolver | None = None,
        workspace: str | Path | None = None,
        role: str = "all",
        workspace_roots: list[str | Path] | None = None,
        mcp_servers: Any = None,
        telemetry: Any = None,
        codec: PayloadCodec | bool | None = None,
        lanes: Sequence[str] | None = None,
    ) -> None:
        self.role = check_role(role)
        self.lanes = lanes_from_env() if lanes is None else tuple(check_lanes(lanes))
        self.telemetry = telemetry
        self.codec = plugin_codec(codec)
        self.mcp_servers = mcp_servers
        self.registry = registry
        self.models = models
        self.workspace = workspace
        self.workspace_roots = workspace_roots
        self._activities: AgentActivities | None = None
        self._running: set[int] = set()
        self._workers = 0
        super().__init__(
            PLUGIN_NAME,
            data_converter=lambda converter: with_codec(data_converter(converter), self.codec),
            workflow_runner=workflow_runner,
            workflow_failure_exception_types=[UserError, AgentRunFailed],
        )

    @property
    def agent_activities(self) -> AgentActivities:
        """The activities' instance, shared by every worker this plugin
        configures (built for the first)."""
        if self._activities is None:
            from agentloop.activities.agent_activities import AgentActivities
            from agentloop.activities.builtin_tools import register_builtin_tools
            from agentloop.tools.registry import default_registry

            registry = self.registry
            if registry is None:
                registry = default_registry
                register_builtin_tools(registry)
            from agentloop.activities.tool_sources.mcp_tools import McpServers

            mcp = self.mcp_servers
            if mcp is not None and not isinstance(mcp, McpServers):
                mcp = McpServers(mcp)
            from agentloop.activities.tool_sources.openapi_tools import register_openapi_from_env

            register_openapi_from_env(registry)  # the APIs of AGENTLOOP_OPENAPI, if set
            self._activities = AgentActivities(registry, self.models, self.workspace, mcp_servers=mcp,
                                               workspace_roots=self.workspace_roots,
                                               tools_beside_runs=self.role == "all")
        return self._activities

    def _configures(self, client: temporalio.client.Client, worker_plugins: Sequence[Any]) -> bool:
        """Whether this plugin, and not another AgentLoopPlugin, configures a
        worker of ``client`` given ``worker_plugins``: the last one does."""
        plugins = [*client.config().get("plugins", []), *worker_plugins]
        ours = [p for p in plugins if isinstance(p, AgentLoopPlugin)]
        return bool(ours) and ours[-1] is self

    def _owns(self, activities: Sequence[Any]) -> bool:
        return self._activities is not None and any(
            getattr(fn, "__self__", None) is self._activities for fn in activities
        )

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        """See :class:`temporalio.worker.Plugin`."""
        client = config["client"]
        if not self._configures(client, config.get("plugins", [])) or self._owns(config.get("activities", [])):
            return config  # another AgentLoopPlugin configures it, or this one did already
        converter = client.data_converter
        if not issubclass(converter.payload_converter_class, PydanticPayloadConverter):
            raise UserError(
                "this Worker's client does not use the pydantic data converter that agentloop's workflow and "
                "activities need: connect it with Client.connect(..., plugins=[AgentLoopPlugin()]) (or "
                "data_converter=temporalio.contrib.pydantic.pydantic_data_converter)"
            )
        if self.codec is not None and converter.payload_codec is None:
            raise UserError(
                f"this Worker's plugin encrypts payloads ({self.codec!r}) but its client does not: connect the client "
                "with plugins=[AgentLoopPlugin()] "
                "(or data_converter=agentloop.shared.base.encryption.converter_from_env()) "
                "so that what it sends is encrypted too"
            )
        task_queue = config.get("task_queue", "")
        if self.role == "tools":
            check_tools_environment()
            if not task_queue.endswith(tool_task_queue("")):
                raise UserError(
                    f"a tools worker polls the tools queue of the runs' task queue, but this Worker's task queue "
                    f"is {task_queue!r}: use task_queue={tool_task_queue(task_queue)!r} for runs started on "
                    f"{task_queue!r} (agentloop.workers.plugin.tool_task_queue)"
                )
        if self.role != "models":
            from agentloop.activities.shell_sandbox import sandbox

            sandbox.describe()  # fail now, not at the first shell command
        from agentloop.activities.quotas import quota_ledger
        from agentloop.activities.versioning import current_deployment_version
        from agentloop.workflows.agent_run import AgentRunWorkflow
        from agentloop.workflows.eval_run import AgentEvalWorkflow
        from agentloop.workflows.quota_ledger import QuotaLedgerWorkflow
        from agentloop.workflows.schedule_feed import ScheduleFeedWorkflow

        acts = self.agent_activities
        if self.role in ("all", "models"):
            workflows = list(config.get("workflows", []))
            workflows += [w for w in (AgentRunWorkflow, ScheduleFeedWorkflow, AgentEvalWorkflow, QuotaLedgerWorkflow)
                          if w not in workflows]
            config["workflows"] = workflows
        by_role: dict[str, list[Callable[..., Any]]] = {
            "all": [acts.call_model, acts.resolve_tools, acts.resolve_tools_here, acts.execute_tool,
                    acts.execute_tool_here, acts.resolve_guardrails, acts.run_guardrail, acts.load_context,
                    acts.run_tool_hooks, current_deployment_version, acts.eval_score, quota_ledger],
            # The *_here local activities refuse on models (no tools here), and replays read them from history.
            "models": [acts.call_model, acts.resolve_tools_here, acts.execute_tool_here, acts.resolve_guardrails,
                       acts.run_guardrail, current_deployment_version, acts.eval_score, quota_ledger],
            "tools": [acts.resolve_tools, acts.execute_tool, acts.load_context, acts.run_tool_hooks],
        }
        config["activities"] = [*config.get("activities", []), *by_role[self.role]]
        config["interceptors"] = [*config.get("interceptors", []), *self._telemetry_interceptors(config)]
        throttle = config.get("max_heartbeat_throttle_interval", SDK_DEFAULT_HEARTBEAT_THROTTLE)
        if throttle == SDK_DEFAULT_HEARTBEAT_THROTTLE:
            config["max_heartbeat_throttle_interval"] = HEARTBEAT_THROTTLE
        return super().configure_worker(config)

    def _telemetry_interceptors(self, config: WorkerConfig) -> list[Any]:
        """The interceptors of :attr:`telemetry` (see :class:`~agentloop.workers.telemetry.Telemetry`);
        none when it is False, or when the worker or its client traces already."""
        from agentloop.workers.telemetry import Telemetry, TelemetryInterceptor

        if self.telemetry is None:
            self.telemetry = Telemetry.from_env() or False
        if not self.telemetry:
            return []
        present = [*config.get("interceptors", []), *config["client"].config().get("interceptors", [])]
        if any(isinstance(i, TelemetryInterceptor) for i in present):
            return []
        return [i for i in self.telemetry.interceptors()
                if type(i).__name__ != "TracingInterceptor" or not any(type(p) is type(i) for p in present)]

    def configure_replayer(self, config: ReplayerConfig) -> ReplayerConfig:
        """See :class:`temporalio.worker.Plugin`."""
        from agentloop.workflows.agent_run import AgentRunWorkflow
        from agentloop.workflows.eval_run import AgentEvalWorkflow
        from agentloop.workflows.quota_ledger import QuotaLedgerWorkflow
        from agentloop.workflows.schedule_feed import ScheduleFeedWorkflow

        config = super().configure_replayer(config)
        workflows = list(config.get("workflows", []))
        workflows += [w for w in (AgentRunWorkflow, ScheduleFeedWorkflow, AgentEvalWorkflow, QuotaLedgerWorkflow)
                      if w not in workflows]
        config["workflows"] = workflows
        return config

    async def run_worker(self, worker: Worker, next: Callable[[Worker], Awaitable[None]]) -> None:
        """Run the worker; for role ``all``, with its sibling on the tools
        queue, and for roles ``all`` and ``models`` with one on each of
        its lanes, for as long as it runs."""
        active = worker.config(active_config=True)
        self._workers += 1
        try:
            if (
                self.role == "tools"
                or id(worker) in self._running
                or not self._configures(worker.client, active.get("plugins", []))
                or not self._owns(active.get("activities", []))
            ):
                await next(worker)
                return
            self._running.add(id(worker))
            try:
                await _run_with(worker, next, self._sibling_workers(worker))
            finally:
                self._running.discard(id(worker))
        finally:
            self._workers -= 1
            if self._workers == 0 and self._activities is not None:
                await self._activities.mcp.aclose()  # the MCP sessions kept open between calls

    def _sibling_workers(self, worker: Worker) -> list[Worker]:
        """The Temporal workers beside ``worker``: its tools queue's (role
        ``all``) and its lanes', with the worker's activity options and a
        client without plugins (the user's other plugins configure the
        user's worker)."""
        active = worker.config(active_config=True)
        client_config = worker.client.config(active_config=True)  # a copy
        client_config["plugins"] = []
        client = temporalio.client.Client(**client_config)
        options = {key: active[key] for key in TOOLS_WORKER_OPTIONS if key in active}  # type: ignore[literal-required]
        acts = self.agent_activities
        siblings = [Worker(client, task_queue=lane_queue(worker.task_queue, lane), activities=[acts.call_model],
                           **options) for lane in self.lanes]
        if self.role == "all":
            siblings.append(Worker(
                client,
                task_queue=tool_task_queue(worker.task_queue),
                activities=[acts.resolve_tools, acts.execute_tool, acts.load_context, acts.run_tool_hooks],
                **options,
            ))
        return siblings


async def _run_with(worker: Worker, next: Callable[[Worker], Awaitable[None]], siblings: list[Worker]) -> None:
    """Run ``worker`` (through the rest of its plugin chain) and its
    ``siblings`` together: they stop once ``worker`` has stopped, and a
    fatal error of one stops ``worker`` too and is raised."""
    runs = [asyncio.create_task(s.run(), name=f"agentloop worker {s.task_queue}") for s in siblings]
    stopping: list[asyncio.Task[None]] = []

    def sibling_ended(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None and worker.is_running:
            log.error("the worker %s failed; stopping the worker on %s", task.get_name(), worker.task_queue)
            stopping.append(asyncio.ensure_future(worker.shutdown()))

    for run in runs:
        run.add_done_callback(sibling_ended)
    try:
        await next(worker)
    finally:
        await asyncio.gather(*(s.shutdown() for s in siblings), return_exceptions=True)
        await asyncio.gather(*runs, *stopping, return_exceptions=True)
    for run in runs:
        if not run.cancelled() and run.exception() is not None:
            raise run.exception()  # type: ignore[misc]


def check_lanes(lanes: Sequence[str]) -> list[str]:
    """``lanes``, each checked.

    Raises:
        UserError: One is not a lane name.
    """
    try:
        return [check_lane(lane) for lane in lanes]
    except ValueError as exc:
        raise UserError(f"AgentLoopPlugin(lanes=...): {exc}") from None
