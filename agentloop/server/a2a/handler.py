"""The A2A request handler over :class:`AgentClient`: the task store is
Temporal itself. A task is a turn of a thread (see :mod:`.mapping`); every
answer goes through the same validated updates as the HTTP API."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncGenerator
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import (
    InvalidParamsError,
    InvalidRequestError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf import json_format
from temporalio.client import WorkflowExecutionStatus, WorkflowQueryFailedError
from temporalio.service import RPCError, RPCStatusCode

from agentloop.server.a2a.events import STATES, TaskStream, answer_artifact, status
from agentloop.server.a2a.mapping import (
    IDEMPOTENCY_KEY,
    TERMINAL,
    Decide,
    Refuse,
    TaskRef,
    action_data,
    answer_of,
    approval_data,
    parse_task_id,
    task_state,
)
from agentloop.server.access.auth import Caller
from agentloop.server.access.visibility import Found, find_run, unscoped
from agentloop.server.deps import ServerState, may_send
from agentloop.server.streams.hub import IDLE
from agentloop.shared.base.errors import DecisionRejected, UserError
from agentloop.shared.definition.approvals import ToolOutput
from agentloop.shared.definition.spec import AgentSpec
from agentloop.shared.runs.run import RunState
from agentloop.shared.runs.threads import MessageRefused, ThreadBusy, TurnResult

#: How long a cancel waits for the run to end before answering.
CANCEL_WAIT_SECONDS = 10.0


def idempotent_run_id(agent: str, caller: str, key: str) -> str:
    """The run id a message's idempotency key names (per agent and token)."""
    return "a2a-" + hashlib.sha256(f"{agent}\0{caller}\0{key}".encode()).hexdigest()[:32]


def _parts(message: pb.Message) -> tuple[list[str], list[Any]]:
    texts = [p.text for p in message.parts if p.WhichOneof("content") == "text"]
    data = [json_format.MessageToDict(p.data) for p in message.parts if p.WhichOneof("content") == "data"]
    return texts, data


