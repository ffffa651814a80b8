"""AgentClient: start runs, follow them, get their results.

::

    client = await AgentClient.connect("localhost:7233")
    handle = await client.start(AgentSpec(model="openai:gpt-4.1-mini"), "Summarise README.md")
    result = await handle.result()
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, ValidationError
from temporalio.api.common.v1 import Payload
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDReusePolicy
from temporalio.contrib.workflow_streams import PollInput, PollResult
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from agentloop.shared.definition.approvals import (
    MAX_REQUEST_BYTES,
    ApprovalDecision,
    DecisionAccepted,
    PendingWork,
    StopRequest,
    SubmitToolOutputs,
    ToolOutput,
)
from agentloop.workers.config import (
    TemporalConfig,
    agentloop_home,
    connect_client,
    find_dev_server,
    task_queue_from_env,
)
from agentloop.shared.runs.result import AgentRunFailed
from agentloop.shared.base.errors import DecisionRejected, UserError, build_request, describe_validation_error
from agentloop.shared.runs.run import run_failed_from
from agentloop.shared.runs.events import (
    EVENT_ADAPTER,
    EVENTS_TOPIC,
    AgentEvent,
    TurnEnded,
    SubAgentInvocationCompleted,
    SubAgentInvocationStarted,
    is_terminal,
)
from agentloop.shared.base.messages import Message
from agentloop.workers.plugin import AgentLoopPlugin
from agentloop.shared.runs.report import LIVE_STATUSES, AgentRunReport
from agentloop.shared.runs.run import AgentRunInput, MessagesResult, RunState, RunStatus
from agentloop.shared.runs.result import AgentRunResult
from agentloop.shared.runs.search_attributes import (
    AGENT_FORKED_FROM,
    AGENT_MODEL,
    AGENT_NAME,
    AGENT_PARENT_RUN,
    AGENT_PENDING_TOOLS,
    AGENT_ROOT_RUN,
    AGENT_STATUS,
    AGENT_THREAD,
    create_commands,
)
from agentloop.shared.runs.snapshots import AgentSnapshot, fork_input, load_snapshot, restore_input, starts_idle
from agentloop.shared.definition.spec import AgentSpec
from agentloop.shared.runs.threads import (
    MessageAccepted,
    SendMessage,
    SteerAccepted,
    SteerMessage,
    ThreadOptions,
    ThreadNotFound,
    TurnResult,
)
from agentloop.shared.base import contracts
from agentloop.shared.base.contracts import MAX_INPUT_BYTES, WORKFLOW_NAME
from agentloop.shared.definition.output import OutputSpec
if TYPE_CHECKING:
    from agentloop.client.schedules import AgentSchedules
from agentloop.shared.definition.output import output_spec as output_spec_of
from agentloop.shared.runs.run import run_input, typed_result, with_output
from agentloop.shared.runs.search_attributes import start_search_attributes

_log = logging.getLogger(__name__)

#: How long a sub-agent's events are waited for when its parent has announced
#: it but the server has not created its run yet, in seconds.
CHILD_START_WAIT_SECONDS = 10.0


def new_run_id() -> str:
    """A fresh run id."""
    return f"run-{uuid.uuid4().hex[:16]}"


def thread_start(built: Any, attributes: TypedSearchAttributes, thread_id: str,
                 double_texting: str | None) -> tuple[Any, TypedSearchAttributes]:
    """A thread's first run: its input with the thread options, its start
    search attributes with ``AgentThread``."""
    try:
        options = ThreadOptions(id=thread_id, double_texting=double_texting)
    except ValidationError as exc:
        raise UserError(f"invalid thread: {describe_validation_error(exc)}") from None
    pairs = [*attributes.search_attributes, SearchAttributePair(AGENT_THREAD, thread_id)]
    return built.model_copy(update={"thread": options}), TypedSearchAttributes(pairs)


async def turn_result(handle: AgentRunHandle) -> AgentRunResult:
    """The result of the turn a handle is bound to (see :meth:`AgentRunHandle.result`)."""
    from agentloop.client.threads import wait_for_turn

    return await wait_for_turn(handle)


class RunIdInUse(UserError):
    """A run with this id is running, or has ended and reusing its id was not
    allowed (``AgentClient.start(..., allow_reuse=True)``).

    Attributes:
        run_id: The id asked for.
        running: Whether the run with that id is still running.
        status: Its status (``running``, ``completed``, ``cancelled``...).
        closed_at: When it ended, if it has.
    """

    def __init__(self, run_id: str, *, running: bool, status: str, closed_at: datetime | None = None) -> None:
        self.run_id, self.running, self.status, self.closed_at = run_id, running, status, closed_at
        if running:
            message = f"run {run_id} is already running; choose another run id, or follow that run"
        else:
            message = (f"a run with id {run_id} has already ended ({status}); choose another run id, or "
                       "allow reusing it (allow_reuse=True) to start a new run under this id")
        super().__init__(message)


class AgentRunHandle:
    """One run: wait for it, ask about it, cancel it.

    Attributes:
        run_id: The run id (the workflow id).
    """

    #: A restored or forked run: how its agent definition differs from the
    #: snapshot's (``DefinitionChange.describe()``); None for other runs.
    definition_change: Any = None

    def __init__(self, handle: WorkflowHandle, *, turn: int | None = None, offset: int = 0,
                 output: OutputSpec | None = None) -> None:
        self._handle = handle
        #: The run's ``AgentSpec.output``, when this side knows it: ``result()``
        #: parses the answer into its Python type.
        self.output = output
        self.run_id = handle.id
        #: For a handle of a thread's turn (``AgentClient.send``): the turn;
        #: ``result()`` and ``events()`` are that turn's.
        self.turn = turn
        #: The thread's event offset where the turn's events begin.
        self.offset = offset

    @property
    def workflow_handle(self) -> WorkflowHandle:
        """The underlying Temporal handle, for anything not wrapped here."""
        return self._handle

    async def result(self) -> AgentRunResult:
        """Wait for the run to end.

        Raises:
            AgentRunFailed: The run failed, was cancelled or terminated; its
                ``result`` holds messages, usage and report when it failed.
                The exception is the subclass of the run's reason
                (``MaxStepsExceeded``, ``AgentRunCancelled``...; see
                :func:`agentloop.shared.runs.result.run_failed_class`).

        A handle bound to a thread's turn (:attr:`turn`) waits for that turn
        instead: its final text, messages and usage (an interrupted or
        rolled-back turn ends ``stopped``, with ``error`` saying why).
        """
        if self.turn is not None:
            return typed_result(await turn_result(self), self.output)
        try:
            result = await self._handle.result()
        except WorkflowFailureError as err:
            failed = _run_failed(self.run_id, err)
            if failed.result is not None:
                await self._fill_omitted(failed.result)
            raise failed from err
        await self._fill_omitted(result)
        return typed_result(result, self.output)

    async def _fill_omitted(self, result: AgentRunResult) -> None:
        """Long runs leave their messages, or their report's steps, out of
        the Temporal result; fetch them."""
        if result.messages_omitted:
            messages = await self.messages()
            result.messages = messages[len(messages) - result.messages_omitted :]
        if result.report_steps_omitted:
            result.report = await self.report()
            result.report_steps_omitted = False

    async def state(self) -> RunState:
        """Status, step, running tool calls, usage."""
        return await self._handle.query(contracts.STATE_QUERY, result_type=RunState)

    async def messages(self) -> list[Message]:
        """The conversation so far."""
        return (await self._handle.query(contracts.MESSAGES_QUERY, result_type=MessagesResult)).messages

    async def report(self) -> AgentRunReport:
        """The run report, up to now."""
        return await self._handle.query(contracts.REPORT_QUERY, result_type=AgentRunReport)

    async def events(
        self, from_offset: int = 0, *, poll_interval: float = 0.05, include_children: bool = False
    ) -> AsyncIterator[AgentEvent]:
        """The run's events from ``from_offset`` on, live, ending with the
        run's terminal event (or when the run closes without one).

        Reconnecting is resuming: pass the ``seq`` of the last event seen
        plus one, and the stream goes on without loss or repeats.

        Events are read with the Workflow Streams poll *query* rather than
        its long-poll update: a query leaves nothing in the run's history, so
        watching a run does not make it grow. ``poll_interval`` is the wait
        between reads once caught up.

        With ``include_children``, the events of the sub-agent runs it
        delegates to (and theirs) are interleaved as they come, each with its
        own ``run_id`` (and ``seq`` in its own stream): a child's events
        come after its ``agent.sub_agent.invocation.started`` and before its
        ``agent.sub_agent.invocation.completed``, and the stream still ends
        with this run's terminal event. Children started before
        ``from_offset`` are not followed.
        """
        if self.turn is not None and from_offset == 0:
            from_offset = self.offset  # a turn's handle: the turn's events, ending with agent.turn.ended
        source = self._tree_events(from_offset, poll_interval) if include_children else \
            self._own_events(from_offset, poll_interval)
        async for event in source:
            yield event

    async def _tree_events(self, from_offset: int, poll_interval: float) -> AsyncIterator[AgentEvent]:
        """This run's events and its sub-agents', merged (see :meth:`events`)."""
        queue: asyncio.Queue[Any] = asyncio.Queue()
        followers: dict[str, asyncio.Task[None]] = {}
        done = object()
        client = self._handle._client

        async def settle() -> None:
            # Followers may start more followers (grandchildren) while we wait.
            while pending := [t for t in followers.values() if not t.done()]:
                await asyncio.gather(*pending, return_exceptions=True)

        async def follow(handle: AgentRunHandle, offset: int, top: bool) -> None:
            # A child's started event is published as its start is
            # requested: the server creates the child a moment later.
            async for event in handle._own_events(offset, poll_interval, wait_to_exist=not top):
                if isinstance(event, SubAgentInvocationStarted) and event.child_run_id not in followers:
                    child = AgentRunHandle(client.get_workflow_handle(event.child_run_id))
                    followers[event.child_run_id] = asyncio.create_task(follow(child, 0, False))
                elif isinstance(event, SubAgentInvocationCompleted) and event.child_run_id in followers:
                    await asyncio.gather(followers[event.child_run_id], return_exceptions=True)
                if top and is_terminal(event):
                    await settle()
                await queue.put(event)

        async def top() -> None:
            try:
                await follow(self, from_offset, True)
                await settle()
                await queue.put(done)
            except BaseException as err:  # handed to the reader
                await queue.put(err)

        main = asyncio.create_task(top())
        try:
            while (item := await queue.get()) is not done:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            for task in [main, *followers.values()]:
                task.cancel()

    async def _own_events(
        self, from_offset: int, poll_interval: float, *, wait_to_exist: bool = False
    ) -> AsyncIterator[AgentEvent]:
        """This run's events only (see :meth:`events`). With ``wait_to_exist``
        (a sub-agent announced by its parent), a run the server does not know
        yet is waited for, up to :data:`CHILD_START_WAIT_SECONDS`."""
        converter = self._handle._client.data_converter.payload_converter
        offset = from_offset
        quiet_polls = 0
        failures = 0
        while True:
            try:
                batch = await self._handle.query(
                    "__temporal_workflow_stream_poll",
                    PollInput(topics=[EVENTS_TOPIC], from_offset=offset),
                    result_type=PollResult,
                )
            except RPCError as err:
                if err.status == RPCStatusCode.NOT_FOUND:
                    waited = failures * max(poll_interval, 0.2)
                    if not wait_to_exist or waited >= CHILD_START_WAIT_SECONDS:
                        raise UserError(f"no run {self.run_id}: {err.message}") from None
                    failures += 1
                    await asyncio.sleep(max(poll_interval, 0.2))
                    continue
                failures += 1
                if "no poller" in err.message and failures >= 3:
                    raise UserError(
                        f"no worker answers for run {self.run_id} (a run's events are read from its "
                        f"workflow, even after it ended): start a worker on its task queue ({err.message})"
                    ) from None
                # A run whose first task has not run yet, a continue-as-new
                # hand-over, or a worker restarting: retry.
                await asyncio.sleep(max(poll_interval, 0.2))
                continue
            failures = 0
            items = batch.items
            if items and items[0].offset > offset:
                # The run continued as new while this reader was behind, and
                # the next Temporal run did not carry these events.
                items = [*await self._earlier_items(offset, items[0].offset), *items]
            for item in items:
                payload = Payload()
                payload.ParseFromString(base64.b64decode(item.data))
                event = EVENT_ADAPTER.validate_python(converter.from_payload(payload))
                event.seq = item.offset
                yield event
                if is_terminal(event) or self._ends_turn(event):
                    return
            offset = batch.next_offset
            if batch.items:
                quiet_polls = 0
                if batch.more_ready:
                    continue
            else:
                quiet_polls += 1
                # A run that closed without a terminal event (terminated, or
                # started before events existed), or an offset past the end
                # of a closed run: stop once it is quiet.
                if quiet_polls % 20 == 1:
                    description = await self._handle.describe()
                    if description.status != WorkflowExecutionStatus.RUNNING:
                        return
            await asyncio.sleep(poll_interval)

    async def _earlier_items(self, start: int, end: int) -> list[Any]:
        """The stream's items from ``start`` up to ``end`` that the current
        Temporal run no longer holds (a hand-over carries the recent events
        only; each run keeps its own): read from the runs before it."""
        client = self._handle._client
        found: list[Any] = []
        try:
            run_id: str | None = (await self._handle.describe()).run_id
            while end > start and (run_id := await self._continued_from(run_id)):
                earlier = client.get_workflow_handle(self._handle.id, run_id=run_id)
                if items := await self._read_items(earlier, start, end):
                    found[:0] = items
                    end = items[0].offset
        except (RPCError, WorkflowQueryFailedError) as err:
            _log.warning("run %s: events %d to %d are gone with the Temporal run that held them (%s); "
                         "going on from event %d", self.run_id, start, end - 1, err, end)
        return found

    async def _continued_from(self, run_id: str | None) -> str | None:
        """The Temporal run that ``run_id`` continued from, if any."""
        handle = self._handle._client.get_workflow_handle(self._handle.id, run_id=run_id)
        async for event in handle.fetch_history_events(page_size=1):
            return event.workflow_execution_started_event_attributes.continued_execution_run_id or None
        return None

    @staticmethod
    async def _read_items(handle: WorkflowHandle, start: int, end: int) -> list[Any]:
        """One Temporal run's stream items from ``start`` (or its oldest)
        up to ``end``."""
        items: list[Any] = []
        offset = start
        while offset < end:
            batch = await handle.query("__temporal_workflow_stream_poll",
                                       PollInput(topics=[EVENTS_TOPIC], from_offset=offset), result_type=PollResult)
            items += [item for item in batch.items if item.offset < end]
            if not batch.more_ready:
                break
            offset = batch.next_offset
        return items

    async def export(self) -> AgentSnapshot:
        """The run as a versioned snapshot (query ``export``): spec, messages,
        report, usage, pending calls, thread id, step boundaries. Works for
        running, finished and continued-as-new runs (a worker answers it).

        Raises:
            UserError: No such run, or its worker cannot export it.
        """
        try:
            return await self._handle.query(contracts.EXPORT_QUERY, result_type=AgentSnapshot)
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise UserError(f"no run {self.run_id}: {err.message}") from None
            raise
        except WorkflowQueryFailedError as err:
            raise UserError(f"run {self.run_id} could not be exported: {err.message} (a worker of this "
                            "agentloop version answers the export query)") from None

    def _ends_turn(self, event: AgentEvent) -> bool:
        return self.turn is not None and isinstance(event, TurnEnded) and event.turn == self.turn

    async def turn_state(self, turn: int | None = None) -> TurnResult | None:
        """A thread's turn (query ``turn``): running, or how it ended; the
        handle's turn, else the latest, when ``turn`` is None."""
        n = turn if turn is not None else self.turn
        raw = await self._handle.query(contracts.TURN_QUERY, *([n] if n is not None else []))
        return TurnResult.model_validate(raw) if raw else None

    async def steer(self, text: str, *, by: str | None = None) -> SteerAccepted:
        """Add a user message that the model sees before its next LLM step
        (after the results of the step under way), without ending the turn.

        Raises:
            DecisionRejected: Nothing to steer (no turn runs), or bad text.
        """
        message = build_request(SteerMessage, text=text, by=by)
        try:
            return await self._handle.execute_update(contracts.STEER, message, result_type=SteerAccepted)
        except WorkflowUpdateFailedError as err:
            cause = err.cause
            raise DecisionRejected(cause.message if isinstance(cause, ApplicationError) else str(cause or err)) from None
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise DecisionRejected(f"nothing to steer: run {self.run_id} is not running ({err.message})") from None
            raise

    async def pending(self) -> PendingWork:
        """Calls waiting for an operator's decision or the client's outputs."""
        return await self._handle.query(contracts.PENDING_QUERY, result_type=PendingWork)

    async def decide(self, decision: ApprovalDecision) -> DecisionAccepted:
        """Deliver a decision on a pending call (update ``approve``).

        Raises:
            DecisionRejected: The call id is unknown or already decided, or
                the run has ended; nothing changed.
        """
        return await self._update(contracts.APPROVE, decision)

    async def approve(self, call_id: str, *, result: str | None = None, by: str | None = None) -> DecisionAccepted:
        """Approve a pending call; with ``result``, answer the model with it
        instead of running the tool (an override)."""
        return await self.decide(build_request(ApprovalDecision, call_id=call_id, decision="approve", result=result, by=by))

    async def deny(self, call_id: str, reason: str | None = None, *, by: str | None = None) -> DecisionAccepted:
        """Deny a pending call; the model hears it was denied, and why."""
        return await self.decide(build_request(ApprovalDecision, call_id=call_id, decision="deny", reason=reason, by=by))

    async def skip(self, call_id: str, *, result: str | None = None, by: str | None = None) -> DecisionAccepted:
        """Skip a pending call without running it; the model gets ``result``
        (or a note that it was skipped)."""
        return await self.decide(build_request(ApprovalDecision, call_id=call_id, decision="skip", result=result, by=by))

    async def submit_tool_outputs(
        self, outputs: Mapping[str, str] | Sequence[ToolOutput]
    ) -> DecisionAccepted:
        """Answer every call the run waits for (``requires_action``), by call id.

        Raises:
            DecisionRejected: An id is unknown or answered already, a pending
                id is missing, or the run has ended; nothing changed.
        """
        if isinstance(outputs, Mapping):
            items = [build_request(ToolOutput, call_id=k, output=v) for k, v in outputs.items()]
        else:
            items = list(outputs)
        submission = SubmitToolOutputs(tool_outputs=items)
        size = len(submission.model_dump_json())
        if size > MAX_INPUT_BYTES:
            raise DecisionRejected(
                f"the outputs are {size / 1e6:.1f} MB together; Temporal refuses payloads over 2 MB. "
                f"Send at most {MAX_INPUT_BYTES / 1e6:.1f} MB (the run cuts each output to the spec's "
                "tool_output_limit anyway)"
            )
        return await self._update(contracts.SUBMIT_TOOL_OUTPUTS, submission)

    async def stop(self, reason: str | None = None) -> None:
        """End the run ``stopped`` once its current step is done (signal ``stop``)."""
        await self._handle.signal(contracts.STOP_SIGNAL, StopRequest(reason=reason))

    async def cancel(self) -> None:
        """Cancel the run: running LLM calls and tools are cancelled (shell
        commands killed) and it ends ``cancelled``; messages stay queryable."""
        await self._handle.cancel()

    async def _update(self, name: str, payload: BaseModel) -> DecisionAccepted:
        # Weighed here too: a request over Temporal's 2 MiB payload limit
        # cannot even be refused by the run (its answer carries the request).
        size = len(payload.model_dump_json().encode())
        if size > MAX_REQUEST_BYTES:
            raise DecisionRejected(
                f"the {name} request is {size:,} bytes; a run takes requests of at most "
                f"{MAX_REQUEST_BYTES:,} bytes; nothing was sent"
            )
        try:
            return await self._handle.execute_update(name, payload, result_type=DecisionAccepted)
        except WorkflowUpdateFailedError as err:
            cause = err.cause
            message = cause.message if isinstance(cause, ApplicationError) else str(cause or err)
            raise DecisionRejected(f"run {self.run_id} refused {name}: {message}") from None
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise DecisionRejected(
                    f"run {self.run_id} is not running (it ended, or no run has this id): {err.message}"
                ) from None
            raise


