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

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ChildWorkflowError
from temporalio.workflow import ChildWorkflowHandle, ParentClosePolicy

from agentloop.errors import AgentRunFailed, UserError, run_failed_from
from agentloop.messages import Message
from agentloop.run import AgentRunInput, AgentRunResult
from agentloop.search_attributes import AGENT_MODEL, AGENT_NAME, AGENT_STATUS
from agentloop.spec import AgentSpec, depth_problem

__all__ = ["WORKFLOW_NAME", "Consolidated", "agent_result", "chain", "consolidate", "run_agent", "run_input",
           "start_agent"]

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


async def chain(
    specs: Sequence[AgentSpec], input: str | Message | Sequence[Message], **child_options: Any
) -> AgentRunResult:
    """Run agents one after another, each on the previous one's final text
    (the first on ``input``); the last one's result. Each is a child
    workflow, as with :func:`run_agent` (``child_options`` go to each).

    Raises:
        AgentRunFailed: One of them did not complete (the rest do not run).
        UserError: No agents, or the input is empty or too large.
    """
    if not specs:
        raise UserError("chain needs at least one AgentSpec")
    result: AgentRunResult | None = None
    for spec in specs:
        result = await run_agent(spec, input if result is None else result.final_text, **child_options)
    assert result is not None
    return result


@dataclass
class Consolidated:
    """What :func:`consolidate` returns.

    Attributes:
        results: Each agent's outcome, in the order of the specs: its result,
            or the :class:`~agentloop.AgentRunFailed` it ended with.
        merged: The summariser's run, whose final text merges the answers.
    """

    results: list[AgentRunResult | AgentRunFailed]
    merged: AgentRunResult

    @property
    def final_text(self) -> str:
        """The merged answer."""
        return self.merged.final_text


def merge_prompt(task: str, names: Sequence[str], outcomes: Sequence[AgentRunResult | AgentRunFailed]) -> str:
    """What the summariser of :func:`consolidate` is asked."""
    parts = [f"Several agents worked on this task:\n\n{task}\n\nTheir answers:"]
    for index, (name, outcome) in enumerate(zip(names, outcomes), 1):
        body = outcome.final_text if isinstance(outcome, AgentRunResult) else f"(did not finish: {outcome})"
        parts.append(f"--- answer {index} ({name}) ---\n{body}")
    parts.append("Merge them into one answer: keep what they agree on, resolve or flag where they differ, "
                 "and leave out what a failed one did not provide.")
    return "\n\n".join(parts)


async def consolidate(
    specs: Sequence[AgentSpec],
    input: str,
    *,
    summariser: AgentSpec,
    **child_options: Any,
) -> Consolidated:
    """Run agents in parallel on the same ``input``, then one LLM step of
    ``summariser`` that merges their answers (its tools and sub-agents are
    dropped and ``max_steps`` is 1). Each run is a child workflow, as with
    :func:`run_agent` (``child_options`` go to each).

    An agent that fails is reported to the summariser as such; the merge
    runs while at least one answered.

    Raises:
        AgentRunFailed: Every agent failed (the first one's failure), or the
            summariser did not complete.
        UserError: No agents, or the input is empty or too large.
    """
    if not specs:
        raise UserError("consolidate needs at least one AgentSpec")
    runs = [run_agent(spec, input, **child_options) for spec in specs]
    outcomes = list(await asyncio.gather(*runs, return_exceptions=True))
    for outcome in outcomes:
        if not isinstance(outcome, (AgentRunResult, AgentRunFailed)):
            raise outcome  # cancelled, or a bug: not an agent's failure
    if not any(isinstance(o, AgentRunResult) for o in outcomes):
        raise outcomes[0]
    merger = summariser.model_copy(update={"tools": [], "client_tools": [], "sub_agents": {}, "max_steps": 1,
                                           "verify_before_completing": False})
    prompt = merge_prompt(input, [s.name for s in specs], outcomes)
    merged = await run_agent(merger, prompt, **child_options)
    return Consolidated(results=outcomes, merged=merged)
