"""AgentLoopPlugin in a user's own Temporal Client, Worker and Replayer, on
the real dev server."""

from __future__ import annotations

import uuid
import warnings
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
)
from temporalio.worker import UnsandboxedWorkflowRunner, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from agentloop import AgentClient, AgentLoopPlugin, AgentRunFailed, AgentSpec, UserError
from agentloop.testing import call, calls, reply, script
from agentloop.tools.registry import ToolRegistry
from agentloop.workers.devserver import DevServer
from agentloop.workers.plugin import HEARTBEAT_THROTTLE
from agentloop.workflows.agent_run import AgentRunWorkflow
from tests.helpers.fixtures.user_workflows import GreetingWorkflow, shout


def activity_queues(history: WorkflowHistory) -> dict[str, set[str]]:
    """The task queues each activity type was scheduled on."""
    queues: dict[str, set[str]] = {}
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            queues.setdefault(attrs.activity_type.name, set()).add(attrs.task_queue.name)
    return queues


def registered(worker: Worker) -> tuple[list[str], list[str]]:
    config = worker.config(active_config=True)
    return (sorted(w.__name__ for w in config["workflows"]), sorted(a.__name__ for a in config["activities"]))


async def test_a_users_client_and_worker_run_an_agent_next_to_their_own_workflow(
    dev_server: DevServer, temporal_client: Client, task_queue: str, registry: ToolRegistry, workspace: Path
) -> None:
    # The user's own client: the plugin alone sets the converter.
    client = await Client.connect(
        dev_server.address, plugins=[AgentLoopPlugin(registry=registry, workspace=workspace)]
    )
    assert client.data_converter is pydantic_data_converter
    (workspace / "notes.txt").write_text("ship it")
    # The user's own Worker: their workflow and activity; the client's plugin
    # adds the agent's workflow and activities.
    worker = Worker(client, task_queue=task_queue, workflows=[GreetingWorkflow], activities=[shout])
    assert registered(worker) == (
        ["AgentEvalWorkflow", "AgentRunWorkflow", "GreetingWorkflow", "QuotaLedgerWorkflow", "ScheduleFeedWorkflow"],
        ["call_model", "current_deployment_version", "eval_score", "execute_tool", "execute_tool_here", "load_context",
         "quota_ledger", "resolve_guardrails", "resolve_tools", "resolve_tools_here",
         "run_guardrail", "run_tool_hooks", "shout"]
    )
    model = script(calls(call("read_file", {"file_path": "notes.txt"})), reply("done"))
    async with worker:
        greeting = await client.execute_workflow(
            GreetingWorkflow.run, "ada", id=f"greet-{uuid.uuid4().hex[:8]}", task_queue=task_queue
        )
        handle = await AgentClient(client, task_queue=task_queue).start(
            AgentSpec(model=model, tools=["read_file"]), "go")
        result = await handle.result()
    assert greeting == "HELLO ADA!"
    assert result.status == "completed" and result.final_text == "done"
    assert "ship it" in result.messages[-2].tool_results[0].content
    # Role all: the tools were looked up by this worker itself (a local
    # activity, no task on any queue), which said the run's queue has the
    # tools too; so the tool call went to the run's own queue.
    queues = activity_queues(await handle.workflow_handle.fetch_history())
    assert queues == {"execute_tool": {task_queue}, "call_model": {f"{task_queue}-llm-scripted"}}


async def test_the_tools_queue_worker_starts_and_stops_with_the_users_worker(
    temporal_client: Client, task_queue: str, registry: ToolRegistry, workspace: Path
) -> None:
    # The plugin on the Worker only (the client has the pydantic converter).
    # Two workers one after the other on the same queue: each brings its own
    # tools-queue worker, and leaving the block stops both.
    plugin = AgentLoopPlugin(registry=registry, workspace=workspace)
    agents = AgentClient(temporal_client, task_queue=task_queue)
    for answer in ("one", "two"):
        worker = Worker(temporal_client, task_queue=task_queue, workflows=[GreetingWorkflow], activities=[shout],
                        plugins=[plugin])
        async with worker:
            result = await agents.run(
                AgentSpec(model=script(calls(call("list_dir", {"path": "."})), reply(answer)), tools=["list_dir"]),
                "go",
            )
        assert result.final_text == answer
        assert worker.is_shutdown
        assert plugin._running == set()  # no tools worker left running


class ShoutingPayloadConverter(CompositePayloadConverter):
    """A payload converter of the user's own (not pydantic's)."""

    def __init__(self) -> None:
        super().__init__(*DefaultPayloadConverter.default_encoding_payload_converters)


