"""Start input that is not an AgentRunInput, typed by an operator into the
real ``temporal`` CLI: the run fails once, non-retryably, with a message that
shows a valid input; its workflow task never fails."""

from __future__ import annotations

import json
import uuid

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from agentloop import AgentClient
from agentloop.shared.base.errors import INVALID_INPUT_ERROR_TYPE
from agentloop.shared.runs.run import RUN_INPUT_EXAMPLE, AgentRunInput
from agentloop.testing import reply, script
from agentloop.workers.devserver import DevServer
from tests.helpers.cli import run_temporal
from tests.helpers.runs import task_failures, wait_for_end

#: A valid input typed as an operator would.
VALID = {"spec": {"model": "scripted:unused"},
         "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}

BAD_INPUTS = {
    "string": ["--input", '"hello"'],
    "number": ["--input", "42"],
    "list": ["--input", "[1, 2]"],
    "null": ["--input", "null"],
    "binary_plain": ["--input", "hello", "--input-meta", "encoding=binary/plain"],
    "binary_null": ["--input", "", "--input-meta", "encoding=binary/null"],
    "no_input": [],
    "two_inputs": ["--input", json.dumps(VALID), "--input", json.dumps(VALID)],
    "empty_object": ["--input", "{}"],
    "no_messages": ["--input", json.dumps({"spec": {"model": "scripted:unused"}, "messages": []})],
    "message_not_an_object": ["--input", json.dumps({"spec": {"model": "scripted:unused"}, "messages": ["hi"]})],
}

#: What each failure says was wrong (besides showing a valid example).
WHAT_WAS_WRONG = {
    "string": "the run's input is a JSON string",
    "number": "the run's input is a JSON number",
    "list": "the run's input is a JSON array",
    "null": "the run's input is null",
    "binary_plain": "the run's input is a binary/plain payload of 5 bytes",
    "binary_null": "the run's input is null",
    "no_input": "the run was started without an input",
    "two_inputs": "the run was started with 2 inputs",
    "empty_object": "spec: Field required; messages: Field required",
    "no_messages": "messages: List should have at least 1 item",
    "message_not_an_object": "messages.0: Input should be a valid dictionary",
}


async def start_with_cli(server: DevServer, task_queue: str, args: list[str]) -> str:
    run_id = f"bad-input-{uuid.uuid4().hex[:8]}"
    out = await run_temporal(server, "workflow", "start", "--type", "AgentRunWorkflow", "--task-queue", task_queue,
                             "--workflow-id", run_id, *args)
    assert out.returncode == 0, out.stderr
    return run_id


async def describe_status(server: DevServer, run_id: str) -> str:
    out = await run_temporal(server, "workflow", "describe", "--workflow-id", run_id, "--output", "json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["workflowExecutionInfo"]["status"]


def test_the_example_in_the_message_is_a_valid_input() -> None:
    parsed = AgentRunInput.model_validate_json(RUN_INPUT_EXAMPLE)
    assert parsed.messages[0].role == "user" and parsed.spec.model


@pytest.mark.parametrize("shape", list(BAD_INPUTS))
async def test_bad_start_input_fails_the_run_once(
    temporal_client: Client, dev_server: DevServer, task_queue: str, worker, shape: str
) -> None:
    async with worker():
        run_id = await start_with_cli(dev_server, task_queue, BAD_INPUTS[shape])
        handle = temporal_client.get_workflow_handle(run_id)
        history = await wait_for_end(handle)
        assert task_failures(history) == [], "the run's workflow task failed instead of the run"
        assert await describe_status(dev_server, run_id) == "WORKFLOW_EXECUTION_STATUS_FAILED"
        failed = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED]
        assert len(failed) == 1
        failure = failed[0].workflow_execution_failed_event_attributes.failure
        info = failure.application_failure_info
        assert info.non_retryable and info.type == INVALID_INPUT_ERROR_TYPE
        assert WHAT_WAS_WRONG[shape] in failure.message
        assert RUN_INPUT_EXAMPLE in failure.message, failure.message
        # One workflow task, completed: nothing was retried.
        started = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED]
        assert len(started) == 1
        # Queries still answer about the failed run.
        state = await handle.query("state")
        assert state["status"] == "failed" and "invalid run input" in state["error"]


async def test_a_valid_input_typed_into_the_cli_runs(
    temporal_client: Client, dev_server: DevServer, task_queue: str, worker
) -> None:
    model = script(reply("hello from the CLI"))
    typed = {"spec": {"model": model}, "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}
    async with worker():
        run_id = await start_with_cli(dev_server, task_queue, ["--input", json.dumps(typed)])
        result = await AgentClient(temporal_client, task_queue=task_queue).get_handle(run_id).result()
    assert result.status == "completed" and result.final_text == "hello from the CLI"


async def test_bad_input_from_python_fails_the_run_once(
    temporal_client: Client, task_queue: str, worker
) -> None:
    # The same from a Python client that skips AgentClient: a dict that is
    # not an AgentRunInput, and an extra argument.
    async with worker():
        for args in ([{"spec": {"model": 7}, "messages": "hi"}], [VALID, "extra"]):
            handle: WorkflowHandle = await temporal_client.start_workflow(
                "AgentRunWorkflow", args=args, id=f"bad-py-{uuid.uuid4().hex[:8]}", task_queue=task_queue
            )
            history = await wait_for_end(handle)
            assert task_failures(history) == []
            (failed,) = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED]
            failure = failed.workflow_execution_failed_event_attributes.failure
            assert failure.application_failure_info.non_retryable
            assert RUN_INPUT_EXAMPLE in failure.message
