"""AgentClient: start runs, follow them, get their results.

::

    client = await AgentClient.connect("localhost:7233")
    handle = await client.start(AgentSpec(model="openai:gpt-4.1-mini"), "Summarise README.md")
    result = await handle.result()
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError, CancelledError, TerminatedError

from agentloop.config import TemporalConfig
from agentloop.errors import RUN_FAILED_ERROR_TYPE, AgentRunFailed, UserError
from agentloop.messages import Message
from agentloop.report import AgentRunReport
from agentloop.run import AgentRunInput, AgentRunResult, MessagesResult, RunState
from agentloop.spec import AgentSpec

#: The workflow type name runs are started with.
WORKFLOW_NAME = "AgentRunWorkflow"


def new_run_id() -> str:
    """A fresh run id."""
    return f"run-{uuid.uuid4().hex[:16]}"


def _as_messages(input: str | Message | Sequence[Message]) -> list[Message]:
    if isinstance(input, str):
        return [Message.user(input)]
    if isinstance(input, Message):
        return [input]
    messages = list(input)
    if not messages:
        raise UserError("a run needs at least one input message")
    return messages


class AgentRunHandle:
    """One run: wait for it, ask about it, cancel it.

    Attributes:
        run_id: The run id (the workflow id).
    """

    def __init__(self, handle: WorkflowHandle) -> None:
        self._handle = handle
        self.run_id = handle.id

    @property
    def workflow_handle(self) -> WorkflowHandle:
        """The underlying Temporal handle, for anything not wrapped here."""
        return self._handle

    async def result(self) -> AgentRunResult:
        """Wait for the run to end.

        Raises:
            AgentRunFailed: The run failed, was cancelled or terminated; its
                ``result`` holds messages, usage and report when it failed.
        """
        try:
            return await self._handle.result()
        except WorkflowFailureError as err:
            raise _run_failed(self.run_id, err) from err

    async def state(self) -> RunState:
        """Status, step, running tool calls, usage."""
        return await self._handle.query("state", result_type=RunState)

    async def messages(self) -> list[Message]:
        """The conversation so far."""
        return (await self._handle.query("messages", result_type=MessagesResult)).messages

    async def report(self) -> AgentRunReport:
        """The run report, up to now."""
        return await self._handle.query("report", result_type=AgentRunReport)

    async def cancel(self) -> None:
        """Ask Temporal to cancel the run."""
        await self._handle.cancel()


def _run_failed(run_id: str, err: WorkflowFailureError) -> AgentRunFailed:
    cause = err.cause
    if isinstance(cause, ApplicationError) and cause.type == RUN_FAILED_ERROR_TYPE:
        result = AgentRunResult.model_validate(cause.details[0]) if cause.details else None
        reason = result.reason if result else "error"
        return AgentRunFailed(f"run {run_id} failed ({reason}): {result.error if result else cause.message}",
                              reason=reason, result=result)
    if isinstance(cause, CancelledError):
        return AgentRunFailed(f"run {run_id} was cancelled", reason="cancelled")
    if isinstance(cause, TerminatedError):
        return AgentRunFailed(f"run {run_id} was terminated: {cause.message}", reason="error")
    return AgentRunFailed(f"run {run_id} failed: {cause or err}", reason="error")


class AgentClient:
    """Starts and follows agent runs on a Temporal server.

    Args:
        client: A Temporal client using the pydantic data converter.
        task_queue: The queue the agent workers poll.
    """

    def __init__(self, client: Client, *, task_queue: str | None = None) -> None:
        self.temporal = client
        self.task_queue = task_queue or TemporalConfig.from_env().task_queue

    @classmethod
    async def connect(
        cls,
        address: str | None = None,
        *,
        namespace: str | None = None,
        task_queue: str | None = None,
    ) -> AgentClient:
        """Connect; unset arguments come from ``TEMPORAL_ADDRESS``,
        ``TEMPORAL_NAMESPACE`` and ``AGENTLOOP_TASK_QUEUE``."""
        config = TemporalConfig.from_env()
        address = address or config.address
        if not address:
            raise UserError(
                "no Temporal address: pass one or set TEMPORAL_ADDRESS (`agentloop dev` starts "
                "a local server and prints its address)"
            )
        client = await Client.connect(
            address,
            namespace=namespace or config.namespace,
            data_converter=pydantic_data_converter,
        )
        return cls(client, task_queue=task_queue or config.task_queue)

    async def start(
        self,
        spec: AgentSpec,
        input: str | Message | Sequence[Message],
        *,
        run_id: str | None = None,
    ) -> AgentRunHandle:
        """Start a run and return its handle.

        Args:
            spec: The agent.
            input: A user instruction, a message, or messages (a thread's
                earlier messages first).
            run_id: The run id to use; a fresh one when None. Starting a run
                whose id is in use raises.
        """
        run_input = AgentRunInput(spec=spec, messages=_as_messages(input))
        handle = await self.temporal.start_workflow(
            WORKFLOW_NAME,
            run_input,
            id=run_id or new_run_id(),
            task_queue=self.task_queue,
            static_summary=f"{spec.name} on {spec.model}",
            result_type=AgentRunResult,
        )
        return AgentRunHandle(handle)

    async def run(
        self,
        spec: AgentSpec,
        input: str | Message | Sequence[Message],
        *,
        run_id: str | None = None,
    ) -> AgentRunResult:
        """Start a run and wait for its result (see :meth:`AgentRunHandle.result`)."""
        return await (await self.start(spec, input, run_id=run_id)).result()

    def get_handle(self, run_id: str) -> AgentRunHandle:
        """The handle of an existing run."""
        return AgentRunHandle(self.temporal.get_workflow_handle(run_id, result_type=AgentRunResult))
