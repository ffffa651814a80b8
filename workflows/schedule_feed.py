"""AgentScheduleFeed: one firing of a schedule that feeds a thread.

A Temporal Schedule can only start workflows, so a schedule that feeds a
thread starts this one at each firing: it signals the thread ``send`` with
the firing's input (the thread's double-texting strategy applies, as to any
message), and when the thread does not exist yet it starts it, as a child
that outlives this workflow (``ParentClosePolicy.ABANDON``) under the
thread's id, with the firing's input as turn 1. It ends as soon as the
message is delivered: the thread answers it in its own run.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError, FailureError, WorkflowAlreadyStartedError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from agentloop.shared.base import contracts
    from agentloop.shared.runs.result import AgentRunResult
    from agentloop.shared.runs.schedules import (
        ScheduleFeedInput,
        ScheduleFeedResult,
        ended_thread_message,
        thread_start,
    )
    from agentloop.shared.runs.threads import SendMessage
    from agentloop.workflows.workflow_sandbox import workflow_sandbox_from_env


@workflow.defn(name=contracts.SCHEDULE_FEED_WORKFLOW_NAME, sandboxed=workflow_sandbox_from_env())
class ScheduleFeedWorkflow:
    """Send a schedule's firing to its thread; start the thread the first time."""

    @workflow.run
    async def run(self, feed: ScheduleFeedInput) -> ScheduleFeedResult:
        message = SendMessage(text=feed.text, strategy=feed.strategy, by=f"schedule {feed.schedule}")
        try:
            await workflow.get_external_workflow_handle(feed.thread_id).signal(contracts.SEND, message)
            return ScheduleFeedResult(thread_id=feed.thread_id, started=False)
        except FailureError:
            pass  # no such running workflow: start the thread
        built, attributes = thread_start(feed)
        try:
            await workflow.start_child_workflow(
                contracts.WORKFLOW_NAME, built, id=feed.thread_id, result_type=AgentRunResult,
                parent_close_policy=ParentClosePolicy.ABANDON, search_attributes=attributes,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                static_summary=f"{feed.spec.name} on {feed.spec.model}, fed by schedule {feed.schedule}",
            )
        except WorkflowAlreadyStartedError:
            raise ApplicationError(ended_thread_message(feed), type="ThreadEnded", non_retryable=True) from None
        return ScheduleFeedResult(thread_id=feed.thread_id, started=True)
