"""What a run does, by the code it started on.

Each behaviour added after runs were already in flight sits behind a patch
marker (``workflow.patched``): a run that started without it replays as it
began. :meth:`Features.of_this_run` asks for the markers once, in a fixed
order, at the start of every Temporal run.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agentloop.shared.base import contracts
    from agentloop.shared.definition.lanes import lane_of, lane_queue
    from agentloop.shared.definition.spec import AgentSpec

#: Patch marker of runs started with permissions, approvals, requires_action,
#: stop and search attributes. Runs recorded before it replay without them.
HITL_PATCH = "agentloop-hitl-1"

#: Patch marker of runs whose LLM steps take the transcript by reference (and
#: that manage their context, keep budgets and may continue as new). Older
#: runs replay passing it by value.
LONG_RUNS_PATCH = "agentloop-long-runs-1"

#: Patch marker of runs that send their tool activities (resolve_tools,
#: execute_tool) to the tools queue, ``<the run's task queue>-tools``, served by
#: workers that hold no provider keys. Older runs send them to the run's queue.
TOOL_QUEUE_PATCH = "agentloop-tool-queue-1"

#: Patch marker of runs that take an ``approve`` or ``submit_tool_outputs``
#: signal with text over its limit cut (and noted); older runs ignored such a
#: signal. Recorded only when such a signal arrives.
BOUNDED_SIGNALS_PATCH = "agentloop-bounded-signals-1"


#: Patch marker of runs that count their LLM judges' tokens (guardrails) in
#: their usage and budget. Recorded only when a judge reports usage.
GUARDRAIL_USAGE_PATCH = "agentloop-guardrail-usage-1"


#: Patch marker of runs that check an activity-tool call's arguments against
#: the tool's JSON schema before scheduling it (invalid ones become the
#: model's error result). Recorded only when a call's arguments are invalid.
ACTIVITY_TOOL_ARGUMENTS_PATCH = "agentloop-activity-tool-arguments-1"


#: Patch marker of runs that run the spec's tool hooks around activity-tool
#: calls (a ``run_tool_hooks`` activity before the call, and after it when it
#: failed). Recorded only in runs with tool hooks that call an activity-tool.
ACTIVITY_TOOL_HOOKS_PATCH = "agentloop-activity-tool-hooks-1"


#: Patch marker of runs started lean: the one marker of a new run, standing
#: for the three above (one marker and one ``TemporalChangeVersion`` upsert
#: instead of three of each); no search-attribute upsert at the start when
#: the client already set the same values; a cancel request that an activity
#: consumed by completing anyway still ends the run.
LEAN_PATCH = "agentloop-lean-1"

#: Patch marker of runs that look their tools up on their own worker first,
#: as a local activity (``resolve_tools_here``), and only when that worker
#: does not hold the tools (role ``models``) with ``resolve_tools`` on the
#: tools queue. It stands for everything ``LEAN_PATCH`` stands for: a new
#: run records this one marker.
RESOLVE_HERE_PATCH = "agentloop-lean-2"

#: Patch marker of runs that send their model calls to their provider lane,
#: the task queue ``<the run's queue>-llm-<lane>``
#: (:mod:`agentloop.shared.definition.lanes`). It stands for everything
#: ``RESOLVE_HERE_PATCH`` stands for: a new run records this one marker.
#: Older runs call their models on the run's own queue.
LANES_PATCH = "agentloop-lean-3"


#: Patch marker of threads whose status between turns is ``idle`` (the
#: ``AgentStatus`` search attribute and the ``state`` query); older runs say
#: ``running``. Recorded when a thread's turn ends (or a thread's run starts
#: between turns).
IDLE_PATCH = "agentloop-idle-1"


#: Patch marker of runs restored from a completed run's snapshot with no
#: new message, which end completed at once (older ones took one more LLM
#: step). Recorded only in such runs. The run input is the one earlier
#: versions take (the worker reads "completed" from the snapshot's report
#: in ``origin``), so clients and workers may be upgraded in either order.
RESTORED_COMPLETED_PATCH = "agentloop-restored-completed-1"

#: Patch marker of runs that note a signal of a name they do not know in
#: ``rejected_signals`` (older runs left no trace of it). Recorded only when
#: such a signal arrives.
UNKNOWN_SIGNALS_PATCH = "agentloop-unknown-signals-1"


#: Patch marker of runs with a typed answer (``AgentSpec.output``): the
#: answer is checked against the schema and fed back when it does not
#: match. Recorded only in such runs (no run before it had one).
TYPED_OUTPUT_PATCH = "agentloop-typed-output-1"


#: Patch marker of versioned threads (and runs whose spec says
#: ``upgrade="at_turn_boundary"``) that ask, when a turn is about to begin,
#: which version of their Worker Deployment is current, and continue as new
#: onto it (``agentloop.workflows.effects.upgrade``). Recorded only on versioned workers.
UPGRADE_PATCH = "agentloop-upgrade-1"


#: Patch marker of an eval's case runs (``AgentRunInput.eval``, docs/evals.md):
#: tool calls answered from the recording or by the eval's tool policies,
#: approvals by the recorded decisions. Recorded only in such runs.
EVAL_PATCH = "agentloop-eval-1"

#: Patch marker of an eval's case runs whose approvals never wait: answered
#: before the run's status is set, so it never shows ``awaiting_approval``
#: (``gates_that_wait``). Recorded only in eval case runs.
EVAL_APPROVAL_PATCH = "agentloop-eval-approval-1"

#: Patch marker of runs with a tenant, which reserve from the tenant's spend
#: quota before their LLM steps (``agentloop.workflows.effects.quotas``).
#: Recorded only in runs with a tenant.
QUOTA_PATCH = "agentloop-quota-1"

#: Patch marker of a cancelled run of a tenant that gives back what it
#: reserved from the tenant's quota before it ends (before it, a cancelled
#: run's reservation came back only when the window turned). Recorded only
#: in cancelled runs that hold a reservation.
QUOTA_CANCEL_PATCH = "agentloop-quota-cancel-1"


@dataclass(frozen=True)
class Features:
    """What a run does, by the code it started on (its patch markers): a run
    in flight keeps what it began with.

    Attributes:
        hitl: Permissions, approvals, requires_action, stop, search attributes.
        by_reference: The transcript by reference; context management,
            budgets, verification, continue-as-new; long results left out.
        tool_queue: The queue tool activities go to (None: the run's own).
        lean: One marker; no redundant start upsert; cancel checked after activities.
        resolve_here: Tools looked up on the run's own worker first.
        lanes: Model calls go to their provider lane's queue.
    """

    hitl: bool = False
    by_reference: bool = False
    tool_queue: str | None = None
    lean: bool = False
    resolve_here: bool = False
    lanes: bool = False

    def model_queue(self, spec: AgentSpec) -> str | None:
        """The queue of the run's model calls: its lane's
        (:func:`~agentloop.shared.definition.lanes.lane_of`), or None (the
        run's own) for runs started before lanes and specs with no lane."""
        lane = lane_of(spec.model, spec.lane) if self.lanes else None
        return lane_queue(workflow.info().task_queue, lane) if lane else None

    def cancel_requested(self) -> bool:
        """The run was asked to cancel (runs started lean look; older runs
        rely on the cancelled task alone)."""
        return self.lean and workflow.cancellation_reason() is not None

    def raise_if_cancelled(self) -> None:
        """End the run cancelled if a cancel request arrived but was consumed
        by an activity that completed anyway (the cancel found it finishing):
        without this the run would go on, and wait for people forever."""
        if self.cancel_requested():
            raise asyncio.CancelledError("the run was cancelled")

    @staticmethod
    def of_this_run() -> Features:
        """The run's features (records the marker in a new run; reads the
        markers on replay)."""
        tools_queue = workflow.info().task_queue + contracts.TOOL_QUEUE_SUFFIX
        if workflow.patched(LANES_PATCH):
            return Features(hitl=True, by_reference=True, tool_queue=tools_queue, lean=True, resolve_here=True,
                            lanes=True)
        if workflow.patched(RESOLVE_HERE_PATCH):
            return Features(hitl=True, by_reference=True, tool_queue=tools_queue, lean=True, resolve_here=True)
        if workflow.patched(LEAN_PATCH):
            return Features(hitl=True, by_reference=True, tool_queue=tools_queue, lean=True)
        return Features(
            hitl=workflow.patched(HITL_PATCH),
            by_reference=workflow.patched(LONG_RUNS_PATCH),
            tool_queue=tools_queue if workflow.patched(TOOL_QUEUE_PATCH) else None,
        )
