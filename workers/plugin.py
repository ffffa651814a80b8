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

from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import temporalio.client
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import PayloadCodec
from temporalio.plugin import SimplePlugin
from temporalio.worker import ReplayerConfig, Worker, WorkerConfig

from agentloop.shared.base.encryption import with_codec
from agentloop.shared.base.errors import UserError
from agentloop.shared.runs.result import AgentRunFailed
from agentloop.workers.config import lanes_from_env
from agentloop.workers.plugin_config import (
    check_role,
    check_tools_environment,
    data_converter,
    plugin_codec,
    tool_task_queue,
    workflow_runner,
)
from agentloop.workers.registrations import role_activities, with_workflows
from agentloop.workers.siblings import TOOLS_WORKER_OPTIONS, check_lanes, run_with, sibling_workers

if TYPE_CHECKING:
    from agentloop.activities.agent_activities import AgentActivities
    from agentloop.activities.providers.models import ModelResolver
    from agentloop.tools.registry import ToolRegistry

# The helpers live in plugin_config, registrations and siblings; these names stay importable from here.
__all__ = [
    "HEARTBEAT_THROTTLE", "PLUGIN_NAME", "SDK_DEFAULT_HEARTBEAT_THROTTLE", "TOOLS_WORKER_OPTIONS", "AgentLoopPlugin",
    "check_lanes", "check_role", "check_tools_environment", "data_converter", "plugin_codec", "tool_task_queue",
    "workflow_runner",
]

#: The plugin's name, as Temporal reports it.
PLUGIN_NAME = "agentloop.AgentLoopPlugin"

#: Cancellation reaches an activity on a heartbeat's response; the SDK's
#: default throttle (up to 0.8 x heartbeat timeout, at most 60 s) would
#: delay a cancelled shell command by tens of seconds.
HEARTBEAT_THROTTLE = timedelta(seconds=1)

#: The SDK's default ``max_heartbeat_throttle_interval``: a Worker that has
#: it was not given one, and gets :data:`HEARTBEAT_THROTTLE`.
SDK_DEFAULT_HEARTBEAT_THROTTLE = timedelta(seconds=60)


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
        if self.role in ("all", "models"):
            config["workflows"] = with_workflows(config.get("workflows"))
        config["activities"] = [*config.get("activities", []), *role_activities(self.agent_activities, self.role)]
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
        config = super().configure_replayer(config)
        config["workflows"] = with_workflows(config.get("workflows"))
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
                await run_with(worker, next, self._sibling_workers(worker))
            finally:
                self._running.discard(id(worker))
        finally:
            self._workers -= 1
            if self._workers == 0 and self._activities is not None:
                await self._activities.mcp.aclose()  # the MCP sessions kept open between calls

    def _sibling_workers(self, worker: Worker) -> list[Worker]:
        """The Temporal workers beside ``worker``: its lanes' and, for role
        ``all``, its tools queue's (:func:`~agentloop.workers.siblings.sibling_workers`)."""
        return sibling_workers(worker, self.agent_activities, role=self.role, lanes=self.lanes)
