"""Replay committed histories against today's workflow code.

A change that would break runs in flight (different commands in a different
order) fails here. Record new histories with ``python -m tests.replay.record``
only for a deliberate, patched change, and keep the old ones.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from agentloop.workers.plugin import AgentLoopPlugin
from agentloop.shared.run import AgentRunInput, AgentRunResult
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
    }


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
