"""The Pydantic AI agent of ``peer_systems.pai``, built once on the host.

Imported through the workflow sandbox (``imports_passed_through``), so its
model and HTTP client are never rebuilt inside it. The mock LLM's URL comes
from ``AGENTLOOP_PEERS_MOCK_URL``, which ``benchmarks.loop.peers`` sets before it
imports this.
"""

from __future__ import annotations

import os

from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import TemporalDurability
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from benchmarks.loop.floor_workflows import PEER_SYSTEM_PROMPT

MOCK_URL = os.environ.get("AGENTLOOP_PEERS_MOCK_URL", "http://127.0.0.1:9/v1")


async def echo(text: str) -> str:
    """Return the given text unchanged."""
    return text


# One agent and one registered model serve every number of steps: the steps
# travel to the mock as the X-Mock-Steps header, set per run.
model = OpenAIChatModel("mock-pai", provider=OpenAIProvider(base_url=MOCK_URL, api_key="mock"))
agent = Agent(model, name="bench_pai", instructions=PEER_SYSTEM_PROMPT, tools=[echo],
              capabilities=[TemporalDurability()])
