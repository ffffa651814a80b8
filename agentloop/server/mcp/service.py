"""The MCP server of the registered agents, built on the ``mcp`` package's
low-level ``Server``: ``tools/list`` and ``tools/call`` (a short call
answered inline, with progress from the run's events), and the Tasks
extension's ``tasks/get``, ``tasks/update`` and ``tasks/cancel``, added as
extension methods (SEP-2133) because the ``mcp`` release has no Tasks
support of its own. The task id is the run id. Who calls is decided by the
transport (:data:`CallerOf`): the bearer token over HTTP, the launching user
(or ``AGENTLOOP_MCP_TOKEN``) over stdio."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.mcpserver.server import require_client_extension
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError

from agentloop.server.access.auth import Caller
from agentloop.server.access.visibility import Found, NotARun, find_run
from agentloop.server.mcp import mapping
from agentloop.server.settings import Scope, ServerSettings
from agentloop.shared.base.errors import DecisionRejected, UserError
from agentloop.shared.definition.approvals import ApprovalDecision, ToolOutput
from agentloop.shared.definition.spec import AgentSpec
from agentloop.shared.runs.events import is_terminal
from agentloop.shared.runs.result import AgentRunFailed

if TYPE_CHECKING:
    from agentloop.client.agent_client import AgentClient
    from agentloop.client.handle import AgentRunHandle
    from agentloop.server.streams.hub import RunHub

#: The caller of a request, if it may do ``needed``; raises MCPError otherwise.
CallerOf = Callable[[ServerRequestContext[Any, Any], Scope], Caller]
#: The JSON-RPC error of a request its token may not make (a server-defined code).
FORBIDDEN = -32003
#: The gateway's hub of a request, if it has one (live deltas reach the MCP door through it).
HubOf = Callable[[ServerRequestContext[Any, Any]], "RunHub | None"]


class TaskParams(types.RequestParams):
    """``tasks/get`` and ``tasks/cancel``: the task (run) id."""

    task_id: str = Field(alias="taskId", min_length=1, max_length=1000)


class UpdateParams(TaskParams):
    """``tasks/update``: answers to the task's ``inputRequests``."""

    input_responses: dict[str, Any] = Field(alias="inputResponses")


def _now() -> str:
    return datetime.now(UTC).isoformat()


def wants_task(ctx: ServerRequestContext[Any, Any]) -> bool:
    """The request opted into Tasks: a 2026-07-28 request whose client
    capabilities name the extension."""
    capabilities = ctx.session.client_capabilities
    declared = capabilities.extensions if capabilities else None
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and mapping.TASKS in (declared or {})


