"""The run's activities: resolve tools, call the model, execute a tool.

Everything with a side effect happens here, in the worker; the workflow only
decides. Errors a model should hear about become error results; errors that
Temporal should retry are raised as mapped ``ApplicationError``s.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import os
import time
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from agentloop.activities import context_providers, evals, guardrails, hooks
from agentloop.activities.attempts import AttemptUsage, earlier_attempts, failure_reason
from agentloop.activities.heartbeat import keep_heartbeating
from agentloop.activities.providers.models import ModelResolver
from agentloop.activities.stream_publisher import DeltaPublisher
from agentloop.activities.tool_calls import ToolCalls
from agentloop.activities.tool_ledger import ToolLedger, idempotency_key
from agentloop.activities.tool_sources import a2a_tools
from agentloop.activities.tool_sources.mcp_server import McpUnavailable
from agentloop.activities.tool_sources.mcp_tools import MCP_UNAVAILABLE_ERROR_TYPE, McpServers
from agentloop.activities.transcripts import QueryTimeouts, TranscriptCache, query_run
from agentloop.shared.base import contracts
from agentloop.shared.base.contracts import TOOL_QUEUE_SUFFIX
from agentloop.shared.base.errors import TOOL_DEFINITION_ERROR_TYPE, UserError
from agentloop.shared.base.hooks import RunToolHooksInput, ToolHookDecision
from agentloop.shared.base.usage import Usage
from agentloop.shared.definition.activity_io import (
    TOOLS_NOT_HERE_ERROR_TYPE,
    CallModelInput,
    CallModelResult,
    ExecuteToolInput,
    ExecuteToolResult,
    ResolveToolsInput,
    ResolveToolsResult,
    StreamDelta,
    ToolDefinition,
)
from agentloop.shared.definition.compaction import compaction_request_messages
from agentloop.shared.definition.context_providers import LoadContextInput, LoadContextResult
from agentloop.shared.definition.context_window import ContextPolicy
from agentloop.shared.definition.guardrails import (
    GuardrailResult,
    ResolveGuardrailsInput,
    ResolveGuardrailsResult,
    RunGuardrailInput,
)
from agentloop.shared.evals.checks import CheckResult
from agentloop.shared.evals.report import EVAL_SCORE_ACTIVITY, EvalScoreInput
from agentloop.shared.runs.transcripts import ModelContext, TranscriptPage, TranscriptRange
from agentloop.tools.hooks import hooks_of
from agentloop.tools.registry import Tool, ToolRegistry

#: A list the worker's telemetry sets around a ``call_model`` attempt to see
#: the request sent, transcript filled in (agentloop.workers.telemetry).
REQUEST_SEEN: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("agentloop_request_seen",
                                                                               default=None)


def _streams(model: object) -> bool:
    """Whether ``model.complete`` takes ``on_delta`` (models written before
    streaming take only the request). Looked up once per function: reading a
    signature costs more than the rest of a step's bookkeeping."""
    complete = model.complete  # type: ignore[attr-defined]
    function = getattr(complete, "__func__", complete)
    try:
        return _takes_on_delta(function)
    except TypeError:  # an unhashable callable: read it every time
        return _takes_on_delta.__wrapped__(function)


def _tools_not_here(then: str) -> ApplicationError:
    """The refusal of a ``*_here`` local activity by a worker that does not
    serve the tools (role models): not retried, and benign (logged at DEBUG,
    no metric), since it is that role's expected answer."""
    return ApplicationError(f"this worker does not serve the tool activities (role models): {then}",
                            type=TOOLS_NOT_HERE_ERROR_TYPE, non_retryable=True,
                            category=ApplicationErrorCategory.BENIGN)


def _definition(tool: Tool) -> ToolDefinition:
    """The tool's definition, or a non-retryable ``ToolDefinitionError``
    that names the tool and says what broke (a retry would only raise again)."""
    try:
        return tool.definition()
    except Exception as exc:
        first_line = (str(exc).splitlines() or [""])[0]
        raise ApplicationError(
            f"the tool {tool.name!r} cannot give its definition on this worker: {type(exc).__name__}: {first_line}; "
            "fix the tool (its parameters, its schema) on the worker, then start the run again",
            type=TOOL_DEFINITION_ERROR_TYPE, non_retryable=True) from None


@functools.lru_cache(maxsize=256)
def _takes_on_delta(function: object) -> bool:
    try:
        return "on_delta" in inspect.signature(function).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


