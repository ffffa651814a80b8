"""Agents inside your own workflows: each agent run a child workflow.

Import it in workflow code, on a Worker that has
:class:`~agentloop.plugin.AgentLoopPlugin` (which registers the agent's
workflow and activities and passes ``agentloop`` through the sandbox)::

    from temporalio import workflow
    from agentloop import AgentSpec, MaxStepsExceeded
    from agentloop.workflow import run_agent

    @workflow.defn
    class TriageWorkflow:
        @workflow.run
        async def run(self, ticket: str) -> str:
            result = await run_agent(AgentSpec(model="openai:gpt-4.1-mini"), ticket)
            return result.final_text

The agent run is an ``AgentRunWorkflow`` like one that
:meth:`AgentClient.start <agentloop.AgentClient.start>` starts: its own
history, events, queries, approvals and ``agentloop`` ops commands, with its
own workflow id. By default:

* it runs on the calling workflow's task queue;
* its id is ``<parent workflow id>-agent-<12 hex digits>``, the digits from
  ``workflow.uuid4()`` (replay-safe);
* ``ParentClosePolicy.REQUEST_CANCEL``: when the calling workflow ends
  (completes, fails, times out or is terminated) while the agent still
  runs, the agent run is cancelled, so its tools stop; a run that must
  outlive its caller takes ``parent_close_policy=ParentClosePolicy.ABANDON``.
  Cancelling the calling workflow cancels the agent run it waits for.

Everything here is deterministic: no I/O, clocks or randomness beyond
``workflow.uuid4()``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ChildWorkflowError
from temporalio.workflow import ChildWorkflowHandle, ParentClosePolicy

from agentloop.errors import UserError, run_failed_from
from agentloop.messages import Message
from agentloop.run import AgentRunInput, AgentRunResult
from agentloop.search_attributes import AGENT_MODEL, AGENT_NAME, AGENT_STATUS
from agentloop.spec import AgentSpec, depth_problem

__all__ = ["WORKFLOW_NAME", "agent_result", "run_agent", "run_input", "start_agent"]

#: The workflow type name agent runs are started with.
WORKFLOW_NAME = "AgentRunWorkflow"

#: Largest run input a run is started with (Temporal's payload limit is
#: 2 MB, and the run's first events carry the input again).
MAX_INPUT_BYTES = 1_500_000


def as_messages(input: str | Message | Sequence[Message]) -> list[Message]:
    """A run's input messages: a string is one user message.

    Raises:
        UserError: No message.
    """
    if isinstance(input, str):
        return [Message.user(input)]
    if isinstance(input, Message):
        return [input]
    messages = list(input)
    if not messages:
        raise UserError("a run needs at least one input message")
    return messages


def run_input(spec: AgentSpec, input: str | Message | Sequence[Message]) -> AgentRunInput:
    """The input a run is started with.

    Raises:
        UserError: No message, or more than :data:`MAX_INPUT_BYTES` in all.
    """
    problem = depth_problem(spec)
    if problem is not None:
        raise UserError(problem)
    built = AgentRunInput(spec=spec, messages=as_messages(input))
    size = len(built.model_dump_json())
    if size > MAX_INPUT_BYTES:
        raise UserError(
            f"the run's input is {size / 1e6:.1f} MB; Temporal refuses payloads over 2 MB and "
            f"agentloop starts runs with at most {MAX_INPUT_BYTES / 1e6:.1f} MB. Put large documents "
            "in the workspace and let the agent read them with its tools, or send a shorter thread"
        )
    return built


def start_search_attributes(spec: AgentSpec) -> TypedSearchAttributes:
    """What a run is indexed with from its start, so ``temporal workflow
    list`` finds it at once (the run keeps them current from then on)."""
    return TypedSearchAttributes([
        SearchAttributePair(AGENT_STATUS, "running"),
        SearchAttributePair(AGENT_NAME, spec.name),
        SearchAttributePair(AGENT_MODEL, spec.model),
    ])


async def start_agent(
    spec: AgentSpec,
    input: str | Message | Sequence[Message],
    *,
    id: str | None = None,
    task_queue: str | None = None,
    parent_close_policy: ParentClosePolicy = ParentClosePolicy.REQUEST_CANCEL,
    **child_options: Any,
) -> ChildWorkflowHandle[Any, AgentRunResult]:
    """Start an agent run as a child of the calling workflow; return its handle.

    ``await agent_result(handle)`` waits for it (raising
    :class:`~agentloop.AgentRunFailed`); with the handle, the workflow can
    also signal the run (``await handle.signal("stop", StopRequest(...))``)
    or cancel it (``handle.cancel()``). Call it from workflow code only.

    Args:
        spec: The agent.
        input: A user instruction, a message, or messages.
        id: The run's workflow id; ``<parent id>-agent-<hex>`` when None.
        task_queue: Where the run's workflow runs; the calling workflow's
            queue when None. Its workers need the plugin's role ``all`` or
            ``models`` (and a tools worker on ``<task_queue>-tools``).
        parent_close_policy: What happens to the run when the calling
            workflow ends first: ``REQUEST_CANCEL`` (default) cancels it.
        child_options: More options of ``workflow.start_child_workflow``
            (``execution_timeout``, ``memo``, ``static_details``...).

    Raises:
        UserError: The input is empty or over :data:`MAX_INPUT_BYTES`.
    """
    arg = run_input(spec, input)
    child_options.setdefault("static_summary", f"{spec.name} on {spec.model}")
    return await workflow.start_child_workflow(
        WORKFLOW_NAME,
        arg,
        id=id or f"{workflow.info().workflow_id}-agent-{workflow.uuid4().hex[:12]}",
        task_queue=task_queue,
        result_type=AgentRunResult,
        parent_close_policy=parent_close_policy,
        search_attributes=start_search_attributes(spec),
        **child_options,
    )


async def agent_result(handle: ChildWorkflowHandle[Any, AgentRunResult]) -> AgentRunResult:
    """Wait for an agent run :func:`start_agent` started.

    Raises:
        AgentRunFailed: The run failed, was cancelled, terminated or timed
            out: the subclass of its reason (``MaxStepsExceeded``,
            ``AgentRunCancelled``...), with ``result`` from the failure's
            details when the run failed. A long run's ``result.messages``
            may hold only its last messages (``messages_omitted`` says how
            many are left out; a client reads them with
            ``AgentClient.get_handle(run_id).messages()``).
    """
    try:
        return await handle
    except ChildWorkflowError as err:
        raise run_failed_from(handle.id, err.cause or err) from err


async def run_agent(
    spec: AgentSpec,
    input: str | Message | Sequence[Message],
    *,
    id: str | None = None,
    task_queue: str | None = None,
    parent_close_policy: ParentClosePolicy = ParentClosePolicy.REQUEST_CANCEL,
    **child_options: Any,
) -> AgentRunResult:
    """Run an agent as a child of the calling workflow and return its result
    (:func:`start_agent`, then :func:`agent_result`).

    An :class:`~agentloop.AgentRunFailed` the workflow does not catch fails
    the workflow (the plugin registers it as a workflow failure type).

    Raises:
        AgentRunFailed: The run did not complete (see :func:`agent_result`).
        UserError: The input is empty or too large.
    """
    handle = await start_agent(
        spec, input, id=id, task_queue=task_queue, parent_close_policy=parent_close_policy, **child_options
    )
    return await agent_result(handle)
