"""AgentClient: start runs, follow them, get their results.

::

    client = await AgentClient.connect("localhost:7233")
    handle = await client.start(AgentSpec(model="openai:gpt-4.1-mini"), "Summarise README.md")
    result = await handle.result()
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from agentloop.client.handle import AgentRunHandle
from agentloop.client.quotas import AgentQuotas
from agentloop.client.runs import RunSummary, id_in_use, runs_query, summary_of
from agentloop.client.schedules import AgentSchedules
from agentloop.client.threads import not_running, send_message, thread_start
from agentloop.shared.base.contracts import MAX_INPUT_BYTES, WORKFLOW_NAME
from agentloop.shared.base.errors import UserError
from agentloop.shared.base.messages import Message
from agentloop.shared.base.priority import run_priority, with_tenant
from agentloop.shared.definition.fingerprint import agent_definition, definition_change
from agentloop.shared.definition.output import output_spec as output_spec_of
from agentloop.shared.definition.spec import AgentSpec
from agentloop.shared.runs.events import AgentEvent
from agentloop.shared.runs.quotas import QUOTA_WORKFLOW_PREFIX
from agentloop.shared.runs.result import AgentRunResult
from agentloop.shared.runs.run import AgentRunInput, run_input, with_output
from agentloop.shared.runs.search_attributes import (
    AGENT_FORKED_FROM,
    AGENT_TENANT,
    create_commands,
    start_search_attributes,
)
from agentloop.shared.runs.snapshots import AgentSnapshot, fork_input, load_snapshot, restore_input, starts_idle
from agentloop.workers.config import (
    TemporalConfig,
    agentloop_home,
    connect_client,
    find_dev_server,
    task_queue_from_env,
)
from agentloop.workers.plugin import AgentLoopPlugin

_log = logging.getLogger(__name__)


def new_run_id() -> str:
    """A fresh run id."""
    return f"run-{uuid.uuid4().hex[:16]}"


class AgentClient:
    """Starts and follows agent runs on a Temporal server.

    Args:
        client: A Temporal client using the pydantic data converter.
        task_queue: The queue the agent workers poll.
    """

    def __init__(self, client: Client, *, task_queue: str | None = None) -> None:
        self.temporal = client
        self.task_queue = task_queue or task_queue_from_env()
        #: Ask Temporal to hand a run's first workflow task straight to a
        #: worker of this client's queue in this process (``request_eager_start``);
        #: without one, the start is as usual (docs/live-deltas.md).
        self.eager_start = False

    @property
    def quotas(self) -> AgentQuotas:
        """Tenants' spend quotas (docs/many-tenants.md)."""
        return AgentQuotas(self.temporal, self.task_queue)

    @property
    def schedules(self) -> AgentSchedules:
        """Schedules of agent runs, on Temporal Schedules (docs/schedules.md)."""
        return AgentSchedules(self.temporal, self.task_queue)

    @classmethod
    async def connect(
        cls,
        address: str | None = None,
        *,
        namespace: str | None = None,
        task_queue: str | None = None,
        **connect_options: Any,
    ) -> AgentClient:
        """Connect, with Temporal's environment configuration as the
        ``temporal`` CLI reads it: ``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``,
        ``TEMPORAL_API_KEY``, ``TEMPORAL_TLS*``, over the profile
        ``TEMPORAL_PROFILE`` of ``temporal.toml`` (see :mod:`agentloop.workers.config`);
        the task queue from ``AGENTLOOP_TASK_QUEUE``. With no address at
        all, to the running ``agentloop dev`` of ``$AGENTLOOP_HOME`` (its
        server, namespace and task queue), as the CLI does. Logs where it
        connected (logger ``agentloop.client.agent_client``, level INFO).

        Args:
            address: ``host:port``; overrides the configured address (TLS and
                API key still come from the configuration unless given here).
            namespace: Overrides the configured namespace.
            task_queue: The queue agent workers poll.
            connect_options: Passed to ``temporalio.client.Client.connect``
                (``tls=``, ``api_key=``, ``rpc_metadata=``...), over the configuration.
                ``plugins=[AgentLoopPlugin(...)]`` gives the client (and the
                Workers built from it) that plugin instead of a default one,
                e.g. with the worker's MCP servers.

        Raises:
            UserError: No address, a configuration that cannot be read, or a
                connection that failed (the message says what to check).
        """
        config = TemporalConfig.from_env()
        if address:
            config.address, config.source = address, "the address argument"
        if not config.address:
            # As the CLI does: a running `agentloop dev` (its server, namespace and queue).
            dev = find_dev_server()
            if dev is None:
                raise UserError(
                    "no Temporal address: pass one, set TEMPORAL_ADDRESS, or start `agentloop dev` in another "
                    f"terminal (none is serving {agentloop_home()})"
                )
            config = config.for_dev_server(dev)
        if namespace:
            config.namespace = namespace
        # With the plugin, Workers built from this client (AgentClient.temporal)
        # run agents too, next to their own workflows.
        plugins = list(connect_options.pop("plugins", None) or [])
        if not any(isinstance(p, AgentLoopPlugin) for p in plugins):
            plugins.insert(0, AgentLoopPlugin())
        client = await connect_client(config, plugins=plugins, **connect_options)
        queue = task_queue or config.task_queue
        _log.info("connected to Temporal at %s (from %s; namespace %r, task queue %r)",
                  config.address, config.source, config.namespace, queue)
        return cls(client, task_queue=queue)

    async def start(
        self,
        spec: AgentSpec,
        input: str | Message | Sequence[Message],
        *,
        run_id: str | None = None,
        allow_reuse: bool = False,
        thread_id: str | None = None,
        double_texting: str | None = None,
        output_type: Any = None,
        tenant: str | None = None,
    ) -> AgentRunHandle:
        """Start a run and return its handle.

        Args:
            spec: The agent.
            input: A user instruction, a message, or messages (a thread's
                earlier messages first).
            run_id: The run id to use; a fresh one when None.
            allow_reuse: Start even if a run that has ended has this id (the
                new run then replaces it under the id: handles, ``show`` and
                ``watch`` see the new one). Never while a run with the id runs.
            thread_id: Start a thread with this id (docs/conversations.md):
                the run answers ``input`` as its turn 1, then stays open for
                :meth:`send`; the handle is turn 1's. The run id is the thread id.
            double_texting: The thread's strategy for messages that arrive
                while it is busy; the spec's when None.
            output_type: The answer's type (overrides ``spec.output``; see
                docs/typed-results.md): ``result().output`` is a value of it.
            tenant: Whose run it is (docs/many-tenants.md): the workflow's
                fairness key next to ``spec.priority``, inherited by its
                activities, sub-agents and a thread's turns, and the
                ``AgentTenant`` search attribute.

        Raises:
            RunIdInUse: A run with ``run_id`` is running, or has ended and
                ``allow_reuse`` is False.
            UserError: ``tenant`` is not a tenant name.
        """
        spec = with_output(spec, output_type)
        run_id = thread_id or run_id or new_run_id()
        built, attributes = with_tenant(run_input(spec, input), tenant), start_search_attributes(spec)
        if thread_id is not None:
            built, attributes = thread_start(built, attributes, thread_id, double_texting)
        handle = await self._start_workflow(built, run_id, attributes, allow_reuse=allow_reuse)
        return AgentRunHandle(handle, turn=1 if thread_id is not None else None, output=spec.output)

    async def restore(
        self,
        snapshot: AgentSnapshot | str | bytes | Mapping[str, Any],
        spec: AgentSpec | None = None,
        *,
        run_id: str | None = None,
        message: str | None = None,
        tenant: str | None = None,
    ) -> AgentRunHandle:
        """Start a new run from a snapshot (:meth:`AgentRunHandle.export`).

        The run goes on where the snapshot was taken: its conversation,
        steps, usage and report come along, and calls that were waiting for
        a decision or the client's outputs wait again (decide them on the new
        run). Tools of the snapshot the worker lacks, or tools it did not
        have, are warnings (``result.warnings``, events
        ``agent.run.tool_removed`` / ``agent.run.tool_added``). A thread's
        snapshot gives a thread whose id is the new run id: it waits for its
        next message (:meth:`send`) when its conversation ends with the
        model's answer, else its first turn goes on from the snapshot.

        Args:
            snapshot: An :class:`AgentSnapshot`, or its JSON (text or decoded).
            spec: The spec to run with instead of the snapshot's.
            run_id: The new run's id; a fresh one when None.
            message: A new user message after the conversation (a snapshot
                of a run that ended, continued).
            tenant: The new run's tenant (as for :meth:`start`).

        Raises:
            SnapshotError: Not a snapshot, another major version, or invalid.
            RunIdInUse: ``run_id`` is taken.
        """
        loaded = load_snapshot(dict(snapshot) if isinstance(snapshot, Mapping) else snapshot)
        return await self._start_input(with_tenant(restore_input(loaded, spec, message), tenant), run_id,
                                       thread=loaded.thread_id is not None)

    async def fork(
        self, run_id: str, at_step: int, message: str | None = None, *, new_run_id: str | None = None,
        tenant: str | None = None,
    ) -> AgentRunHandle:
        """Start a new run whose conversation is run ``run_id``'s up to the
        end of step ``at_step`` (1-based), then ``message`` as a new user
        message if given. The fork's report says where it came from
        (``report.origin``) and the search attribute ``AgentForkedFrom``
        finds it. The fork of a thread is a thread (its id the new run id);
        the handle is then its first turn's, when it has one. ``tenant``: the
        fork's tenant (as for :meth:`start`).

        Raises:
            UserError: No such run; ``SnapshotError`` when ``at_step`` is not
                one of its finished steps.
            RunIdInUse: ``new_run_id`` is taken.
        """
        snapshot = await self.get_handle(run_id).export()
        return await self.fork_from(snapshot, at_step, message, new_run_id=new_run_id, tenant=tenant)

    async def fork_from(
        self, snapshot: AgentSnapshot | str | bytes | Mapping[str, Any], at_step: int, message: str | None = None,
        *, new_run_id: str | None = None, tenant: str | None = None,
    ) -> AgentRunHandle:
        """:meth:`fork` from a snapshot already exported (or read from a file)."""
        loaded = load_snapshot(dict(snapshot) if isinstance(snapshot, Mapping) else snapshot)
        return await self._start_input(with_tenant(fork_input(loaded, at_step, message), tenant), new_run_id,
                                       forked_from=loaded.run_id, thread=loaded.thread_id is not None)

    async def _start_input(self, input: AgentRunInput, run_id: str | None, *,
                           forked_from: str | None = None, thread: bool = False) -> AgentRunHandle:
        """Start a run restored or forked from a snapshot; from a thread's
        snapshot, a thread whose id is the new run id."""
        size = len(input.model_dump_json())
        if size > MAX_INPUT_BYTES:
            raise UserError(
                f"the run's input would be {size / 1e6:.1f} MB; Temporal refuses payloads over 2 MB and "
                f"agentloop starts runs with at most {MAX_INPUT_BYTES / 1e6:.1f} MB. Fork at an earlier step, "
                "or restore a run whose conversation was compacted (AgentSpec.context)")
        run_id = run_id or new_run_id()
        attributes = start_search_attributes(input.spec)
        if forked_from is not None:
            attributes = TypedSearchAttributes([*attributes, SearchAttributePair(AGENT_FORKED_FROM, forked_from)])
        if thread:
            input, attributes = thread_start(input, attributes, run_id, None)
        handle = await self._start_workflow(input, run_id, attributes, allow_reuse=False)
        started = AgentRunHandle(handle, turn=1) if thread and not starts_idle(input) else AgentRunHandle(handle)
        if input.origin is not None and input.origin.definition is not None:
            started.definition_change = definition_change(input.origin.definition, agent_definition(input.spec))
        return started  # restored or forked (a thread's first turn answers the input)

    async def send(
        self,
        thread_id: str,
        message: str,
        spec: AgentSpec | None = None,
        *,
        strategy: str | None = None,
        by: str | None = None,
        output_type: Any = None,
        tenant: str | None = None,
    ) -> AgentRunHandle:
        """Send a thread its next message; the handle is bound to the turn
        that answers it (``await handle.result()``). The model sees every
        earlier message of the thread.

        Args:
            thread_id: The thread.
            message: The user's message.
            spec: Starts the thread (turn 1) when it does not exist yet.
            strategy: ``enqueue``, ``interrupt``, ``rollback`` or ``reject``:
                what to do if the thread is busy; the thread's when None.
            by: Who sent it (kept in the thread's event).
            output_type: Parse the turn's typed answer into this type (the
                thread's spec sets what it is asked for: ``AgentSpec.output``);
                ``spec.output``'s when None.
            tenant: The thread's tenant when ``spec`` starts it (as for
                :meth:`start`); a running thread keeps its own.

        Raises:
            ThreadNotFound: No such thread, and no spec to start it.
            ThreadBusy: ``reject`` and the thread is busy.
            UserError: The thread ended, the run is not a thread, or the
                message is empty or too long.
        """
        output = with_output(spec, output_type).output if spec is not None else \
            (output_spec_of(output_type) if output_type is not None else None)
        sent = await send_message(self.temporal, thread_id, message, strategy=strategy, by=by)
        if sent is None:  # the thread does not run: a spec starts it, and its first turn answers
            double_texting = await not_running(self.temporal, thread_id, can_start=spec is not None,
                                               strategy=strategy)
            assert spec is not None
            started = await self.start(spec, message, thread_id=thread_id, double_texting=double_texting,
                                       tenant=tenant)
            started.output = output or started.output
            return started
        workflow_handle, accepted = sent
        return AgentRunHandle(workflow_handle, turn=accepted.turn, offset=accepted.offset, output=output)

    async def _start_workflow(
        self, input: AgentRunInput, run_id: str, attributes: Any, *, allow_reuse: bool
    ) -> WorkflowHandle:
        """Start a run's workflow; an id in use or unregistered search
        attributes are a sentence saying what to do."""
        spec = input.spec
        if run_id.startswith(QUOTA_WORKFLOW_PREFIX):  # a tenant's ledger: a run there would keep its quota out
            raise UserError(f"run id {run_id[:200]!r} is refused: ids starting with {QUOTA_WORKFLOW_PREFIX!r} are "
                            "the tenants' quota ledgers'; choose another id")
        if input.tenant is not None and AGENT_TENANT not in attributes:
            attributes = TypedSearchAttributes([*attributes, SearchAttributePair(AGENT_TENANT, input.tenant)])
        try:
            return await self.temporal.start_workflow(
                WORKFLOW_NAME, input, id=run_id, task_queue=self.task_queue,
                static_summary=f"{spec.name} on {spec.model}", result_type=AgentRunResult,
                search_attributes=attributes, priority=run_priority(spec.priority, input.tenant),
                request_eager_start=self.eager_start,
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE if allow_reuse
                else WorkflowIDReusePolicy.REJECT_DUPLICATE,
            )
        except WorkflowAlreadyStartedError:
            raise await id_in_use(self.temporal, run_id) from None
        except RPCError as err:
            if err.status == RPCStatusCode.INVALID_ARGUMENT and "search attribute" in err.message.lower():
                raise UserError(
                    f"the Temporal namespace does not know agentloop's search attributes ({err.message}); "
                    "register them once with:\n  " + "\n  ".join(create_commands(self.temporal.namespace))
                ) from None
            raise

    async def run(
        self,
        spec: AgentSpec,
        input: str | Message | Sequence[Message],
        *,
        run_id: str | None = None,
        output_type: Any = None,
        tenant: str | None = None,
    ) -> AgentRunResult:
        """Start a run and wait for its result (see :meth:`AgentRunHandle.result`);
        ``output_type`` and ``tenant`` as for :meth:`start`."""
        return await (await self.start(spec, input, run_id=run_id, output_type=output_type,
                                       tenant=tenant)).result()

    async def list_runs(
        self,
        *,
        status: str | None = None,
        name: str | None = None,
        query: str | None = None,
        limit: int = 100,
    ) -> list[RunSummary]:
        """Runs, newest first, filtered by agent status, agent name, and any
        extra visibility query (e.g. ``'AgentModel="openai:gpt-4.1"'``)."""
        return [summary_of(execution) async for execution in
                self.temporal.list_workflows(runs_query(status, name, query), limit=limit)]

    async def list_runs_page(
        self,
        *,
        status: str | None = None,
        name: str | None = None,
        query: str | None = None,
        limit: int = 100,
        page_token: bytes | None = None,
    ) -> tuple[list[RunSummary], bytes | None]:
        """One page of :meth:`list_runs`: at most ``limit`` runs, newest
        first, and the token of the next page (None after the last). Pass
        the token back as ``page_token`` for the next page."""
        pages = self.temporal.list_workflows(runs_query(status, name, query), page_size=limit,
                                             next_page_token=page_token)
        await pages.fetch_next_page(page_size=limit)
        return [summary_of(execution) for execution in pages.current_page or []], pages.next_page_token or None

    def events(
        self, run_id: str, from_offset: int = 0, *, poll_interval: float = 0.05, include_children: bool = False,
        wait: bool = False,
    ) -> AsyncIterator[AgentEvent]:
        """The events of run ``run_id`` (see :meth:`AgentRunHandle.events`;
        ``include_children`` interleaves its sub-agents' events)."""
        return self.get_handle(run_id).events(from_offset, poll_interval=poll_interval,
                                              include_children=include_children, wait=wait)

    def get_handle(self, run_id: str) -> AgentRunHandle:
        """The handle of an existing run."""
        return AgentRunHandle(self.temporal.get_workflow_handle(run_id, result_type=AgentRunResult))