async def test_a_custom_converter_that_is_not_pydantic_is_refused_with_the_fix(temporal_client: Client,
                                                                                 dev_server: DevServer) -> None:
    custom = DataConverter(payload_converter_class=ShoutingPayloadConverter)
    with pytest.raises(UserError) as info:
        await Client.connect(dev_server.address, data_converter=custom, plugins=[AgentLoopPlugin()])
    assert str(info.value) == (
        "agentloop needs temporalio.contrib.pydantic.pydantic_data_converter, but this client's data converter "
        "uses the payload converter tests.server.runs.test_plugin.ShoutingPayloadConverter; leave data_converter unset "
        "(AgentLoopPlugin sets it), pass pydantic_data_converter, or make your payload_converter_class subclass "
        "temporalio.contrib.pydantic.PydanticPayloadConverter"
    )
    # A Worker given the plugin, on a client without the pydantic converter.
    plain = await Client.connect(dev_server.address)
    with pytest.raises(UserError, match=r"^this Worker's client does not use the pydantic data converter"):
        Worker(plain, task_queue="q-plain", plugins=[AgentLoopPlugin()])


async def test_the_plugin_composes_with_a_users_worker_options(temporal_client: Client, task_queue: str) -> None:
    runner = SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules("dataclasses"))
    worker = Worker(temporal_client, task_queue=task_queue, workflows=[GreetingWorkflow], activities=[shout],
                    workflow_runner=runner, workflow_failure_exception_types=[ArithmeticError],
                    plugins=[AgentLoopPlugin()])
    config = worker.config(active_config=True)
    passthrough = config["workflow_runner"].restrictions.passthrough_modules
    assert {"agentloop", "dataclasses"} <= passthrough
    assert list(config["workflow_failure_exception_types"]) == [ArithmeticError, UserError, AgentRunFailed]
    assert config["max_heartbeat_throttle_interval"] == HEARTBEAT_THROTTLE == timedelta(seconds=1)
    # A throttle the user chose is theirs; an unsandboxed runner stays unsandboxed.
    worker = Worker(temporal_client, task_queue=task_queue + "-b", workflows=[GreetingWorkflow],
                    max_heartbeat_throttle_interval=timedelta(seconds=5),
                    workflow_runner=UnsandboxedWorkflowRunner(), plugins=[AgentLoopPlugin()])
    config = worker.config(active_config=True)
    assert config["max_heartbeat_throttle_interval"] == timedelta(seconds=5)
    assert isinstance(config["workflow_runner"], UnsandboxedWorkflowRunner)


async def test_the_plugin_is_applied_once_per_worker(dev_server: DevServer, temporal_client: Client) -> None:
    plugin = AgentLoopPlugin()
    client = await Client.connect(dev_server.address, plugins=[plugin])
    # The same plugin on the client and the worker: applied once (Temporal
    # warns about the pair).
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        worker = Worker(client, task_queue="q-twice", plugins=[plugin])
    assert any("same plugin type" in str(w.message) for w in caught)
    assert registered(worker) == (
        ["AgentEvalWorkflow", "AgentRunWorkflow", "QuotaLedgerWorkflow", "ScheduleFeedWorkflow"],
        ["call_model", "current_deployment_version", "eval_score", "execute_tool", "execute_tool_here", "load_context",
         "quota_ledger", "resolve_guardrails", "resolve_tools", "resolve_tools_here",
         "run_guardrail", "run_tool_hooks"])
    # Another one on the worker: the worker's own configures it (here, a
    # models worker on a client whose plugin is role all).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        worker = Worker(client, task_queue="q-models", plugins=[AgentLoopPlugin(role="models")])
    assert registered(worker) == (["AgentEvalWorkflow", "AgentRunWorkflow", "QuotaLedgerWorkflow",
                                   "ScheduleFeedWorkflow"],
                                  ["call_model", "current_deployment_version", "eval_score", "execute_tool_here",
                                   "quota_ledger", "resolve_guardrails", "resolve_tools_here", "run_guardrail"])
    # A worker that registers AgentRunWorkflow itself keeps its own.
    worker = Worker(client, task_queue="q-own", workflows=[AgentRunWorkflow])
    assert registered(worker)[0] == ["AgentEvalWorkflow", "AgentRunWorkflow", "QuotaLedgerWorkflow",
                                     "ScheduleFeedWorkflow"]


async def test_roles(temporal_client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UserError, match=r"^worker role 'shell' is not one of all, models, tools"):
        AgentLoopPlugin(role="shell")
    queue = f"q-{uuid.uuid4().hex[:8]}"
    tools = Worker(temporal_client, task_queue=f"{queue}-tools", plugins=[AgentLoopPlugin(role="tools")])
    assert registered(tools) == ([], ["execute_tool", "load_context", "resolve_tools", "run_tool_hooks"])
    with pytest.raises(UserError) as info:
        Worker(temporal_client, task_queue=queue, plugins=[AgentLoopPlugin(role="tools")])
    assert str(info.value) == (
        f"a tools worker polls the tools queue of the runs' task queue, but this Worker's task queue is "
        f"{queue!r}: use task_queue='{queue}-tools' for runs started on {queue!r} "
        "(agentloop.workers.plugin.tool_task_queue)"
    )
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    with pytest.raises(UserError, match="OPENAI_API_KEY is set"):
        Worker(temporal_client, task_queue=f"{queue}-tools", plugins=[AgentLoopPlugin(role="tools")])