class RunSummary(BaseModel):
    """One run, as :meth:`AgentClient.list_runs` finds it.

    Attributes:
        run_id: The run id.
        status: The agent status the run last indexed (``AgentStatus``);
            for runs that ended without indexing it, derived from Temporal's.
        agent_name: ``AgentSpec.name``.
        model: ``AgentSpec.model``.
        pending_tools: Tools whose calls wait for approval or outputs.
        started_at: When the run started.
        closed_at: When it ended, if it has.
        parent_run_id: For a sub-agent's run, the run that delegated to it.
        root_run_id: For a sub-agent's run, the top run of its tree.
    """

    run_id: str
    status: RunStatus | str
    agent_name: str = ""
    model: str = ""
    pending_tools: list[str] = Field(default_factory=list)
    started_at: datetime | None = None
    closed_at: datetime | None = None
    parent_run_id: str | None = None
    root_run_id: str | None = None


_TEMPORAL_STATUS: dict[Any, str] = {
    WorkflowExecutionStatus.RUNNING: "running",
    WorkflowExecutionStatus.COMPLETED: "completed",
    WorkflowExecutionStatus.FAILED: "failed",
    WorkflowExecutionStatus.CANCELED: "cancelled",
    WorkflowExecutionStatus.TERMINATED: "terminated",
    WorkflowExecutionStatus.TIMED_OUT: "timed_out",
    WorkflowExecutionStatus.CONTINUED_AS_NEW: "continued",
}


