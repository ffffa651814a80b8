"""AgentLoopPlugin in a user's own Replayer and data converter, without a
server (in a Client and Worker: tests/server/runs/test_plugin.py)."""


from __future__ import annotations

import dataclasses

from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import PydanticPayloadConverter, pydantic_data_converter
from temporalio.converter import (
    DataConverter,
    PayloadCodec,
)
from temporalio.worker import Replayer

from agentloop import AgentLoopPlugin
from agentloop.workers.plugin import data_converter
from agentloop.workflows.agent_run import AgentRunWorkflow
from tests.helpers.fixtures.user_workflows import GreetingWorkflow
from tests.helpers.paths import HISTORIES


async def test_a_replayer_with_the_plugin_replays_a_committed_history_next_to_a_users_workflow() -> None:
    replayer = Replayer(workflows=[GreetingWorkflow], plugins=[AgentLoopPlugin()])
    history = WorkflowHistory.from_json("tools_parallel", (HISTORIES / "tools_parallel.json").read_text())
    result = await replayer.replay_workflow(history)
    assert result.replay_failure is None
    config = replayer.config(active_config=True)
    assert config["data_converter"] is pydantic_data_converter
    assert [w.__name__ for w in config["workflows"]] == [
        "GreetingWorkflow", "AgentRunWorkflow", "ScheduleFeedWorkflow", "AgentEvalWorkflow",
        "QuotaLedgerWorkflow"]


class Rot13Codec(PayloadCodec):
    async def encode(self, payloads):
        return list(payloads)

    async def decode(self, payloads):
        return list(payloads)


class MyPydanticConverter(PydanticPayloadConverter):
    pass


def test_converters_agentloop_can_use_are_kept_or_completed() -> None:
    assert data_converter(None) is pydantic_data_converter
    assert data_converter(DataConverter.default) is pydantic_data_converter
    assert data_converter(pydantic_data_converter) is pydantic_data_converter
    # A codec of the user's own stays, with the pydantic payload converter.
    codec = Rot13Codec()
    completed = data_converter(DataConverter(payload_codec=codec))
    assert completed.payload_codec is codec and completed.payload_converter_class is PydanticPayloadConverter
    # The user's own subclass of pydantic's is theirs to keep.
    mine = DataConverter(payload_converter_class=MyPydanticConverter)
    assert data_converter(mine) is mine


def test_the_plugin_keeps_its_replayer_settings_when_given_the_workflow_too() -> None:
    # A Replayer given AgentRunWorkflow and the plugin registers it once.
    replayer = Replayer(workflows=[AgentRunWorkflow], plugins=[AgentLoopPlugin()])
    assert [w.__name__ for w in replayer.config(active_config=True)["workflows"]] == [
        "AgentRunWorkflow", "ScheduleFeedWorkflow", "AgentEvalWorkflow",
        "QuotaLedgerWorkflow"]
    assert dataclasses.is_dataclass(replayer.config(active_config=True)["workflow_runner"])
