"""How the run calls its activities: typed calls, and one options object per
kind of activity.

Every LLM call (a step or a compaction summary) is a ``call_model`` activity
with :func:`model_call_options`; every tool call an ``execute_tool`` activity
with :func:`tool_call_options`; resolving the spec's tools a local
activity ``resolve_tools_here`` on a worker that serves the tools, else a
``resolve_tools`` activity with :func:`resolve_tools_options`. The calls go
by the activity names of :mod:`agentloop.shared.base.contracts` with their result
types (the workflow never imports the activities' code), and the options of
each kind are one ``ActivityConfig`` of Temporal's SDK.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, FailureError, RetryState
from temporalio.workflow import ActivityCancellationType, ActivityConfig

with workflow.unsafe.imports_passed_through():
    # Activity names and their input and result models: shared data only.
    from agentloop.shared.base import contracts
    from agentloop.shared.base.model_settings import request_tool_choice
    from agentloop.shared.definition.activity_io import (
        CallModelInput,
        CallModelResult,
        ExecuteToolInput,
        ExecuteToolResult,
        ModelRequest,
        OutputFormat,
        ResolveToolsInput,
        ResolveToolsResult,
        TranscriptRef,
        TranscriptSeed,
    )
    from agentloop.shared.definition.pricing import price_for
    from agentloop.shared.definition.spec import AgentSpec
    from agentloop.shared.runs.state import LoopState
    from agentloop.shared.runs.transcripts import ModelContext
    from agentloop.workflows.decisions.output import forced_tool_choice, output_format, output_mode

#: Extra time a tool activity gets beyond the tool's own limit, so the tool's
#: timeout (a clean error result) fires before Temporal's.
TOOL_TIMEOUT_GRACE = timedelta(seconds=30)

#: How long resolving the spec's tools may take.
RESOLVE_TOOLS_TIMEOUT = timedelta(seconds=30)


def model_call_options(spec: AgentSpec, task_queue: str | None = None) -> ActivityConfig:
    """An LLM call, a step or a compaction summary: the spec's timeout and
    attempts, exponential backoff from 1 s to 60 s (a provider's
    ``retry-after`` overrides the next delay). On cancel, the run waits until
    the call has stopped (``WAIT_CANCELLATION_COMPLETED``), so nothing
    outlives it; the activity heartbeats every second, so a cancel reaches it
    then and a lost worker is noticed within ``heartbeat_timeout_seconds``.
    ``task_queue``: the run's provider lane (None: the run's own queue)."""
    return ActivityConfig(
        task_queue=task_queue,
        start_to_close_timeout=timedelta(seconds=spec.llm_timeout_seconds),
        heartbeat_timeout=timedelta(seconds=spec.heartbeat_timeout_seconds),
        retry_policy=RetryPolicy(
            initial_interval=timedelta(seconds=1),
            backoff_coefficient=2.0,
            maximum_interval=timedelta(seconds=60),
            maximum_attempts=spec.llm_max_attempts,
        ),
        cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    )


#: The failure type of an activity a worker does not have (Temporal's SDK).
NOT_REGISTERED_ERROR_TYPE = "NotFoundError"


def tool_call_options(spec: AgentSpec, tool_name: str, task_queue: str | None, *,
                      beside: bool = False) -> ActivityConfig:
    """One tool call: the tool's own limit plus a grace, so its clean timeout
    result comes first. A tool's failures come back as results; only lost
    workers and infrastructure errors reach Temporal's retries. ``beside``:
    on the run's own queue by choice, where a worker without the tool
    activities fails the call at once (not retried) so it can go to the
    tools queue instead."""
    return ActivityConfig(
        start_to_close_timeout=timedelta(seconds=spec.timeout_for(tool_name)) + TOOL_TIMEOUT_GRACE,
        heartbeat_timeout=timedelta(seconds=spec.heartbeat_timeout_seconds),
        retry_policy=RetryPolicy(maximum_attempts=spec.tool_max_attempts,
                                 non_retryable_error_types=[NOT_REGISTERED_ERROR_TYPE] if beside else None),
        cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        task_queue=task_queue,
    )


def resolve_tools_options(task_queue: str | None) -> ActivityConfig:
    """Looking up the spec's tools on a tools worker."""
    return ActivityConfig(start_to_close_timeout=RESOLVE_TOOLS_TIMEOUT, task_queue=task_queue)


