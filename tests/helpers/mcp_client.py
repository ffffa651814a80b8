"""The ``mcp`` package's own client, opted into the Tasks extension
(``io.modelcontextprotocol/tasks``): the extension's ``resultType: "task"``
claimed as :class:`TaskCreated`, and ``tasks/get``, ``tasks/update`` and
``tasks/cancel`` sent through the client session (with ``Mcp-Name``: the
task id), for the tests and the benchmark."""

from __future__ import annotations

import time
from typing import Any, Literal

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from pydantic import ConfigDict, Field, TypeAdapter

from tests.helpers.polling import eventually

TASKS = "io.modelcontextprotocol/tasks"
_ANY = TypeAdapter(dict[str, Any])


class TaskCreated(types.Result):
    """A ``CreateTaskResult``: the task the server made of a call."""

    model_config = ConfigDict(extra="allow")

    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str = Field(alias="taskId")
    status: str


async def _unresolved(task: TaskCreated, ctx: ClaimContext) -> types.CallToolResult:
    raise RuntimeError(f"task {task.task_id}: call with session.call_tool(..., allow_claimed=True)")


class Tasks(ClientExtension):
    """Opt into Tasks: advertise the extension, claim its task results."""

    identifier = TASKS

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=TaskCreated, resolve=_unresolved)]


class _TaskParams(types.RequestParams):
    model_config = ConfigDict(extra="allow")
    task_id: str = Field(alias="taskId")


class _TaskRequest(types.Request[_TaskParams, str]):
    name_param = "taskId"


def client(url: str, token: str | None = None, *, tasks: bool = True) -> Client:
    """A client of ``url`` (streamable HTTP), with a bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120))
    return Client(streamable_http_client(url, http_client=http), extensions=[Tasks()] if tasks else None)


async def start_task(session: Any, tool: str, message: str) -> TaskCreated:
    """Call ``tool``; the server answers with a task."""
    created = await session.call_tool(tool, {"message": message}, allow_claimed=True)
    assert isinstance(created, TaskCreated), created
    return created


async def task_request(session: Any, method: str, task_id: str, **params: Any) -> dict[str, Any]:
    """``tasks/get``, ``tasks/update`` or ``tasks/cancel``: the raw result."""
    request = _TaskRequest(method=method, params=_TaskParams(taskId=task_id, **params))
    return await session.send_request(request, _ANY)


async def poll(session: Any, task_id: str, until: Any, what: str, timeout: float = 30) -> dict[str, Any]:
    """``tasks/get`` until ``until(task)`` (every 50 ms: the tests do not wait the hinted interval)."""

    async def check() -> dict[str, Any] | None:
        task = await task_request(session, "tasks/get", task_id)
        return task if until(task) else None

    return await eventually(check, what, timeout=timeout)


def status_is(*statuses: str) -> Any:
    return lambda task: task.get("status") in statuses


def since(start: float) -> float:
    return time.perf_counter() - start
