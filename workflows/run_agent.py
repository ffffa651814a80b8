"""Agents inside your own workflows: each agent run a child workflow.

Users import these from :mod:`agentloop.in_workflow`, the one module of the
workflow-side API.

Import it in workflow code, on a Worker that has
:class:`~agentloop.workers.plugin.AgentLoopPlugin` (which registers the agent's
workflow and activities and passes ``agentloop`` through the sandbox)::

    from temporalio import workflow
    from agentloop import AgentSpec, MaxStepsExceeded
    from agentloop.in_workflow import run_agent

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
from temporalio.exceptions import ChildWorkflowError
from temporalio.workflow import ChildWorkflowHandle, ParentClosePolicy

from agentloop.shared.base.contracts import WORKFLOW_NAME
from agentloop.shared.base.errors import UserError
from agentloop.shared.base.messages import Message
from agentloop.shared.base.priority import run_priority, with_tenant
from agentloop.shared.definition.spec import AgentSpec
from agentloop.shared.runs.result import AgentRunFailed, AgentRunResult
from agentloop.shared.runs.run import run_failed_from, run_input, typed_result, with_output
from agentloop.shared.runs.search_attributes import start_search_attributes

__all__ = ["Consolidated", "agent_result", "chain", "consolidate", "run_agent", "start_agent"]

async def start_agent(
    spec: AgentSpec,
    input: str | Message | Sequence[Message],
    *,
    id: str | None = None,
    task_queue: str | None = None,
    parent_close_policy: ParentClosePolicy = ParentClosePolicy.REQUEST_CANCEL,
    tenant: str | None = None,
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
        tenant: Whose run it is (docs/many-tenants.md): its fairness key and
            ``AgentTenant``. None: the run inherits the calling workflow's
            Priority (fairness key included) but names no tenant.
        child_options: More options of ``workflow.start_child_workflow``
            (``execution_timeout``, ``memo``, ``static_details``...).

    Raises:
        UserError: The input is empty or over :data:`MAX_INPUT_BYTES`, or
            ``tenant`` is not a tenant name.
    """
    arg = with_tenant(run_input(spec, input), tenant)
    child_options.setdefault("static_summary", f"{spec.name} on {spec.model}")
    if spec.priority is not None or tenant is not None:  # else the calling workflow's Priority
        child_options.setdefault("priority", run_priority(spec.priority, tenant))
    return await workflow.start_child_workflow(
        WORKFLOW_NAME,
        arg,
        id=id or f"{workflow.info().workflow_id}-agent-{workflow.uuid4().hex[:12]}",
        task_queue=task_queue,
        result_type=AgentRunResult,
        parent_close_policy=parent_close_policy,
        search_attributes=start_search_attributes(spec, tenant),
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
    output_type: Any = None,
    **child_options: Any,
) -> AgentRunResult:
    """Run an agent as a child of the calling workflow and return its result
    (:func:`start_agent`, then :func:`agent_result`).

    With ``output_type`` (a pydantic model class, a simple type such as
    ``Literal["refund", "escalate"]``, or a JSON schema; it overrides
    ``spec.output``), the run's answer is checked against it and
    ``result.output`` is a value of that type (docs/typed-results.md).

    An :class:`~agentloop.AgentRunFailed` the workflow does not catch fails
    the workflow (the plugin registers it as a workflow failure type).

    Raises:
        AgentRunFailed: The run did not complete (see :func:`agent_result`);
            ``OutputInvalid`` when its answers never matched the type.
        UserError: The input is empty or too large, or ``output_type`` is
            not a type pydantic can describe.
    """
    spec = with_output(spec, output_type)
    handle = await start_agent(
        spec, input, id=id, task_queue=task_queue, parent_close_policy=parent_close_policy, **child_options
    )
    return typed_result(await agent_result(handle), spec.output)


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
    for index, (name, outcome) in enumerate(zip(names, outcomes, strict=False), 1):
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
    outcomes: list[AgentRunResult | AgentRunFailed] = []
    for outcome in await asyncio.gather(*runs, return_exceptions=True):
        if not isinstance(outcome, (AgentRunResult, AgentRunFailed)):
            raise outcome  # cancelled, or a bug: not an agent's failure
        outcomes.append(outcome)
    failures = [o for o in outcomes if isinstance(o, AgentRunFailed)]
    if len(failures) == len(outcomes):
        raise failures[0]  # every agent failed: the first one's failure
    merger = summariser.model_copy(update={"tools": [], "client_tools": [], "sub_agents": {}, "max_steps": 1,
                                           "verify_before_completing": False})
    prompt = merge_prompt(input, [s.name for s in specs], outcomes)
    merged = await run_agent(merger, prompt, **child_options)
    return Consolidated(results=outcomes, merged=merged)
