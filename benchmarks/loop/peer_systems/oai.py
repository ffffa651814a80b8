"""OpenAI Agents on Temporal (``temporalio-openai-agents``), as its docs set it up.

The model call is the plugin's model activity, through a Chat Completions
provider pointed at the mock LLM; ``echo`` is a Temporal activity made an
agent tool with ``activity_as_tool``. The SDK's tracing is off: its exporter
would reach for the network.
"""

from __future__ import annotations

import os
from datetime import timedelta

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

from temporalio import activity, workflow  # noqa: E402
from temporalio.client import Client  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

with workflow.unsafe.imports_passed_through():
    from agents import Agent, Runner
    from temporalio.openai_agents import ModelActivityParameters, OpenAIAgentsPlugin
    from temporalio.openai_agents.workflow import activity_as_tool

    from benchmarks.loop.floor_workflows import PEER_PROMPT, PEER_SYSTEM_PROMPT, peer_model_name

TIMEOUT = timedelta(seconds=30)


@activity.defn(name="oai_echo")
async def echo(text: str) -> str:
    """Return the given text unchanged."""
    return text


@workflow.defn(name="BenchPeersOpenAIAgents")
class OpenAIAgentsWorkflow:
    @workflow.run
    async def run(self, steps: int) -> str:
        agent = Agent(name="bench", instructions=PEER_SYSTEM_PROMPT, model=peer_model_name(steps),
                      tools=[activity_as_tool(echo, start_to_close_timeout=TIMEOUT)])
        result = await Runner.run(agent, PEER_PROMPT, max_turns=steps + 5)
        return str(result.final_output)


async def connect(address: str, mock_url: str) -> Client:
    """A client with the plugin, its model provider pointed at ``mock_url``."""
    from agents import OpenAIProvider
    from openai import AsyncOpenAI

    provider = OpenAIProvider(openai_client=AsyncOpenAI(base_url=mock_url, api_key="mock", max_retries=0),
                              use_responses=False)
    plugin = OpenAIAgentsPlugin(model_params=ModelActivityParameters(start_to_close_timeout=TIMEOUT),
                                model_provider=provider)
    return await Client.connect(address, plugins=[plugin])


def worker(client: Client, task_queue: str) -> Worker:
    return Worker(client, task_queue=task_queue, workflows=[OpenAIAgentsWorkflow], activities=[echo])