class AgentTools:
    """The registered agents of ``settings`` as MCP tools, run by ``client``;
    ``hub_of`` names the gateway's hub (over HTTP) that an inline call follows
    its run through when the hub has live deltas."""

    def __init__(self, client: AgentClient, settings: ServerSettings, caller_of: CallerOf,
                 hub_of: HubOf | None = None) -> None:
        self.client, self.settings, self.caller_of, self.hub_of = client, settings, caller_of, hub_of

    def server(self) -> Server[Any]:
        """A low-level MCP server serving the agents and the Tasks methods."""
        server: Server[Any] = Server("agentloop", version=_version(), on_list_tools=self.list_tools,
                                     on_call_tool=self.call_tool,
                                     instructions="Each tool runs a registered agentloop agent as a durable run.")
        server.add_request_handler("tasks/get", TaskParams, self.get_task)
        server.add_request_handler("tasks/update", UpdateParams, self.update_task)
        server.add_request_handler("tasks/cancel", TaskParams, self.cancel_task)
        server.extensions[mapping.TASKS] = {}
        return server

    def _agents(self, caller: Caller) -> dict[str, AgentSpec]:
        agents = self.settings.agents
        return {n: s for n, s in agents.items() if caller.agents is None or n in caller.agents}

    async def list_tools(self, ctx: ServerRequestContext[Any, Any], params: Any) -> types.ListToolsResult:
        caller = self.caller_of(ctx, "read")
        # ttlMs 0 and cacheScope private (the defaults): the list depends on the token.
        return types.ListToolsResult(tools=[types.Tool.model_validate(mapping.tool_entry(name, spec))
                                            for name, spec in sorted(self._agents(caller).items())])

    async def call_tool(self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Any:
        caller = self.caller_of(ctx, "act")
        spec = self._agents(caller).get(params.name)
        if spec is None:
            if params.name in self.settings.agents:
                raise MCPError(FORBIDDEN, f"token {caller.name!r} may start only "
                               f"{', '.join(caller.agents or ())}; it asked for agent {params.name[:80]!r}")
            raise MCPError(INVALID_PARAMS, f"no agent {params.name[:80]!r} is registered with this server; "
                           f"registered: {', '.join(sorted(self._agents(caller))) or 'none'}")
        read = mapping.read_arguments(params.arguments)
        if isinstance(read, mapping.BadArguments):
            return types.CallToolResult.model_validate({"content": [{"type": "text", "text": read.detail}],
                                                        "isError": True})
        handle = await self.client.start(spec, read.text, tenant=caller.tenant)
        if wants_task(ctx):
            now = _now()
            return {"resultType": "task", **mapping.task_view(handle.run_id, "working", now, now,
                                                               message=f"run {handle.run_id} started")}
        return await self._inline(ctx, handle, params.name)

    async def _inline(self, ctx: ServerRequestContext[Any, Any], handle: AgentRunHandle, tool: str) -> Any:
        """Follow the run to its end, one progress notification per step,
        tool call and piece of streamed text (live, through the gateway's
        hub, when workers post live deltas to it); a run that waits for a
        person ends the call with a sentence saying how to answer it."""
        sent = 0
        async with contextlib.aclosing(self._events(ctx, handle)) as events:
            async for event in events:
                text = mapping.progress_text(event)
                if text is not None:
                    sent += 1
                    await ctx.session.report_progress(sent, None, text)
                if getattr(event, "type", "") in ("agent.tool.approval.requested", "thread.run.requires_action"):
                    return types.CallToolResult.model_validate({"content": [{"type": "text", "text": (
                        f"run {handle.run_id} waits for a decision on a tool call; a call answered inline cannot "
                        "carry it: call this tool from a client that supports io.modelcontextprotocol/tasks, or "
                        f"answer it through the HTTP API (POST /v1/runs/{handle.run_id}/approvals) or `agentloop "
                        "approve`")}], "isError": True})
                if is_terminal(event):
                    break
        return types.CallToolResult.model_validate((await self._ended(handle))[1])

    def _events(self, ctx: ServerRequestContext[Any, Any], handle: AgentRunHandle) -> AsyncGenerator[Any]:
        """The run's events: merged with live deltas by the gateway's hub when
        it has them (each character once: a history delta shown live comes as
        a ``Seen``, which says nothing to MCP), else read from the history."""
        hub = self.hub_of(ctx) if self.hub_of is not None else None
        if hub is not None and hub.live:
            return cast("AsyncGenerator[Any]", hub.subscribe(handle.run_id, 0, live=True))
        return cast("AsyncGenerator[Any]", handle.events(poll_interval=self.settings.poll_interval))

    async def _ended(self, handle: AgentRunHandle) -> tuple[str, dict[str, Any]]:
        """How the run ended, and its ``CallToolResult``."""
        try:
            result = await handle.result()
        except AgentRunFailed as err:
            done = err.result
            status = "cancelled" if err.reason == "cancelled" else "failed"
            return status, mapping.call_result(status, done.final_text if done else "", None, str(err))
        return result.status, mapping.call_result(result.status, result.final_text, result.output, result.error)

    async def _run(self, ctx: ServerRequestContext[Any, Any], task_id: str,
                   caller: Caller) -> tuple[AgentRunHandle, Any]:
        """The run of a task and its Temporal description, if the caller may see it.

        Raises:
            MCPError: -32602 for an unknown task, or one of a run the token may not
                see (another tenant's, another agent's; :mod:`agentloop.server.access.visibility`).
        """
        require_client_extension(ctx, mapping.TASKS)  # -32021 for a client that did not declare Tasks
        try:
            found = await find_run(self.client, self.settings, caller, task_id)
        except RPCError as err:
            raise MCPError(INTERNAL_ERROR, f"Temporal did not answer: {err.message}") from None
        if isinstance(found, NotARun):
            raise MCPError(INVALID_PARAMS, f"Failed to retrieve task: {found.reason}")
        if not isinstance(found, Found):  # another tenant's or agent's run: answered as an unknown one
            raise MCPError(INVALID_PARAMS, f"Failed to retrieve task: no run {task_id[:200]!r}")
        handle, description = self.client.get_handle(task_id), found.description
        return handle, description

    async def get_task(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        handle, description = await self._run(ctx, params.task_id, self.caller_of(ctx, "read"))
        return await self.view(handle, description)

    async def view(self, handle: AgentRunHandle, description: Any) -> dict[str, Any]:
        """The task of a run: its state mapped (see docs/agent-protocols.md)."""
        created = description.start_time.isoformat() if description.start_time else _now()
        status = description.status
        if status == WorkflowExecutionStatus.RUNNING:
            try:
                state = await handle.state()
            except (RPCError, UserError) as err:
                return mapping.task_view(handle.run_id, "working", created, _now(),
                                         message=f"no worker answered for the run yet ({err})")
            live = mapping.live_status(state.status)
            if live == "input_required":
                requests = mapping.input_requests(state.agent_name, await handle.pending())
                if requests:
                    return mapping.task_view(handle.run_id, live, created, _now(), requests=requests,
                                             message=f"run {handle.run_id} waits: {state.status}")
            return mapping.task_view(handle.run_id, "working", created, _now(),
                                     message=f"step {state.current_step or state.step}")
        updated = description.close_time.isoformat() if description.close_time else _now()
        if status == WorkflowExecutionStatus.CANCELED:
            return mapping.task_view(handle.run_id, "cancelled", created, updated, message="the run was cancelled")
        if status in (WorkflowExecutionStatus.COMPLETED, WorkflowExecutionStatus.FAILED):
            ended, result = await self._ended(handle)
            if ended == "cancelled":
                return mapping.task_view(handle.run_id, "cancelled", created, updated, message="the run was cancelled")
            return mapping.task_view(handle.run_id, "completed", created, updated, result=result)
        ended = status.name.lower() if status else "closed"
        return mapping.task_view(handle.run_id, "failed", created, updated, message=f"the run was {ended}",
                                 error={"code": INTERNAL_ERROR, "message": f"the run's workflow was {ended}"})

    async def update_task(self, ctx: ServerRequestContext[Any, Any], params: UpdateParams) -> dict[str, Any]:
        caller = self.caller_of(ctx, "act")
        handle, description = await self._run(ctx, params.task_id, caller)
        if description.status != WorkflowExecutionStatus.RUNNING:
            return {}
        answers = mapping.read_responses(params.input_responses, await handle.pending())
        refused = [a.detail for a in answers if isinstance(a, mapping.Refused)]
        if refused:
            raise MCPError(INVALID_PARAMS, "; ".join(refused))
        for answer in answers:
            try:
                if isinstance(answer, mapping.Decide):
                    await handle.decide(ApprovalDecision(call_id=answer.call_id, decision=answer.decision,
                                                         reason=answer.reason, result=answer.result, by=caller.name))
                elif isinstance(answer, mapping.Submit):
                    await handle.submit_tool_outputs([ToolOutput(call_id=c, output=o)
                                                      for c, o in answer.outputs.items()])
            except DecisionRejected as err:
                if "already decided" not in str(err):
                    raise MCPError(INVALID_PARAMS, f"the run refused the answer: {err}") from None
        return {}

    async def cancel_task(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        handle, description = await self._run(ctx, params.task_id, self.caller_of(ctx, "act"))
        if description.status == WorkflowExecutionStatus.RUNNING:
            await handle.cancel()
        return {}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agentloop")
    except PackageNotFoundError:
        return "0"