def with_summary(options: ActivityConfig, summary: str) -> ActivityConfig:
    """``options`` and the activity's summary, as one set of keywords (the
    options never carry a summary of their own)."""
    return {**options, "summary": summary}


#: Most bytes (as JSON) of system prompt, tools and messages a run's first
#: LLM step carries by value beside its reference (runs started lean): the
#: worker then asks the run nothing for it. History holds them once more;
#: a larger first step is by reference only.
SEED_MAX_BYTES = 64_000


def transcript_seed(state: LoopState, context: ModelContext) -> TranscriptSeed | None:
    """The first step's transcript by value, if this is the conversation's
    first LLM call and it is small (:data:`SEED_MAX_BYTES`)."""
    if state.step != 0 or state.steps_this_run != 0:
        return None
    seed = TranscriptSeed(system_prompt=context.system_prompt, tools=context.tools, messages=list(state.messages))
    return seed if len(seed.model_dump_json()) <= SEED_MAX_BYTES else None


def typed_request(spec: AgentSpec) -> tuple[OutputFormat | None, str]:
    """A typed run's native output format (None in ``tool`` mode, and for
    runs without ``output``) and the step's tool choice."""
    if spec.output is None:
        return None, spec.tool_choice
    if output_mode(spec.model) == "native":
        return output_format(spec.output), spec.tool_choice
    return None, forced_tool_choice(spec.model, spec.tool_choice, spec.thinking is not None)


def model_step_input(
    run_id: str, spec: AgentSpec, state: LoopState, context: ModelContext, *, by_reference: bool,
    seed: bool = False, tenant: str | None = None,
) -> CallModelInput:
    """The input of an LLM step's ``call_model``. By reference (every run
    since patch ``agentloop-long-runs-1``), it names the transcript by length
    and chained hash, and the worker fills in messages, system prompt and
    tools from its cache and the run's queries: history holds each message
    once. Older runs pass them by value."""
    transcript = None
    output, tool_choice = typed_request(spec)
    if by_reference:
        request = ModelRequest(model=spec.model_name, messages=[], temperature=spec.temperature,
                               max_tokens=spec.max_tokens, parallel_tool_calls=spec.parallel_tool_calls,
                               tool_choice=request_tool_choice(tool_choice), thinking=spec.thinking, output=output)
        transcript = TranscriptRef(message_count=len(state.messages), transcript_hash=state.transcript_hashes()[-1],
                                   context_hash=context.context_hash)
    else:
        request = ModelRequest(model=spec.model_name, system_prompt=spec.system_prompt, messages=list(state.messages),
                               tools=context.tools, temperature=spec.temperature, max_tokens=spec.max_tokens,
                               parallel_tool_calls=spec.parallel_tool_calls,
                               tool_choice=request_tool_choice(tool_choice), thinking=spec.thinking, output=output)
    return CallModelInput(run_id=run_id, step=state.step, model=spec.model, request=request,
                          stream_deltas=spec.stream_deltas, stream_batch_seconds=spec.stream_batch_seconds,
                          transcript=transcript, price=price_for(spec.model, spec.budget),
                          seed=transcript_seed(state, context) if by_reference and seed else None,
                          tenant=tenant)


async def call_model(input: CallModelInput, options: ActivityConfig, summary: str) -> CallModelResult:
    """One LLM call (activity ``call_model``)."""
    return await workflow.execute_activity(
        contracts.CALL_MODEL, input, result_type=CallModelResult, **with_summary(options, summary)
    )


