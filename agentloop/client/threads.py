"""The client side of threads: sending a message, waiting for a turn
(``AgentClient.send``, ``AgentRunHandle.result`` of a turn's handle)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from temporalio.client import WorkflowExecutionStatus, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from agentloop.shared.base import contracts
from agentloop.shared.base.errors import build_request
from agentloop.shared.runs.result import run_failed
from agentloop.shared.runs.result import AgentRunResult
from agentloop.shared.runs.threads import (
    THREAD_BUSY_ERROR_TYPE,
    MessageAccepted,
    MessageRefused,
    SendMessage,
    ThreadBusy,
    ThreadNotFound,
    TurnResult,
)

if TYPE_CHECKING:
    from agentloop.client.agent_client import AgentClient, AgentRunHandle
    from agentloop.shared.definition.spec import AgentSpec

#: Longest pause between two reads of a turn's state while waiting for it, in seconds.
TURN_POLL_MAX_SECONDS = 0.5


async def send_message(client: AgentClient, thread_id: str, text: str, spec: AgentSpec | None, *,
                       strategy: str | None, by: str | None) -> tuple[WorkflowHandle, MessageAccepted] | AgentRunHandle:
    """``AgentClient.send`` (see there): the thread's workflow and what it
    accepted, or the handle of the thread's first turn when this message
    started it."""
    message = build_request(SendMessage, text=text, strategy=strategy, by=by)
    handle = client.temporal.get_workflow_handle(thread_id, result_type=AgentRunResult)
    try:
        accepted = await handle.execute_update(contracts.SEND, message, result_type=MessageAccepted)
    except WorkflowUpdateFailedError as err:
        cause = err.cause
        said = cause.message if isinstance(cause, ApplicationError) else str(cause or err)
        if isinstance(cause, ApplicationError) and cause.type == THREAD_BUSY_ERROR_TYPE:
            raise ThreadBusy(said) from None
        raise MessageRefused(f"thread {thread_id} refused the message: {said}") from None
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
        return await _not_running(client, thread_id, text, spec, strategy)
    return handle, accepted


async def _not_running(client: AgentClient, thread_id: str, text: str, spec: AgentSpec | None,
                       strategy: str | None) -> AgentRunHandle:
    """A message for a thread that does not run: start it (with a spec),
    or say it does not exist, or that it has ended."""
    try:
        description = await client.temporal.get_workflow_handle(thread_id).describe()
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
        if spec is None:
            raise ThreadNotFound(thread_id) from None
        return await client.start(spec, text, thread_id=thread_id, double_texting=strategy
                                  if strategy in ("enqueue", "interrupt", "rollback", "reject") else None)
    status = description.status.name.lower() if description.status else "ended"
    raise MessageRefused(
        f"thread {thread_id} has ended ({status}); it takes no more messages. `agentloop show {thread_id}` "
        "shows it; start a new thread (another id) to go on") from None


async def wait_for_turn(handle: AgentRunHandle) -> AgentRunResult:
    """Wait until the handle's turn has ended; its result. A failed turn
    raises :class:`~agentloop.shared.runs.result.AgentRunFailed` (the subclass of its
    reason), as a failed run does; a thread that ended before the turn did
    raises what the run's own result raises."""
    assert handle.turn is not None
    pause, polls = 0.05, 0
    while True:
        turn = await handle.turn_state(handle.turn)
        if turn is not None and turn.status != "running":
            return await _result_of(handle, turn)
        polls += 1
        if polls % 10 == 0:
            description = await handle.workflow_handle.describe()
            if description.status != WorkflowExecutionStatus.RUNNING:
                bare = type(handle)(handle.workflow_handle)
                return await bare.result()
        await asyncio.sleep(pause)
        pause = min(pause * 1.5, TURN_POLL_MAX_SECONDS)


async def _result_of(handle: AgentRunHandle, turn: TurnResult) -> AgentRunResult:
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
