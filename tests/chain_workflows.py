"""User workflows that use agentloop.workflow's chain and consolidate
(tests/test_sub_agents.py runs them on the dev server)."""

from __future__ import annotations

from temporalio import workflow

from agentloop import AgentSpec
from agentloop.workflow import chain, consolidate


@workflow.defn
class ChainWorkflow:
    @workflow.run
    async def run(self, models: list[str]) -> str:
        specs = [AgentSpec(model=m, name=f"stage{i}") for i, m in enumerate(models)]
        result = await chain(specs, "start")
        return result.final_text


@workflow.defn
class ConsolidateWorkflow:
    @workflow.run
    async def run(self, models: list[str]) -> list[str]:
        *answering, summariser = models
        specs = [AgentSpec(model=m, name=f"expert{i}", max_steps=1) for i, m in enumerate(answering)]
        merged = await consolidate(specs, "Which colour?", summariser=AgentSpec(model=summariser, name="merger",
                                                                                 tools=["list_dir"]))
        return [merged.final_text, *(type(r).__name__ for r in merged.results)]
