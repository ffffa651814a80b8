"""Users' own workflows and activities, run beside agentloop's: a greeting
with nothing of agentloop in it (tests of AgentLoopPlugin), and workflows
that use agentloop.in_workflow's chain and consolidate (tests of sub-agents)."""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from pydantic import BaseModel

from temporalio import activity, workflow

from agentloop import AgentSpec
from agentloop.in_workflow import chain, consolidate, run_agent


@activity.defn
async def shout(text: str) -> str:
    return text.upper() + "!"


@workflow.defn
class GreetingWorkflow:
    """A user's own workflow, with nothing of agentloop in it."""

    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_activity(shout, f"hello {name}", start_to_close_timeout=timedelta(seconds=10))


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


class Verdict(BaseModel):
    """A typed answer (tests of typed results)."""

    decision: Literal["refund", "escalate"]
    reason: str


@workflow.defn
class TypedTriageWorkflow:
    """A user's workflow that runs an agent as a child and acts on its typed answer."""

    @workflow.run
    async def run(self, model: str) -> str:
        result = await run_agent(AgentSpec(model=model, name="triage"), "Order A-1: the mug is broken.",
                                 output_type=Verdict)
        assert isinstance(result.output, Verdict)
        return f"{result.output.decision}: {result.output.reason}"
