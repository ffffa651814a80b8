"""Replay committed histories against today's workflow code.

A change that would break runs in flight (different commands in a different
order) fails here. Record new histories with ``python -m tests.replay.record``
only for a deliberate, patched change, and keep the old ones.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.client import WorkflowHistory
from temporalio.common import VersioningBehavior
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from agentloop.shared.base.versioning import TARGET_VERSION_ACTIVITY
from agentloop.shared.runs.result import AgentRunResult
from agentloop.shared.runs.run import AgentRunInput
from agentloop.workers.plugin import AgentLoopPlugin
from agentloop.workflows.patches import LANES_PATCH, UPGRADE_PATCH
from tests.helpers.paths import HISTORIES

HISTORY_FILES = sorted(HISTORIES.glob("*.json"))


def load(path: Path) -> WorkflowHistory:
    return WorkflowHistory.from_json(f"replay-{path.stem}", path.read_text())


def test_histories_are_committed() -> None:
    assert {p.stem for p in HISTORY_FILES} >= {
        "tools_parallel", "failed_length", "max_steps", "hitl_approvals", "hitl_client_tool_stop",
        "long_compaction", "continue_as_new", "continue_as_new-2",
        # Recorded after the run became an interpreter over one LoopState.
        "state_tools_parallel", "state_approvals", "state_client_tool_stop", "state_compaction",
        "state_continue_as_new", "state_continue_as_new-2", "state_verify", "state_approval_timeout",
        # Sub-agents: the parent and its two children.
        "sub_agents", "sub_agents-sub-1", "sub_agents-sub-2",
        # MCP tools: the listing in history, replayed with no MCP server running.
        "mcp_tools",
        # Guardrails: a finding without a tripwire, a passing LLM judge, an output tripwire.
        "guardrails",
        # A run restored from a snapshot: its approval pending again, a tool it lost a warning.
        "restored_approval",
        # A thread: turns by update and signal, enqueue, steering, interrupt, rollback, a stop while idle.
        "thread_turns",
        # Tool calls on the run's own queue, as resolve_tools' answer from a worker of role all said.
        "tools_beside",
        # The same, when a models worker got the calls: two parallel calls moved to the tools queue.
        "tools_moved",
        # Tools looked up by the run's own worker of role all (a local activity; patch agentloop-lean-2);
        # refused by a models worker, then the tools queue's answer; looked up here, then the
        # deployment split while the run waited for approval (the call moved to the tools queue).
        "resolve_here", "resolve_split", "resolve_here_split",
        # A tool registered local=True: its calls local activities of the run's worker of role all; and
        # the same calls refused by a models worker, moved to the tools queue.
        "local_tools", "local_tools_moved",
        # A tool whose definition() raises on the worker: the lookup fails once, the run fails with a sentence.
        "tool_definition_error",
        # A completed run restored with no new message: completed at once, no model call
        # (patch agentloop-restored-completed-1).
        "restored_completed",
        # A typed run (patch agentloop-typed-output-1): an answer fed back as a user message, a
        # final_result call fed back as its error result, then a right one.
        "typed_output",
        # A schedule that feeds a thread: the firing that starts the thread, the one that signals it.
        "schedule_feed_start", "schedule_feed_send",
        # Versioned workers (patch agentloop-upgrade-1): a thread that asks at a turn boundary which
        # version is current and stays, then continues as new onto the new current version (both
        # Temporal runs); a run pinned to its version across the switch.
        "thread_upgrade", "thread_upgrade-2", "pinned_versioned",
        # An eval (AgentEvalWorkflow) and its case run (patch agentloop-eval-1): tools answered from the
        # recording, an approval by the recorded decision, a call the recording lacks refused.
        "eval_run", "eval_run-case",
        # An eval of a thread's second turn: its case run starts with the thread's first turn, and its
        # result carries the eval tally.
        "eval_thread", "eval_thread-case",
        # The eval_run scenario since patch agentloop-eval-approval-1: the case run's approval is answered
        # before the run's status is set.
        "eval_approval", "eval_approval-case",
        # Model calls on the scripted model's provider lane (patch agentloop-lean-3).
        "lanes",
        # A run of a tenant with a quota (patch agentloop-quota-1) that waited for the window to turn,
        # and its tenant's ledger, continued as new once.
        "quota_run", "quota_ledger", "quota_ledger-2",
        # A cancelled run of a tenant that gives its reservation back as it ends (patch agentloop-quota-cancel-1).
        "quota_cancel",
        # A tenant's run at priority 2 (Priority with the tenant as fairness key), a tool call and two
        # sub-agents, one inheriting its Priority, one at a priority of its own.
        "tenant_priority", "tenant_priority-sub-1", "tenant_priority-sub-2",
    }


def markers(events: list, name: str) -> list[dict]:
    """The details of the markers ``name`` (core_patch, core_local_activity), each payload as JSON."""
    found = []
    for event in events:
        attributes = event.marker_recorded_event_attributes
        if event.HasField("marker_recorded_event_attributes") and attributes.marker_name == name:
            found.append({key: json.loads(value.payloads[0].data) for key, value in attributes.details.items()})
    return found


def patch_ids(events: list) -> list[str]:
    """The patches a run's markers name."""
    return [m["patch-data"]["id"] for m in markers(events, "core_patch")]


