"""Calling one tool, once ``execute_tool`` (or its local form) has the call: the
run's workspace checked, the tool run with a heartbeat and within its timeout, its
output cut to the limit, an MCP tool called on its server, and the result kept in
the tool ledger. :class:`~agentloop.activities.agent_activities.AgentActivities`
has these methods; the activity definitions stay there.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from temporalio import activity
from temporalio.exceptions import ApplicationError

from agentloop.activities.builtin_tools.workspace import workspace_problem
from agentloop.activities.heartbeat import keep_heartbeating
from agentloop.activities.tool_ledger import ToolLedger
from agentloop.activities.tool_sources import a2a_tools
from agentloop.activities.tool_sources.mcp_server import McpUnavailable
from agentloop.activities.tool_sources.mcp_tools import MCP_UNAVAILABLE_ERROR_TYPE, McpServers
from agentloop.activities.transcripts import TranscriptCache
from agentloop.shared.base.errors import ToolError, UserError
from agentloop.shared.base.messages import ImagePart, ToolResultPart, cut_hint
from agentloop.shared.base.text import cut_marked
from agentloop.shared.definition.activity_io import ExecuteToolInput, ExecuteToolResult
from agentloop.shared.definition.spec import system_workspace_problem
from agentloop.tools.registry import InvalidToolArguments, ToolRegistry
from agentloop.tools.tool_context import ToolContext


def format_tool_output(value: Any) -> str:
    """The text the model sees for a tool's return value."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(value, default=str, ensure_ascii=False)


