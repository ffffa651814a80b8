"""The workflow-side API: what a workflow of your own calls.

Import it in workflow code, on a Worker that has
:class:`~agentloop.AgentLoopPlugin` (which registers the agent's workflow and
activities and passes ``agentloop`` through the sandbox)::

    from temporalio import workflow
    from agentloop import AgentSpec, MaxStepsExceeded
    from agentloop.in_workflow import run_agent

    @workflow.defn
    class TriageWorkflow:
        @workflow.run
        async def run(self, ticket: str) -> str:
            result = await run_agent(AgentSpec(model="openai:gpt-4.1-mini"), ticket)
            return result.final_text

* :func:`run_agent`, :func:`start_agent` and :func:`agent_result`: an agent
  run as a child workflow (``agentloop/workflows/run_agent.py`` says how).
* :func:`chain` and :func:`consolidate`: agents in sequence, and several
  opinions merged.
* :func:`activity_as_tool`: any Temporal activity, on any task queue, as a
  tool of the agent.

Everything here is deterministic.
"""

from agentloop.shared.base.contracts import MAX_INPUT_BYTES, WORKFLOW_NAME
from agentloop.shared.definition.activity_tools import ActivityTool, activity_as_tool
from agentloop.shared.runs.run import as_messages, run_input
from agentloop.workflows.run_agent import Consolidated, agent_result, chain, consolidate, run_agent, start_agent

__all__ = [
    "MAX_INPUT_BYTES",
    "WORKFLOW_NAME",
    "ActivityTool",
    "Consolidated",
    "activity_as_tool",
    "agent_result",
    "as_messages",
    "chain",
    "consolidate",
    "run_agent",
    "run_input",
    "start_agent",
]
