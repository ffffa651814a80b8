"""Pydantic AI's Temporal durability (``pydantic-ai-slim[temporal]``), as its docs set it up.

A plain ``Agent`` with the ``TemporalDurability`` capability
(:mod:`.pai_agent`); ``PydanticAIPlugin`` registers its model request and
``echo`` as activities.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from pydantic_ai.durable_exec.temporal import PydanticAIPlugin, PydanticAIWorkflow
    from pydantic_ai.usage import UsageLimits

    from benchmarks.loop.floor_workflows import PEER_PROMPT
    from benchmarks.loop.peer_systems.pai_agent import agent


@workflow.defn(name="BenchPeersPydanticAI")
class PydanticAIAgentWorkflow(PydanticAIWorkflow):
    __pydantic_ai_agents__ = [agent]

    @workflow.run
    async def run(self, steps: int) -> str:
        result = await agent.run(PEER_PROMPT, model_settings={"extra_headers": {"x-mock-steps": str(steps)}},
                                 usage_limits=UsageLimits(request_limit=steps + 5))
        return str(result.output)


async def connect(address: str, mock_url: str) -> Client:
    return await Client.connect(address, plugins=[PydanticAIPlugin()])


def worker(client: Client, task_queue: str) -> Worker:
    return Worker(client, task_queue=task_queue, workflows=[PydanticAIAgentWorkflow])