class ToolCalls:
    """The tool-calling half of :class:`~agentloop.activities.agent_activities.AgentActivities`
    (which sets the attributes below)."""

    registry: ToolRegistry
    mcp: McpServers
    tool_ledger: ToolLedger
    transcripts: TranscriptCache
    workspace: Path
    workspace_roots: list[Path] | None

    def _workspace(self, named: str | None) -> tuple[Path, Path, str | None]:
        """The run's workspace here, checked once: as named (``AgentSpec.workspace``, or this
        worker's default), resolved, and why runs may not use it (None: they may)."""
        workspace = Path(named) if named else self.workspace
        if not workspace.is_dir():
            return workspace, workspace, (
                f"The workspace {workspace} does not exist on the worker; set AgentSpec.workspace "
                "to an existing directory.")
        resolved = workspace.resolve()
        problem = system_workspace_problem(str(resolved)) or workspace_problem(
            resolved, default=self.workspace, roots=self.workspace_roots)
        return workspace, resolved, f"The {problem} (AgentSpec.workspace)." if problem else None

    def _record_result(self, input: ExecuteToolInput, result: ExecuteToolResult) -> None:
        # The run's next step starts with this result (in its call's place):
        # the transcript cache predicts it instead of asking the run.
        self.transcripts.record_result(
            input.run_id,
            ToolResultPart(id=input.call_id, name=input.tool_name, content=result.content, is_error=result.is_error,
                           images=result.images),
        )

    async def _execute_tool(self, input: ExecuteToolInput, key: str) -> ExecuteToolResult:
        started = time.monotonic()
        metrics: dict[str, Any] = {}

        def result(content: str, *, is_error: bool) -> ExecuteToolResult:
            text, truncated = cut_marked(content, input.output_limit, hint=cut_hint(input.tool_name), tail=True)
            return ExecuteToolResult(
                call_id=input.call_id,
                content=text,
                is_error=is_error,
                truncated=truncated,
                latency_ms=(time.monotonic() - started) * 1000,
                metrics=metrics,
            )

        tool = self.registry.get(input.tool_name)
        if tool is None and self.mcp.owns(input.tool_name):
            return await self._call_mcp_tool(input, result, key)
        if tool is None and input.tool_name.startswith("a2a_") and a2a_tools.url_of(input.tool_name):
            return await self._call_a2a_agent(input, result)
        if tool is None:
            return result(
                f"Unknown tool '{input.tool_name}'. Available tools: "
                f"{', '.join(self.registry.names()) or 'none'}.",
                is_error=True,
            )
        _, resolved, problem = self._workspace(input.workspace)
        if problem:
            return result(problem, is_error=True)
        ctx = ToolContext(
            workspace=resolved,
            run_id=input.run_id,
            step=input.step,
            call_id=input.call_id,
            output_limit=input.output_limit,
            metrics=metrics,
            heartbeat=activity.heartbeat,
            idempotency_key=key,
            agent_name=input.agent_name,
            model=input.model,
        )
        try:
            async with keep_heartbeating(), asyncio.timeout(input.timeout_seconds):
                value = await tool.run(input.arguments, ctx)
        except InvalidToolArguments as exc:
            return result(str(exc), is_error=True)
        except ToolError as exc:
            return result(f"Error: {exc}", is_error=True)
        except TimeoutError:
            return result(
                f"Tool '{input.tool_name}' timed out after {input.timeout_seconds:g}s and was "
                "stopped; try a smaller task or raise its timeout (AgentSpec.tool_timeouts).",
                is_error=True,
            )
        except Exception as exc:  # a tool's bug must not crash the run: the model hears of it
            activity.logger.warning("tool %s raised %r", input.tool_name, exc)
            return result(f"Tool '{input.tool_name}' raised {type(exc).__name__}: {exc}", is_error=True)
        if isinstance(value, ImagePart):
            return result(f"(the image {value.media_type or ''} is attached)", is_error=False).model_copy(
                update={"images": [value]})
        if isinstance(value, list) and any(isinstance(v, ImagePart) for v in value):
            # Text and images (an OpenAPI operation's image response): the text, the images attached.
            text = "\n".join(format_tool_output(v) for v in value if not isinstance(v, ImagePart))
            return result(text, is_error=False).model_copy(
                update={"images": [v for v in value if isinstance(v, ImagePart)]})
        return result(format_tool_output(value), is_error=False)

    async def _call_a2a_agent(self, input: ExecuteToolInput, result: Any) -> ExecuteToolResult:
        """A call of a remote A2A agent (:mod:`.tool_sources.a2a_tools`), idempotent by run and call id;
        a remote agent that cannot be reached fails the attempt, and Temporal retries it."""
        try:
            async with asyncio.timeout(input.timeout_seconds):
                text, is_error = await a2a_tools.call(input.tool_name, input.arguments,
                                                      f"{input.run_id}:{input.call_id}")
        except UserError as exc:
            return result(f"Error: {exc}", is_error=True)
        except TimeoutError:
            return result(f"Tool '{input.tool_name}' timed out after {input.timeout_seconds:g}s; the remote task "
                          "may go on: raise AgentSpec.tool_timeouts for it", is_error=True)
        return result(text, is_error=is_error)

    async def _call_mcp_tool(self, input: ExecuteToolInput, result: Any, key: str) -> ExecuteToolResult:
        """A call of an MCP server's tool, within the tool's own timeout: its
        errors are results; a server that cannot be reached, or that exits or
        breaks the connection during the call, fails the attempt, and
        Temporal retries it. The call's idempotency key goes in the request's
        ``_meta``."""
        try:
            async with keep_heartbeating(), asyncio.timeout(input.timeout_seconds):
                text, is_error = await self.mcp.call(input.tool_name, input.arguments, idempotency_key=key)
        except McpUnavailable as exc:
            raise ApplicationError(str(exc), type=MCP_UNAVAILABLE_ERROR_TYPE) from None
        except UserError as exc:
            return result(f"Error: {exc}", is_error=True)
        except TimeoutError:
            return result(f"Tool '{input.tool_name}' timed out after {input.timeout_seconds:g}s, its own limit, and "
                          "was stopped; try a smaller task or raise the limit: AgentSpec.tool_timeouts"
                          f"['{input.tool_name}'] (default AgentSpec.tool_timeout_seconds). The MCP server's "
                          "timeout_seconds bounds starting and listing only.", is_error=True)
        return result(text, is_error=is_error)