def asked_versions(events: list) -> list[str | None]:
    """The current build ids the ``current_deployment_version`` local activity answered."""
    return [m["result"]["current_build_id"] for m in markers(events, "core_local_activity")
            if m["data"]["activity_type"] == TARGET_VERSION_ACTIVITY]


def task_versions(events: list) -> set[tuple[str, str, int]]:
    """(deployment, build id, versioning behavior) of every completed workflow task."""
    return {(e.workflow_task_completed_event_attributes.deployment_version.deployment_name,
             e.workflow_task_completed_event_attributes.deployment_version.build_id,
             e.workflow_task_completed_event_attributes.versioning_behavior)
            for e in events if e.HasField("workflow_task_completed_event_attributes")}


def test_the_lanes_history_sends_its_model_calls_to_the_lane() -> None:
    events = load(HISTORIES / "lanes.json").events
    assert patch_ids(events) == [LANES_PATCH]
    queues = {(e.activity_task_scheduled_event_attributes.activity_type.name,
               e.activity_task_scheduled_event_attributes.task_queue.name)
              for e in events if e.HasField("activity_task_scheduled_event_attributes")}
    model_queues = {queue for name, queue in queues if name == "call_model"}
    assert len(model_queues) == 1 and model_queues.pop().endswith("-llm-scripted")
    assert all(not queue.endswith("-llm-scripted") for name, queue in queues if name != "call_model")


def test_the_versioned_histories_hold_the_upgrade() -> None:
    first, second, pinned = (load(HISTORIES / f"{n}.json").events
                             for n in ("thread_upgrade", "thread_upgrade-2", "pinned_versioned"))
    on = lambda build_id: {("replay-deployment", build_id, VersioningBehavior.PINNED.value)}  # noqa: E731
    # Run 1, on v1: at its second turn it asks (v1 is current) and stays; at its third, Temporal says
    # the target version changed and it continues as new, with no second question.
    assert UPGRADE_PATCH in patch_ids(first) and asked_versions(first) == ["v1"]
    assert task_versions(first) == on("v1")
    assert first[-1].HasField("workflow_execution_continued_as_new_event_attributes")
    last_task = [e for e in first if e.HasField("workflow_task_started_event_attributes")][-1]
    assert last_task.workflow_task_started_event_attributes.target_worker_deployment_version_changed
    # Run 2 continues run 1, on v2: it asks again before the turn (v2 is current), stays, and ends.
    run_1 = first[0].workflow_execution_started_event_attributes.original_execution_run_id
    assert second[0].workflow_execution_started_event_attributes.continued_execution_run_id == run_1
    assert first[-1].workflow_execution_continued_as_new_event_attributes.new_execution_run_id == (
        second[0].workflow_execution_started_event_attributes.original_execution_run_id)
    assert UPGRADE_PATCH in patch_ids(second) and asked_versions(second) == ["v2"]
    assert task_versions(second) == on("v2")
    assert second[-1].HasField("workflow_execution_completed_event_attributes")
    # The pinned run stays on v1 across the switch, and never asks.
    assert task_versions(pinned) == on("v1") and pinned[-1].HasField("workflow_execution_completed_event_attributes")
    assert UPGRADE_PATCH not in patch_ids(pinned) and asked_versions(pinned) == []


@pytest.mark.parametrize("path", HISTORY_FILES, ids=lambda p: p.stem)
async def test_replay_committed_history(path: Path) -> None:
    # What a user's own Replayer needs: the plugin (converter, workflow, sandbox).
    replayer = Replayer(workflows=[], plugins=[AgentLoopPlugin()])
    result = await replayer.replay_workflow(load(path))
    assert result.replay_failure is None


