"""One AgentRunFailed subclass per failure reason: the mapping (what a client
sees from real runs: tests/server/loop/test_run_failed.py)."""


from __future__ import annotations

import copy
import pickle
from typing import get_args

import pytest
from temporalio.exceptions import ApplicationError, CancelledError, TerminatedError, TimeoutError, TimeoutType

import agentloop
from agentloop import AgentRunFailed
from agentloop.shared.base.errors import RUN_FAILED_ERROR_TYPE
from agentloop.shared.runs.report import RunReason
from agentloop.shared.runs.result import (
    RUN_FAILED_CLASSES,
    AgentRunCancelled,
    AgentRunResult,
    ContentFiltered,
    CostLimitExceeded,
    GuardrailTripped,
    MaxStepsExceeded,
    MaxToolCallContinuationsExceeded,
    OutputLimitReached,
    RunError,
    ToolStepFailed,
    run_failed,
    run_failed_class,
)
from agentloop.shared.runs.run import run_failed_from

REPORT = {"id": "r", "model": "scripted:x", "started_at": "2026-01-01T00:00:00Z"}


@pytest.mark.parametrize(("reason", "cls"), [
    ("error", RunError),
    ("max_steps", MaxStepsExceeded),
    ("cost_limit", CostLimitExceeded),
    ("tool_error", ToolStepFailed),
    ("length", OutputLimitReached),
    ("content_filter", ContentFiltered),
    ("guardrail", GuardrailTripped),
    ("max_tool_call_continuations", MaxToolCallContinuationsExceeded),
    ("cancelled", AgentRunCancelled),
])
def test_each_failure_reason_has_its_class(reason: str, cls: type[AgentRunFailed]) -> None:
    assert run_failed_class(reason) is cls
    failed = run_failed("run x failed", reason=reason)
    assert type(failed) is cls and isinstance(failed, AgentRunFailed)
    assert failed.reason == reason and failed.result is None and str(failed) == "run x failed"
    assert "AgentRunFailed" in agentloop.__all__
    if cls.__name__ in agentloop.__all__:
        assert getattr(agentloop, cls.__name__) is cls


def test_every_reason_a_run_can_fail_with_is_mapped() -> None:
    # RunReason's values that do not end a run failed: done and stopped.
    assert set(get_args(RunReason)) - set(RUN_FAILED_CLASSES) == {"done", "stopped"}
    assert len(set(RUN_FAILED_CLASSES.values())) == len(RUN_FAILED_CLASSES)


def test_an_unknown_reason_is_the_base_class_and_no_reason_is_an_error() -> None:
    assert run_failed_class("a_reason_from_a_newer_worker") is AgentRunFailed
    assert run_failed_class(None) is RunError
    assert type(run_failed("m", reason=None)) is RunError


def test_the_exceptions_copy_and_pickle_with_their_fields() -> None:
    result = AgentRunResult.model_validate({"run_id": "r", "status": "failed", "reason": "max_steps", "report": REPORT})
    failed = run_failed("run r failed (max_steps)", reason="max_steps", result=result)
    for again in (copy.deepcopy(failed), pickle.loads(pickle.dumps(failed))):
        assert type(again) is MaxStepsExceeded and str(again) == str(failed)
        assert again.reason == "max_steps" and again.result == result


def test_a_workflow_failure_maps_to_its_class() -> None:
    result = AgentRunResult.model_validate(
        {"run_id": "r", "status": "failed", "reason": "cost_limit", "error": "over budget", "report": REPORT}
    )
    cause = ApplicationError("agent run failed", result.model_dump(mode="json"), type=RUN_FAILED_ERROR_TYPE)
    failed = run_failed_from("r", cause)
    assert type(failed) is CostLimitExceeded and failed.result == result
    assert str(failed) == "run r failed (cost_limit): over budget"
    assert type(run_failed_from("r", CancelledError("cancelled"))) is AgentRunCancelled
    terminated = run_failed_from("r", TerminatedError("by ops"))
    assert type(terminated) is RunError and str(terminated) == "run r was terminated: by ops"
    timed_out = run_failed_from(
        "r", TimeoutError("timed out", type=TimeoutType.START_TO_CLOSE, last_heartbeat_details=[]))
    assert type(timed_out) is RunError and str(timed_out) == "run r timed out: timed out"
    other = run_failed_from("r", ApplicationError("boom", type="SomethingElse"))
    assert type(other) is RunError and str(other) == "run r failed: SomethingElse: boom"