async def execute_tool(input: ExecuteToolInput, options: ActivityConfig, summary: str) -> ExecuteToolResult:
    """One tool call (activity ``execute_tool``)."""
    return await workflow.execute_activity(
        contracts.EXECUTE_TOOL, input, result_type=ExecuteToolResult, **with_summary(options, summary)
    )


async def execute_tool_here(input: ExecuteToolInput, options: ActivityConfig, summary: str) -> ExecuteToolResult:
    """One call of a tool registered ``local=True`` (local activity
    ``execute_tool_here``), by the worker running the run, in the workflow
    task that asks: ``options``' timeout, attempts and cancellation. A
    worker that does not serve the tools refuses it (``ToolsNotHere``, not
    retried). Its failures arrive as their cause (an ``ApplicationError``,
    a ``TimeoutError``), not in an ``ActivityError``: :func:`failure_type`
    and :func:`failure_detail` read both."""
    return await workflow.execute_local_activity(
        contracts.EXECUTE_TOOL_HERE, input, result_type=ExecuteToolResult, summary=summary,
        start_to_close_timeout=options.get("start_to_close_timeout"), retry_policy=options.get("retry_policy"),
        cancellation_type=options.get("cancellation_type", ActivityCancellationType.TRY_CANCEL),
    )


async def resolve_tools(input: ResolveToolsInput, options: ActivityConfig) -> ResolveToolsResult:
    """The definitions of the spec's tools (activity ``resolve_tools``, on
    the tools queue; :func:`resolve_tools_here` first, on a run's own worker)."""
    return await workflow.execute_activity(
        contracts.RESOLVE_TOOLS, input, result_type=ResolveToolsResult, **with_summary(options, "resolve tools")
    )


async def resolve_tools_here(input: ResolveToolsInput) -> ResolveToolsResult | None:
    """Local activity ``resolve_tools_here``: the tools, looked up in the
    workflow task that asks, by the worker running it (role ``all``); its
    result is a marker in history, so a replay on any worker reads it from
    there. Tried once: None when it failed, the worker refusing included
    (``ToolsNotHere``, role ``models``; the failure is a marker too), and
    when the worker was built without the plugin's activities (not
    registered: no command was made). ``resolve_tools`` on the tools queue
    then answers, with its retries and its errors."""
    try:
        return await workflow.execute_local_activity(
            contracts.RESOLVE_TOOLS_HERE, input, result_type=ResolveToolsResult, summary="resolve tools",
            start_to_close_timeout=RESOLVE_TOOLS_TIMEOUT, retry_policy=RetryPolicy(maximum_attempts=1),
        )
    except ValueError as exc:
        if "not registered" not in str(exc):
            raise
        return None
    except (ActivityError, ApplicationError):
        return None


def _cause(err: FailureError) -> BaseException | None:
    # An activity's failure is an ActivityError around its cause; a local
    # activity's arrives as the cause itself.
    return err.cause if isinstance(err, ActivityError) else err


def reraise_cancel(err: FailureError) -> None:
    """An activity that ended because the run was cancelled ends the run too."""
    if isinstance(_cause(err), CancelledError):
        raise asyncio.CancelledError() from err


def failure_detail(err: FailureError) -> str:
    """What went wrong, in the activity's own words."""
    cause = _cause(err)
    return cause.message if isinstance(cause, ApplicationError) else str(cause or err)


def failure_type(err: FailureError) -> str | None:
    """The ApplicationError type the activity failed with, if any."""
    cause = _cause(err)
    return cause.type if isinstance(cause, ApplicationError) else None


def attempts_note(err: ActivityError, attempts: int) -> str:
    """`` after N attempts`` when Temporal gave up because they ran out."""
    if err.retry_state != RetryState.MAXIMUM_ATTEMPTS_REACHED:
        return ""
    return f" after {attempts} attempt{'' if attempts == 1 else 's'}"
