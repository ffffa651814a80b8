"""AgentRunHandle: one run (or one turn of a thread): wait for it, ask
about it, follow its events, decide its pending calls, stop or cancel it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from pydantic import BaseModel
from temporalio.client import (
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from agentloop.client.events import EventReader
from agentloop.shared.base import contracts
from agentloop.shared.base.contracts import MAX_INPUT_BYTES
from agentloop.shared.base.errors import DecisionRejected, UserError, build_request
from agentloop.shared.base.messages import Message
from agentloop.shared.definition.approvals import (
    MAX_REQUEST_BYTES,
    ApprovalDecision,
    DecisionAccepted,
    PendingWork,
    StopRequest,
    SubmitToolOutputs,
    ToolOutput,
)
from agentloop.shared.definition.output import OutputSpec
from agentloop.shared.runs.events import AgentEvent
from agentloop.shared.runs.report import AgentRunReport
from agentloop.shared.runs.result import AgentRunResult, run_failed
from agentloop.shared.runs.run import MessagesResult, RunState, run_failed_from, typed_result
from agentloop.shared.runs.snapshots import AgentSnapshot
from agentloop.shared.runs.threads import SteerAccepted, SteerMessage, TurnResult

#: Longest pause between two reads of a turn's state while waiting for it, in seconds.
TURN_POLL_MAX_SECONDS = 0.5


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
            return typed_result(await _wait_for_turn(self), self.output)
        try:
            result = await self._handle.result()
        except WorkflowFailureError as err:
            failed = run_failed_from(self.run_id, err.cause or err)
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
        self, from_offset: int = 0, *, poll_interval: float = 0.05, include_children: bool = False,
        wait: bool = False,
    ) -> AsyncIterator[AgentEvent]:
        """The run's events from ``from_offset`` on, live, ending with the
        run's terminal event (or when the run closes without one).

        Reconnecting is resuming: pass the ``seq`` of the last event seen
        plus one, and the stream goes on without loss or repeats.

        Events are read with the Workflow Streams poll *query* rather than
        its long-poll update: a query leaves nothing in the run's history, so
        watching a run does not make it grow. ``poll_interval`` is the wait
        between reads once caught up.

        With ``wait``, a reader caught up waits in the workflow instead (the
        Workflow Streams long-poll update, a bounded wait): an event reaches
        it a signal after it is published rather than up to a poll interval
        later, and nothing is asked while nothing happens. Each wait that is
        accepted writes two events into the run's history and takes a
        workflow task (see ``docs/events.md``); a run that refuses the update
        is polled, as without ``wait``.

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
        reader = EventReader(self._handle, self.turn, wait=wait)
        source = reader.tree_events(from_offset, poll_interval) if include_children else \
            reader.own_events(from_offset, poll_interval)
        async for event in source:
            yield event

    def _own_events(self, from_offset: int, poll_interval: float, *,
                    wait_to_exist: bool = False) -> AsyncIterator[AgentEvent]:
        """This run's events only, without its sub-agents' (see :class:`EventReader`)."""
        return EventReader(self._handle, self.turn).own_events(from_offset, poll_interval,
                                                               wait_to_exist=wait_to_exist)

    async def _earlier_items(self, start: int, end: int) -> list[Any]:
        """Stream items the current Temporal run no longer holds (see :class:`EventReader`)."""
        return await EventReader(self._handle, self.turn).earlier_items(start, end)

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
            said = cause.message if isinstance(cause, ApplicationError) else str(cause or err)
            raise DecisionRejected(said) from None
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
        return await self.decide(
            build_request(ApprovalDecision, call_id=call_id, decision="approve", result=result, by=by))

    async def deny(self, call_id: str, reason: str | None = None, *, by: str | None = None) -> DecisionAccepted:
        """Deny a pending call; the model hears it was denied, and why."""
        return await self.decide(
            build_request(ApprovalDecision, call_id=call_id, decision="deny", reason=reason, by=by))

    async def skip(self, call_id: str, *, result: str | None = None, by: str | None = None) -> DecisionAccepted:
        """Skip a pending call without running it; the model gets ``result``
        (or a note that it was skipped)."""
        return await self.decide(
            build_request(ApprovalDecision, call_id=call_id, decision="skip", result=result, by=by))

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


async def _wait_for_turn(handle: AgentRunHandle) -> AgentRunResult:
    """Wait until the handle's turn has ended; its result. A failed turn
    raises :class:`~agentloop.shared.runs.result.AgentRunFailed` (the subclass of its
    reason), as a failed run does; a thread that ended before the turn did
    raises what the run's own result raises."""
    assert handle.turn is not None
    pause, polls = 0.05, 0
    while True:
        turn = await handle.turn_state(handle.turn)
        if turn is not None and turn.status != "running":
            return await _turn_result(handle, turn)
        polls += 1
        if polls % 10 == 0:
            description = await handle.workflow_handle.describe()
            if description.status != WorkflowExecutionStatus.RUNNING:
                bare = type(handle)(handle.workflow_handle)
                return await bare.result()
        await asyncio.sleep(pause)
        pause = min(pause * 1.5, TURN_POLL_MAX_SECONDS)


async def _turn_result(handle: AgentRunHandle, turn: TurnResult) -> AgentRunResult:
    messages = await handle.messages()
    end = turn.end_message or len(messages)
    result = AgentRunResult(
        run_id=handle.run_id,
        status="completed" if turn.status == "completed" else "failed" if turn.status == "failed" else "stopped",
        reason=turn.reason or "done",
        final_text=turn.final_text,
        output=turn.output,
        error=turn.error,
        messages=messages[turn.first_message + 1:end] if turn.status != "rolled_back" else [],
        usage=turn.usage,
        report=await handle.report(),
    )
    if turn.status == "failed":
        raise run_failed(f"thread {handle.run_id}, turn {turn.turn} failed ({turn.reason}): {turn.error}",
                         reason=turn.reason, result=result)
    return result
