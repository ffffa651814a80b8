"""The workflow sandbox setting, and that this suite runs the agent workflow
in the sandbox (runs without it: tests/server/loop/test_workflow_sandbox.py)."""


from __future__ import annotations

import os

from temporalio import workflow

from agentloop.workflows.agent_run import AgentRunWorkflow
from agentloop.workflows.workflow_sandbox import workflow_sandbox_from_env


def test_the_suite_runs_the_agent_workflow_in_the_sandbox() -> None:
    assert os.environ.get("AGENTLOOP_WORKFLOW_SANDBOX") == "1"
    assert workflow._Definition.from_class(AgentRunWorkflow).sandboxed is True


def test_the_setting_reads_on_off_and_takes_the_safe_side_when_unclear() -> None:
    assert workflow_sandbox_from_env({}) is False
    for off in ("0", "false", "No", " off ", ""):
        assert workflow_sandbox_from_env({"AGENTLOOP_WORKFLOW_SANDBOX": off}) is False, off
    for on in ("1", "true", "YES", "on"):
        assert workflow_sandbox_from_env({"AGENTLOOP_WORKFLOW_SANDBOX": on}) is True, on
    assert workflow_sandbox_from_env({"AGENTLOOP_WORKFLOW_SANDBOX": "maybe"}) is True