class AgentActivities(ToolCalls):
    """The activities of :class:`~agentloop.workflows.agent_run.AgentRunWorkflow`.

    Args:
        registry: Tools this worker can run.
        models: Resolves ``provider:model`` to a ChatModel.
        workspace: Default workspace root for runs whose spec names none.
        workspace_roots: Directories a spec's workspace must lie strictly
            inside (or be ``workspace`` itself); any directory the checks of
            :func:`~agentloop.activities.builtin_tools.workspace.workspace_problem` allow
            when None. Defaults to ``AGENTLOOP_WORKSPACE_ROOTS`` (paths
            separated by ``:``); ``agentloop worker``, ``dev`` and ``run``
            default it to their workspace.
        tool_ledger: Results of the tool calls this worker completed, so a
            retried call is not run again; a fresh in-memory ledger if None.
        mcp_servers: The MCP servers this worker reaches, by name; from the
            file ``AGENTLOOP_MCP_SERVERS`` names when None.
        tools_beside_runs: This process also serves the tool activities on
            the runs' own queue (role ``all``): ``resolve_tools`` says so, and
            the run sends its tool calls there; ``resolve_tools_here``
            answers (else it refuses, and the run asks the tools queue).

    Attributes:
        transcript_timeouts: How long a step waits for the run to hand over
            its transcript (:class:`~agentloop.activities.transcripts.QueryTimeouts`).
    """

    def __init__(
        self,
        registry: ToolRegistry,
        models: ModelResolver | None = None,
        workspace: str | Path | None = None,
        workspace_roots: list[str | Path] | None = None,
        tool_ledger: ToolLedger | None = None,
        mcp_servers: McpServers | None = None,
        tools_beside_runs: bool = False,
    ) -> None:
        self.registry = registry
        self.tools_beside_runs = tools_beside_runs
        self.models = models or ModelResolver()
        self.workspace = Path(workspace or os.environ.get("AGENTLOOP_WORKSPACE") or os.getcwd())
        if workspace_roots is None:
            env_roots = os.environ.get("AGENTLOOP_WORKSPACE_ROOTS", "")
            workspace_roots = [r for r in env_roots.split(":") if r]
        self.workspace_roots = [Path(r).resolve() for r in workspace_roots] or None
        self.transcripts = TranscriptCache()
        self.transcript_timeouts = QueryTimeouts()
        self.tool_ledger = tool_ledger if tool_ledger is not None else ToolLedger()
        self.mcp = mcp_servers if mcp_servers is not None else McpServers.from_env()

    @activity.defn(name=contracts.RESOLVE_TOOLS)
    async def resolve_tools(self, input: ResolveToolsInput) -> ResolveToolsResult:
        """Definitions of the spec's tools, and which ones this worker lacks;
        the tools of the spec's MCP servers, listed now (once per run: the
        result is in the run's history).

        Raises:
            ApplicationError: Non-retryable ``McpServerUnavailable`` when an
                MCP server is not configured here, cannot be reached, or
                answers the listing with an error; non-retryable
                ``ToolDefinitionError`` when a tool's ``definition()`` raises
                (a retry would only raise again): the run fails with it.
        """
        tools, missing, local = [], [], []
        for name in input.names:
            if name.startswith(a2a_tools.PREFIX) and self.registry.get(name) is None:
                tools.append(await self._a2a_definition(name))
                continue
            tool = self.registry.get(name)
            if tool is None:
                missing.append(name)
            else:
                tools.append(_definition(tool))
                if tool.local:
                    local.append(name)
        for server in input.mcp_servers:
            tools.extend(await self._list_mcp_tools(server))
        known_hooks = hooks_of(self.registry)
        agents_md = None
        if input.agents_md:  # the run's workspace instructions, at no extra activity
            workspace, _, problem = self._workspace(input.workspace)
            agents_md = context_providers.read_agents_md(workspace, problem is None)
        runs_queue = activity.info().task_queue.removesuffix(TOOL_QUEUE_SUFFIX) if self.tools_beside_runs else None
        return ResolveToolsResult(tools=tools, missing=missing, available=self.registry.names(),
                                  missing_hooks=[h for h in input.hooks if h not in known_hooks],
                                  available_hooks=sorted(known_hooks) if input.hooks else [], agents_md=agents_md,
                                  runs_queue=runs_queue, local_tools=local if runs_queue is not None else [])

    @activity.defn(name=contracts.RESOLVE_TOOLS_HERE)
    async def resolve_tools_here(self, input: ResolveToolsInput) -> ResolveToolsResult:
        """``resolve_tools`` as a local activity of the run's own worker: no
        task of its own, no trip through the tools queue. Answered by a
        worker that serves the tools beside the runs (role ``all``).

        Raises:
            ApplicationError: Non-retryable ``ToolsNotHere`` on any other
                worker (role ``models``): the run then asks the tools queue.
                And what ``resolve_tools`` raises.
        """
        if not self.tools_beside_runs:
            raise _tools_not_here("the run asks the tools queue")
        return await self.resolve_tools(input)

    async def _a2a_definition(self, name: str) -> Any:
        try:
            async with keep_heartbeating():
                return await a2a_tools.definition(name)
        except UserError as exc:
            raise ApplicationError(f"cannot use the A2A agent of {name[:200]!r}: {exc}",
                                   type=a2a_tools.UNAVAILABLE_ERROR_TYPE, non_retryable=True) from None

    async def _list_mcp_tools(self, server: str) -> list[Any]:
        from mcp.shared.exceptions import MCPError

        if server not in self.mcp:
            known = ", ".join(self.mcp.names()) or "none"
            problem = (f"the MCP server {server!r} is not configured on the worker (configured: {known}); add it "
                       "to the file AGENTLOOP_MCP_SERVERS names, or to AgentLoopPlugin(mcp_servers=...)")
        else:
            try:
                async with keep_heartbeating():
                    return await self.mcp.list_tools(server)
            except McpUnavailable as exc:
                problem = f"{exc}; start it (or fix its settings on the worker) and run again"
            except MCPError as exc:
                problem = f"the MCP server {server!r} refused to list its tools: error {exc.code}: {exc.message}"
            except UserError as exc:
                problem = f"the MCP server {server!r} cannot be started: {exc}"
        raise ApplicationError(f"cannot list the tools of MCP server {server!r}: {problem}",
                               type=MCP_UNAVAILABLE_ERROR_TYPE, non_retryable=True)

    @activity.defn(name=contracts.LOAD_CONTEXT)
    async def load_context(self, input: LoadContextInput) -> LoadContextResult:
        """The run's context from this worker: its context providers' layers,
        the workspace's AGENTS.md, the workspace listing."""
        workspace, _, problem = self._workspace(input.workspace)
        async with keep_heartbeating():
            return await context_providers.load_context(self.registry, workspace, problem is None, input)

    @activity.defn(name=contracts.RUN_TOOL_HOOKS)
    async def run_tool_hooks(self, input: RunToolHooksInput) -> ToolHookDecision:
        """The spec's tool hooks around an activity-tool's call (before it, or
        after it failed): their decision."""
        async with keep_heartbeating():
            return await hooks.run_tool_hooks(self, input)

    @activity.defn(name=contracts.RESOLVE_GUARDRAILS)
    async def resolve_guardrails(self, input: ResolveGuardrailsInput) -> ResolveGuardrailsResult:
        """Stages and kinds of the spec's guardrails, and which ones this worker lacks."""
        return guardrails.resolve_guardrails(self.registry, input)

    @activity.defn(name=contracts.RUN_GUARDRAIL)
    async def run_guardrail(self, input: RunGuardrailInput) -> GuardrailResult:
        """One guardrail's verdict (a function on this worker, or an LLM judge)."""
        async with keep_heartbeating():
            return await guardrails.run_guardrail(self.registry, self.models, input)

    @activity.defn(name=EVAL_SCORE_ACTIVITY)
    async def eval_score(self, input: EvalScoreInput) -> list[CheckResult]:
        """An eval's worker-side checks of one case: LLM judges, users' functions (docs/evals.md)."""
        async with keep_heartbeating():
            return await evals.score(self.models, input)

    @activity.defn(name=contracts.CALL_MODEL)
    async def call_model(self, input: CallModelInput) -> CallModelResult:
        """One LLM step. Provider errors arrive mapped for Temporal's retries.

        The attempt heartbeats from its first instruction: fetching the
        transcript may wait on the server (after a worker crash, the run's
        queries first go to the dead worker's sticky queue), and an attempt
        that is silent meanwhile would time out on its heartbeat.
        """
        started = time.monotonic()
        attempt = activity.info().attempt
        # Usage reported so far travels in heartbeat details: when this
        # attempt fails, the next one reads it and counts those tokens too.
        failed, failed_because = earlier_attempts()
        usage_now = Usage()

        def progress() -> AttemptUsage:
            return AttemptUsage(failed=failed, current=usage_now)

        publisher: DeltaPublisher | None = None

        def on_delta(delta: StreamDelta) -> None:
            nonlocal usage_now
            if delta.kind == "usage":
                usage_now = delta.usage or Usage()
            elif publisher is not None:
                publisher.add(delta)

        # Earlier attempts' usage must survive this attempt's loss: beat at once then.
        async with keep_heartbeating(current=progress, beat_now=failed != Usage()):
            try:
                model = self.models.resolve(input.model)
                request = await self._full_request(input)
                seen = REQUEST_SEEN.get()
                if seen is not None:  # the worker's telemetry shows the messages sent (its content switch)
                    seen.append(request)
                streams = _streams(model)
                if input.stream_deltas and streams:
                    publisher = DeltaPublisher(input.run_id, input.step, attempt, input.stream_batch_seconds,
                                               reset_reason=failed_because)
                    async with publisher:
                        response = await model.complete(request, on_delta=on_delta)
                elif streams:
                    response = await model.complete(request, on_delta=on_delta)
                else:
                    response = await model.complete(request)
            except BaseException as exc:
                # Sent with the failure: the next attempt counts the usage and says why.
                activity.heartbeat(progress().model_copy(update={"error": failure_reason(exc)}))
                raise
        if input.transcript is not None and input.compaction is None:
            # The run appends this message to its transcript: the next step
            # finds it here instead of asking the run for it.
            self.transcripts.record_response(input.run_id, response.message)
        return CallModelResult(
            response=response,
            latency_ms=(time.monotonic() - started) * 1000,
            attempt=attempt,
            failed_attempts_usage=failed,
            queue_wait_ms=queue_wait_ms(activity.info()),
        )

    async def _full_request(self, input: CallModelInput) -> Any:
        """The request with its transcript, system prompt and tools filled in
        from the worker's cache (steps name their transcript by reference).

        Raises:
            ApplicationError: Retryable ``TranscriptUnavailable`` when the run
                does not answer its transcript queries in time
                (:attr:`transcript_timeouts`).
        """
        ref = input.transcript
        if ref is None:
            return input.request  # a step of a run started before transcripts by reference
        info = activity.info()
        handle = activity.client().get_workflow_handle(info.workflow_id or input.run_id, run_id=info.workflow_run_id)
        timeouts = self.transcript_timeouts

        async def fetch_context() -> ModelContext:
            return await query_run(handle, "model_context", result_type=ModelContext, timeouts=timeouts)

        async def fetch_page(wanted: TranscriptRange) -> TranscriptPage:
            return await query_run(handle, "transcript", wanted, result_type=TranscriptPage, timeouts=timeouts)

        system_prompt, tools, messages = await self.transcripts.resolve(
            input.run_id, ref, fetch_context, fetch_page, seed=input.seed
        )
        if input.compaction is not None:
            # Summarise part of the transcript: the request is built here, so
            # the older messages do not enter history a second time.
            part = input.compaction
            policy = ContextPolicy.model_validate(part.policy)
            summarise = compaction_request_messages(messages[part.head : part.end], policy,
                                                    kept_head=messages[: part.head])
            return input.request.model_copy(update={"messages": summarise, "tools": []})
        return input.request.model_copy(update={"system_prompt": system_prompt, "tools": tools, "messages": messages})

    @activity.defn(name=contracts.EXECUTE_TOOL)
    async def execute_tool(self, input: ExecuteToolInput) -> ExecuteToolResult:
        """Run one tool call. Every failure becomes an error result the model sees.

        A call this worker already completed is not run again: when the
        result could not be reported (the server was unreachable) and
        Temporal retried the activity, the retry returns the result recorded
        in :attr:`tool_ledger`, with ``metrics["replayed_from_attempt"]``
        naming the attempt that ran the tool.
        """
        info = activity.info()
        key = idempotency_key(info.workflow_id or input.run_id, info.workflow_run_id or "", info.activity_id)
        recorded = self.tool_ledger.lookup(key)
        if recorded is not None:
            result, ran_in = recorded
            self.tool_ledger.stats.replayed += 1
            activity.logger.info(
                "tool %s (call %s) already ran in attempt %d on this worker; returning its recorded result "
                "instead of running it again", input.tool_name, input.call_id, ran_in,
            )
            activity.heartbeat({"replayed_from_attempt": ran_in})
            self._record_result(input, result)
            return result.model_copy(update={"metrics": {**result.metrics, "replayed_from_attempt": ran_in}})
        if input.hooks:
            result = await hooks.execute_with_hooks(self, input, key)
        else:
            result = await self._execute_tool(input, key)
        self.tool_ledger.record(key, result, attempt=info.attempt)
        self._record_result(input, result)
        return result

    @activity.defn(name=contracts.EXECUTE_TOOL_HERE)
    async def execute_tool_here(self, input: ExecuteToolInput) -> ExecuteToolResult:
        """``execute_tool`` as a local activity of the run's own worker, for
        the tools registered ``local=True``: no activity task, no workflow
        task of its own. Answered by a worker that serves the tools beside
        the runs (role ``all``).

        Raises:
            ApplicationError: Non-retryable ``ToolsNotHere`` on any other
                worker (role ``models``): the run then sends the call, and
                the rest of its calls, to the tools queue.
        """
        if not self.tools_beside_runs:
            raise _tools_not_here("the run sends its tool calls to the tools queue")
        return await self.execute_tool(input)


def queue_wait_ms(info: activity.Info) -> float | None:
    """How long this attempt waited in its task queue: from its scheduling
    to its start, both by the server's clock (None when it does not say)."""
    scheduled, started = info.current_attempt_scheduled_time, info.started_time
    if scheduled is None or started is None:
        return None
    return max(0.0, (started - scheduled).total_seconds() * 1000)