def runs_query(status: str | None = None, name: str | None = None, extra: str | None = None) -> str:
    """The visibility query :meth:`AgentClient.list_runs` sends (also what
    to type into ``temporal workflow list --query``)."""
    # A run that continued as new is listed once, as its latest Temporal run.
    clauses = [f'WorkflowType="{WORKFLOW_NAME}"', 'ExecutionStatus!="ContinuedAsNew"']
    if status:
        clauses.append(f'{AGENT_STATUS.name}="{status}"')
        if status in LIVE_STATUSES:
            # A terminated run cannot update its status: trust Temporal's.
            clauses.append('ExecutionStatus="Running"')
    if name:
        clauses.append(f'{AGENT_NAME.name}="{name}"')
    if extra:
        clauses.append(f"({extra})")
    return " AND ".join(clauses)


def _run_failed(run_id: str, err: WorkflowFailureError) -> AgentRunFailed:
    return run_failed_from(run_id, err.cause or err)


def _summary(execution: Any) -> RunSummary:
    """A listed Temporal run as a :class:`RunSummary`."""
    attrs = execution.typed_search_attributes
    indexed = attrs.get(AGENT_STATUS)
    temporal_status = _TEMPORAL_STATUS.get(execution.status, "unknown")
    if execution.status != WorkflowExecutionStatus.RUNNING and indexed in (None, *LIVE_STATUSES):
        indexed = temporal_status  # ended without indexing it (terminated, timed out)
    return RunSummary(
        run_id=execution.id,
        status=indexed or temporal_status,
        agent_name=attrs.get(AGENT_NAME) or "",
        model=attrs.get(AGENT_MODEL) or "",
        pending_tools=list(attrs.get(AGENT_PENDING_TOOLS) or []),
        started_at=execution.start_time,
        closed_at=execution.close_time,
        parent_run_id=attrs.get(AGENT_PARENT_RUN),
        root_run_id=attrs.get(AGENT_ROOT_RUN),
    )