class RunTasks(RequestHandler):
    """A2A tasks that are agentloop runs, for the registered agent named in
    the call context (``context.state["agent"]``)."""

    def __init__(self, state: ServerState) -> None:
        self.state = state

    def _who(self, context: ServerCallContext) -> tuple[str, AgentSpec, Caller]:
        agent = context.state["agent"]
        return agent, self.state.settings.agents[agent], context.state["caller"]

    # --- reading a task ---------------------------------------------------

    async def _run_state(self, ref: TaskRef, spec: AgentSpec, caller: Caller) -> RunState:
        if not unscoped(caller):  # another tenant's run is answered as an unknown task
            found = await find_run(self.state.client, self.state.settings, caller, ref.run_id)
            if not isinstance(found, Found):
                raise TaskNotFoundError(f"no task {ref.task_id[:200]!r}")
        try:
            state = await self.state.client.get_handle(ref.run_id).state()
        except (RPCError, WorkflowQueryFailedError, UserError) as err:
            if isinstance(err, RPCError) and err.status != RPCStatusCode.NOT_FOUND:
                raise UnsupportedOperationError(f"no worker answered for task {ref.task_id!r}: {err.message}") from None
            raise TaskNotFoundError(f"no task {ref.task_id[:200]!r}") from None
        if state.agent_name != spec.name or (ref.turn > 1 and ref.turn > max(state.turn, 1)):
            raise TaskNotFoundError(f"no task {ref.task_id[:200]!r} of this agent")
        return state

    async def _turn(self, ref: TaskRef, state: RunState) -> TurnResult | None:
        if not state.thread_id:
            return None
        return await self.state.client.get_handle(ref.run_id).turn_state(ref.turn)

    async def _task(self, ref: TaskRef, spec: AgentSpec, caller: Caller) -> pb.Task:
        state = await self._run_state(ref, spec, caller)
        turn = await self._turn(ref, state)
        name = task_state(state, ref.turn, turn)
        data: Any = None
        if name == "input-required":
            data = approval_data(state.pending_approvals[0]) if state.pending_approvals else \
                action_data(state.pending_actions)
        task = pb.Task(id=ref.task_id, context_id=ref.run_id,
                       status=status(ref, name, text=(turn.error or "") if turn else (state.error or ""), data=data))
        if turn is not None and name in TERMINAL and (turn.final_text or turn.output is not None):
            task.artifacts.append(answer_artifact(ref, turn.final_text, turn.output))
        return task

    # --- starting, continuing, answering ----------------------------------

    async def _begin(self, params: pb.SendMessageRequest, context: ServerCallContext) -> tuple[TaskStream, int]:
        """Start the task the message asks for, or answer the one it names:
        the stream of its updates and the offset to read from."""
        agent, spec, caller = self._who(context)
        message = params.message
        texts, data = _parts(message)
        if message.task_id:
            return await self._answer(parse_task_id(message.task_id), spec, caller, texts, data)
        text = "\n".join([*texts, *(json_format.MessageToJson(p.data) for p in message.parts
                                    if p.WhichOneof("content") == "data")]).strip()
        if not text:
            raise InvalidParamsError("the message has no text: send a text part (or a data part)")
        client = self.state.client
        if message.context_id:
            if not await may_send(self.state, caller, message.context_id):
                raise InvalidRequestError(f"contextId {message.context_id[:200]!r} is in use; choose another "
                                          "(or leave it out to start a new conversation)")
            try:
                handle = await client.send(message.context_id, text, spec, by=caller.name, tenant=caller.tenant)
            except (ThreadBusy, MessageRefused, UserError) as err:
                raise InvalidRequestError(str(err)) from None
            ref = TaskRef(message.context_id, handle.turn or 1)
            return TaskStream(ref, started=ref.turn == 1), handle.offset if ref.turn > 1 else 0
        key = json_format.MessageToDict(message.metadata).get(IDEMPOTENCY_KEY) if message.metadata else None
        run_id = idempotent_run_id(agent, caller.name, str(key)) if key else None
        from agentloop.client.agent_client import new_run_id
        from agentloop.client.runs import RunIdInUse
        run_id = run_id or new_run_id()
        try:
            await client.start(spec, text, thread_id=run_id, tenant=caller.tenant)
        except RunIdInUse:
            if not key:
                raise
        return TaskStream(TaskRef(run_id, 1)), 0

    async def _answer(self, ref: TaskRef, spec: AgentSpec, caller: Caller, texts: list[str],
                      data: list[Any]) -> tuple[TaskStream, int]:
        state = await self._run_state(ref, spec, caller)
        if task_state(state, ref.turn, await self._turn(ref, state)) != "input-required":
            raise InvalidRequestError(f"task {ref.task_id!r} does not wait for input; to go on with the "
                                      "conversation, send a message with its contextId and no taskId")
        answer = answer_of(texts, data, state.pending_approvals, state.pending_actions, caller.name)
        if isinstance(answer, Refuse):
            raise InvalidParamsError(answer.reason)
        handle = self.state.client.get_handle(ref.run_id)
        try:
            if isinstance(answer, Decide):
                for decision in answer.decisions:
                    await handle.decide(decision)
                waited = {d.call_id for d in answer.decisions}
            else:
                outputs = [ToolOutput.model_validate(o) for o in answer.tool_outputs]
                await handle.submit_tool_outputs(outputs)
                waited = {a.call_id for a in state.pending_actions}
        except (DecisionRejected, ValueError) as err:
            raise InvalidParamsError(str(err)[:500]) from None
        steps = None if isinstance(answer, Decide) else state.step
        return TaskStream(ref, started=ref.turn == 1, skip_until=waited, skip_steps=steps), 0

    async def _follow(self, stream: TaskStream, offset: int) -> AsyncGenerator[Any]:
        """The task's updates from ``offset`` until it is final, or waits for
        input (then the stream ends, as A2A has it for an interrupted task)."""
        handle = self.state.client.get_handle(stream.ref.run_id)
        hub = self.state.hub  # with live deltas: text at the provider's pace, each character once
        async for event in hub.subscribe(stream.ref.run_id, offset, idle=self.state.settings.heartbeat_seconds,
                                         live=hub.live, accept=stream.takes_live):
            if event is IDLE:
                continue
            for update in stream.feed(event):
                yield update
            while stream.unsure:
                asked = stream.unsure.pop(0)
                waiting = {a.call_id for a in (await handle.pending()).approvals}
                if asked.approval.call_id in waiting:
                    for update in stream.confirmed(asked):
                        yield update
            if stream.done or stream.state == "input-required":
                return  # final, or interrupted: the stream ends (the next message answers)

    # --- the A2A methods ----------------------------------------------------

    async def on_message_send_stream(self, params: pb.SendMessageRequest,
                                     context: ServerCallContext) -> AsyncGenerator[Any]:
        stream, offset = await self._begin(params, context)
        ref = stream.ref
        yield pb.Task(id=ref.task_id, context_id=ref.run_id, status=status(ref, "submitted"))
        async for update in self._follow(stream, offset):
            yield update

    async def on_message_send(self, params: pb.SendMessageRequest, context: ServerCallContext) -> pb.Task:
        stream, offset = await self._begin(params, context)
        _, spec, caller = self._who(context)
        if not params.configuration.return_immediately:
            async for update in self._follow(stream, offset):
                if isinstance(update, pb.TaskStatusUpdateEvent) and update.status.state == STATES["input-required"]:
                    break
        return await self._task(stream.ref, spec, caller)

    async def on_get_task(self, params: pb.GetTaskRequest, context: ServerCallContext) -> pb.Task:
        _, spec, caller = self._who(context)
        return await self._task(parse_task_id(params.id), spec, caller)

    async def on_cancel_task(self, params: pb.CancelTaskRequest, context: ServerCallContext) -> pb.Task:
        """Workflow cancel: the run (the whole thread) ends ``cancelled``."""
        _, spec, caller = self._who(context)
        if caller.scope != "act":
            raise InvalidRequestError(f"token {caller.name!r} has scope read; cancelling needs act")
        ref = parse_task_id(params.id)
        task = await self._task(ref, spec, caller)
        if task.status.state in {STATES[s] for s in TERMINAL}:
            raise TaskNotCancelableError(f"task {ref.task_id!r} has ended")
        workflow = self.state.client.temporal.get_workflow_handle(ref.run_id)
        await workflow.cancel()
        for _ in range(int(CANCEL_WAIT_SECONDS / 0.1)):
            if (await workflow.describe()).status != WorkflowExecutionStatus.RUNNING:
                break
            await asyncio.sleep(0.1)
        return await self._task(ref, spec, caller)

    async def on_subscribe_to_task(self, params: pb.SubscribeToTaskRequest,
                                   context: ServerCallContext) -> AsyncGenerator[Any]:
        """The task now, then its updates: its past replayed (the answer so
        far, approval requests still waiting), then live."""
        ref = parse_task_id(params.id)
        _, spec, caller = self._who(context)
        task = await self._task(ref, spec, caller)
        yield task
        if task.status.state in {STATES[s] for s in TERMINAL}:
            return
        state = await self.state.client.get_handle(ref.run_id).state()
        stream = TaskStream(ref, started=ref.turn == 1, pending={a.call_id for a in state.pending_approvals})
        async for update in self._follow(stream, 0):
            yield update

    async def on_list_tasks(self, params: Any, context: ServerCallContext) -> Any:
        raise UnsupportedOperationError("ListTasks is not served: list runs with GET /v1/runs?name=AGENT")

    async def on_create_task_push_notification_config(self, params: Any, context: ServerCallContext) -> Any:
        raise PushNotificationNotSupportedError()

    async def on_get_task_push_notification_config(self, params: Any, context: ServerCallContext) -> Any:
        raise PushNotificationNotSupportedError()

    async def on_list_task_push_notification_configs(self, params: Any, context: ServerCallContext) -> Any:
        raise PushNotificationNotSupportedError()

    async def on_delete_task_push_notification_config(self, params: Any, context: ServerCallContext) -> None:
        raise PushNotificationNotSupportedError()

    async def on_get_extended_agent_card(self, params: Any, context: ServerCallContext) -> Any:
        raise UnsupportedOperationError("there is no extended card: the card is the whole card")
