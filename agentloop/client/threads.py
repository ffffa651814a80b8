"""The client side of threads: a thread's first run, and sending a thread
its next message (``AgentClient.start(thread_id=...)``, ``AgentClient.send``).
A turn's handle waits for its turn (:mod:`agentloop.client.handle`)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from agentloop.shared.base import contracts
from agentloop.shared.base.errors import UserError, build_request, describe_validation_error
from agentloop.shared.runs.result import AgentRunResult
from agentloop.shared.runs.search_attributes import AGENT_THREAD
from agentloop.shared.runs.threads import (
    THREAD_BUSY_ERROR_TYPE,
    MessageAccepted,
    MessageRefused,
    SendMessage,
    ThreadBusy,
    ThreadNotFound,
    ThreadOptions,
)

#: The strategies a message that starts a thread gives the thread.
_STARTING_STRATEGIES = ("enqueue", "interrupt", "rollback", "reject")


def thread_start(built: Any, attributes: TypedSearchAttributes, thread_id: str,
                 double_texting: str | None) -> tuple[Any, TypedSearchAttributes]:
    """A thread's first run: its input with the thread options, its start
    search attributes with ``AgentThread``."""
    try:
        options = ThreadOptions.model_validate({"id": thread_id, "double_texting": double_texting})
    except ValidationError as exc:
        raise UserError(f"invalid thread: {describe_validation_error(exc)}") from None
    pairs = [*attributes.search_attributes, SearchAttributePair(AGENT_THREAD, thread_id)]
    return built.model_copy(update={"thread": options}), TypedSearchAttributes(pairs)


async def send_message(temporal: Client, thread_id: str, text: str, *, strategy: str | None,
                       by: str | None) -> tuple[WorkflowHandle, MessageAccepted] | None:
    """``AgentClient.send`` (see there): the thread's workflow and what it
    accepted, or None when no workflow of that id runs (see :func:`not_running`)."""
    message = build_request(SendMessage, text=text, strategy=strategy, by=by)
    handle = temporal.get_workflow_handle(thread_id, result_type=AgentRunResult)
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
        return None
    return handle, accepted


async def not_running(temporal: Client, thread_id: str, *, can_start: bool, strategy: str | None) -> str | None:
    """A message for a thread that does not run: the double-texting strategy
    to start it with, when it never existed and a spec can start it; else
    raise that it does not exist, or that it has ended."""
    try:
        description = await temporal.get_workflow_handle(thread_id).describe()
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
        if not can_start:
            raise ThreadNotFound(thread_id) from None
        return strategy if strategy in _STARTING_STRATEGIES else None
    status = description.status.name.lower() if description.status else "ended"
    raise MessageRefused(
        f"thread {thread_id} has ended ({status}); it takes no more messages. `agentloop show {thread_id}` "
        "shows it; start a new thread (another id) to go on") from None