@workflow.defn(name="AgentRunWorkflow")
class ReorderedWorkflow:
    """A 'refactor' that skips tool resolution: must not replay."""

    @workflow.run
    async def run(self, input: AgentRunInput) -> AgentRunResult:
        await workflow.execute_activity("call_model", input, start_to_close_timeout=timedelta(seconds=5))
        raise AssertionError("unreachable in replay")


async def test_replay_catches_an_incompatible_change() -> None:
    replayer = Replayer(workflows=[ReorderedWorkflow], data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(load(HISTORIES / "tools_parallel.json"),
                                            raise_on_replay_failure=False)
    assert isinstance(result.replay_failure, workflow.NondeterminismError)
    assert "does not match activity type of activity command 'call_model'" in str(result.replay_failure)


def test_the_eval_case_run_answers_from_the_recording_without_running_a_tool() -> None:
    from agentloop.workflows.patches import EVAL_PATCH

    events = load(HISTORIES / "eval_run-case.json").events
    assert EVAL_PATCH in patch_ids(events)
    scheduled = [e.activity_task_scheduled_event_attributes.activity_type.name for e in events
                 if e.HasField("activity_task_scheduled_event_attributes")]
    assert scheduled == ["call_model", "call_model"]  # no execute_tool: read and write came from the recording


def test_the_eval_of_a_thread_turn_starts_its_case_run_with_the_earlier_turn() -> None:
    events = load(HISTORIES / "eval_thread-case.json").events
    started = json.loads(events[0].workflow_execution_started_event_attributes.input.payloads[0].data)
    roles = [m["role"] for m in started["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant", "user"]  # turn 1, then turn 2's message
    assert started["messages"][-1]["content"][0]["text"] == "and again?"
    completed = events[-1].workflow_execution_completed_event_attributes
    tally = json.loads(completed.result.payloads[0].data)["eval_tally"]
    assert tally == {"tools": ["list_dir"], "recorded": 1, "live": 0, "refused": 0}


def statuses_indexed(events: list) -> list[str]:
    """The AgentStatus values a history upserted, in order."""
    return [json.loads(e.upsert_workflow_search_attributes_event_attributes.search_attributes
                       .indexed_fields["AgentStatus"].data)
            for e in events if e.HasField("upsert_workflow_search_attributes_event_attributes")
            and "AgentStatus" in e.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields]


def test_an_eval_case_runs_approval_no_longer_shows_awaiting_approval() -> None:
    from agentloop.workflows.patches import EVAL_APPROVAL_PATCH

    before = load(HISTORIES / "eval_run-case.json").events
    after = load(HISTORIES / "eval_approval-case.json").events
    assert "awaiting_approval" in statuses_indexed(before) and EVAL_APPROVAL_PATCH not in patch_ids(before)
    assert "awaiting_approval" not in statuses_indexed(after) and EVAL_APPROVAL_PATCH in patch_ids(after)


def test_the_quota_histories_hold_the_reservations() -> None:
    from agentloop.shared.runs.quotas import QUOTA_ACTIVITY
    from agentloop.workflows.patches import QUOTA_PATCH

    run = load(HISTORIES / "quota_run.json").events
    assert QUOTA_PATCH in patch_ids(run)
    asked = {e.event_id for e in run if e.HasField("activity_task_scheduled_event_attributes")
             and e.activity_task_scheduled_event_attributes.activity_type.name == QUOTA_ACTIVITY}
    answers = [json.loads(e.activity_task_completed_event_attributes.result.payloads[0].data)["kind"]
               for e in run if e.HasField("activity_task_completed_event_attributes")
               and e.activity_task_completed_event_attributes.scheduled_event_id in asked]
    assert len(asked) >= 5 and "wait" in answers  # reserves, one after the wait, the release
    assert any(e.HasField("timer_started_event_attributes") for e in run)
    first, second = (load(HISTORIES / f"{n}.json").events for n in ("quota_ledger", "quota_ledger-2"))
    assert first[-1].HasField("workflow_execution_continued_as_new_event_attributes")
    assert second[0].workflow_execution_started_event_attributes.input.payloads


def test_a_cancelled_runs_history_gives_its_reservation_back() -> None:
    from agentloop.workflows.patches import QUOTA_CANCEL_PATCH

    events = load(HISTORIES / "quota_cancel.json").events
    assert QUOTA_CANCEL_PATCH in patch_ids(events)
    # The release signal to the tenant's ledger, then the cancelled end.
    assert events[-1].HasField("workflow_execution_canceled_event_attributes")
    assert any(e.HasField("signal_external_workflow_execution_initiated_event_attributes") for e in events)
