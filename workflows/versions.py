"""What a run does, by the code it started on.

Each behaviour added after runs were already in flight sits behind a patch
marker (``workflow.patched``): a run that started without it replays as it
began. :meth:`Features.of_this_run` asks for the markers once, in a fixed
order, at the start of every Temporal run.
"""

from __future__ import annotations

from dataclasses import dataclass

from temporalio import workflow

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
#: The tools queue's name is the run's task queue plus this.
TOOL_QUEUE_SUFFIX = "-tools"

#: Patch marker of runs that take an ``approve`` or ``submit_tool_outputs``
#: signal with text over its limit cut (and noted); older runs ignored such a
#: signal. Recorded only when such a signal arrives.
BOUNDED_SIGNALS_PATCH = "agentloop-bounded-signals-1"


@dataclass(frozen=True)
class Features:
    """What a run does, by the code it started on (its patch markers): a run
    in flight keeps what it began with.

    Attributes:
        hitl: Permissions, approvals, requires_action, stop, search attributes.
        by_reference: The transcript by reference; context management,
            budgets, verification, continue-as-new; long results left out.
        tool_queue: The queue tool activities go to (None: the run's own).
    """

    hitl: bool = False
    by_reference: bool = False
    tool_queue: str | None = None

    @staticmethod
    def of_this_run() -> Features:
        """The run's features (records the markers in a new run; reads them on replay)."""
        return Features(
            hitl=workflow.patched(HITL_PATCH),
            by_reference=workflow.patched(LONG_RUNS_PATCH),
            tool_queue=workflow.info().task_queue + TOOL_QUEUE_SUFFIX if workflow.patched(TOOL_QUEUE_PATCH) else None,
        )