class AgentClient:
    """Starts and follows agent runs on a Temporal server.

    Args:
        client: A Temporal client using the pydantic data converter.
        task_queue: The queue the agent workers poll.
    """

    def __init__(self, client: Client, *, task_queue: str | None = None) -> None:
        self.temporal = client
        self.task_queue = task_queue or task_queue_from_env()

    @property
    def schedules(self) -> AgentSchedules:
        """Schedules of agent runs, on Temporal Schedules (docs/schedules.md)."""
        from agentloop.client.schedules import AgentSchedules

        return AgentSchedules(self)

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

        Raises:
            RunIdInUse: A run with ``run_id`` is running, or has ended and
                ``allow_reuse`` is False.
        """
        spec = with_output(spec, output_type)
        run_id = thread_id or run_id or new_run_id()
        built, attributes = run_input(spec, input), start_search_attributes(spec)
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

        Raises:
            SnapshotError: Not a snapshot, another major version, or invalid.
            RunIdInUse: ``run_id`` is taken.
        """
        loaded = load_snapshot(dict(snapshot) if isinstance(snapshot, Mapping) else snapshot)
        return await self._start_input(restore_input(loaded, spec, message), run_id,
                                       thread=loaded.thread_id is not None)

    async def fork(
        self, run_id: str, at_step: int, message: str | None = None, *, new_run_id: str | None = None
    ) -> AgentRunHandle:
        """Start a new run whose conversation is run ``run_id``'s up to the
        end of step ``at_step`` (1-based), then ``message`` as a new user
        message if given. The fork's report says where it came from
        (``report.origin``) and the search attribute ``AgentForkedFrom``
        finds it. The fork of a thread is a thread (its id the new run id);
        the handle is then its first turn's, when it has one.

        Raises:
            UserError: No such run; ``SnapshotError`` when ``at_step`` is not
                one of its finished steps.
            RunIdInUse: ``new_run_id`` is taken.
        """
        snapshot = await self.get_handle(run_id).export()
        return await self.fork_from(snapshot, at_step, message, new_run_id=new_run_id)

    async def fork_from(
        self, snapshot: AgentSnapshot | str | bytes | Mapping[str, Any], at_step: int, message: str | None = None,
        *, new_run_id: str | None = None,
    ) -> AgentRunHandle:
        """:meth:`fork` from a snapshot already exported (or read from a file)."""
        loaded = load_snapshot(dict(snapshot) if isinstance(snapshot, Mapping) else snapshot)
        return await self._start_input(fork_input(loaded, at_step, message), new_run_id,
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
            from agentloop.shared.definition.fingerprint import agent_definition, definition_change

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

        Raises:
            ThreadNotFound: No such thread, and no spec to start it.
            ThreadBusy: ``reject`` and the thread is busy.
            UserError: The thread ended, the run is not a thread, or the
                message is empty or too long.
        """
        from agentloop.client.threads import send_message

        output = with_output(spec, output_type).output if spec is not None else \
            (output_spec_of(output_type) if output_type is not None else None)
        sent = await send_message(self, thread_id, message, spec, strategy=strategy, by=by)
        if isinstance(sent, AgentRunHandle):  # the thread did not run: its first turn started it
            sent.output = output or sent.output
            return sent
        workflow_handle, accepted = sent
        return AgentRunHandle(workflow_handle, turn=accepted.turn, offset=accepted.offset, output=output)

    async def _start_workflow(
        self, input: AgentRunInput, run_id: str, attributes: Any, *, allow_reuse: bool
    ) -> WorkflowHandle:
        """Start a run's workflow; an id in use or unregistered search
        attributes are a sentence saying what to do."""
        spec = input.spec
        try:
            return await self.temporal.start_workflow(
                WORKFLOW_NAME, input, id=run_id, task_queue=self.task_queue,
                static_summary=f"{spec.name} on {spec.model}", result_type=AgentRunResult,
                search_attributes=attributes,
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE if allow_reuse
                else WorkflowIDReusePolicy.REJECT_DUPLICATE,
            )
        except WorkflowAlreadyStartedError:
            raise await self._id_in_use(run_id) from None
        except RPCError as err:
            if err.status == RPCStatusCode.INVALID_ARGUMENT and "search attribute" in err.message.lower():
                raise UserError(
                    f"the Temporal namespace does not know agentloop's search attributes ({err.message}); "
                    "register them once with:\n  " + "\n  ".join(create_commands(self.temporal.namespace))
                ) from None
            raise

    async def _id_in_use(self, run_id: str) -> RunIdInUse:
        try:
            description = await self.temporal.get_workflow_handle(run_id).describe()
        except RPCError:  # gone meanwhile, or not ours to describe
            return RunIdInUse(run_id, running=True, status="running")
        if description.status == WorkflowExecutionStatus.RUNNING:
            return RunIdInUse(run_id, running=True, status="running")
        status = description.typed_search_attributes.get(AGENT_STATUS)
        if status in (None, *LIVE_STATUSES):
            status = _TEMPORAL_STATUS.get(description.status, "ended")
        return RunIdInUse(run_id, running=False, status=status, closed_at=description.close_time)

    async def run(
        self,
        spec: AgentSpec,
        input: str | Message | Sequence[Message],
        *,
        run_id: str | None = None,
        output_type: Any = None,
    ) -> AgentRunResult:
        """Start a run and wait for its result (see :meth:`AgentRunHandle.result`);
        ``output_type`` as for :meth:`start`."""
        return await (await self.start(spec, input, run_id=run_id, output_type=output_type)).result()

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
        return [_summary(execution) async for execution in
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
        return [_summary(execution) for execution in pages.current_page or []], pages.next_page_token or None

    def events(
        self, run_id: str, from_offset: int = 0, *, poll_interval: float = 0.05, include_children: bool = False
    ) -> AsyncIterator[AgentEvent]:
        """The events of run ``run_id`` (see :meth:`AgentRunHandle.events`;
        ``include_children`` interleaves its sub-agents' events)."""
        return self.get_handle(run_id).events(from_offset, poll_interval=poll_interval,
                                              include_children=include_children)

    def get_handle(self, run_id: str) -> AgentRunHandle:
        """The handle of an existing run."""
        return AgentRunHandle(self.temporal.get_workflow_handle(run_id, result_type=AgentRunResult))
