"""agentloop's side of ``benchmarks.loop.concurrency``: the scripted model, the
plugin and spec each run is, the parts ``--without`` switches off
(:func:`switched_off`), and :func:`measure_agentloop`, the row of agentloop's runs."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Collection, Generator
from typing import Any

from temporalio.client import Client
from temporalio.testing import ActivityEnvironment
from temporalio.worker import Worker

from agentloop import AgentClient, AgentLoopPlugin, AgentSpec, Usage
from agentloop.shared.definition.activity_io import ModelResponse, ResolveToolsInput, ResolveToolsResult
from agentloop.testing import call, calls, reply, step_of
from agentloop.tools.registry import ToolRegistry
from agentloop.workflows.agent_run import AgentRunWorkflow
from agentloop.workflows.effects.recorder import RunRecorder
from benchmarks.loop.cpu_split import CpuSplit
from benchmarks.loop.floor_workflows import MODEL_CALLS as CALLS
from benchmarks.loop.floor_workflows import MODEL_SECONDS
from benchmarks.loop.load import Sustained, drive, row_of


async def scripted(request):
    """The agent's model: ``MODEL_SECONDS`` per call, one echo per step.

    Like the floor's model, it does nothing but sleep and hand back an
    answer, here one made once (:data:`ANSWERS`): the cost of a model call on
    the worker is the provider adapter's, not the loop's, and neither system
    pays one here. The answers carry their usage, as a provider reports it
    (the scripted model would otherwise estimate it from the request's
    JSON), and their tool-call ids."""
    await asyncio.sleep(MODEL_SECONDS[0])
    return ANSWERS[min(step_of(request), STEPS)]


STEPS = 3

USAGE = Usage(input_tokens=120, output_tokens=20, requests=1)


def answers(steps: int) -> list[ModelResponse]:
    """The answer to each step: a call of ``echo`` for the first ``steps``, then ``done``."""
    return [
        calls(call("echo", {"text": f"step {step}"}, id=f"call_{step}_0")).model_copy(update={"usage": USAGE})
        for step in range(steps)
    ] + [reply("done").model_copy(update={"usage": USAGE})]


ANSWERS = answers(STEPS)


#: The parts of an agent run ``--without`` can switch off (:func:`switched_off`).
PARTS = ("lookup", "events")


def parts_of(text: str) -> tuple[str, ...]:
    """The parts a comma-separated ``--without`` names.

    Raises:
        ValueError: A name not in :data:`PARTS`.
    """
    parts = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        raise ValueError(f"cannot switch off {', '.join(unknown)}: the parts are {', '.join(PARTS)}")
    return parts


@contextlib.contextmanager
def switched_off(parts: Collection[str], lookup: ResolveToolsResult | None) -> Generator[None]:
    """While it lasts, agentloop's runs in this process go without ``parts``
    (of :data:`PARTS`): ``lookup``, the tool lookup at a run's start (its
    local activity; each run is handed ``lookup`` instead), and ``events``,
    every event on the run's stream. agentloop's workflow runs outside the
    sandbox, in this process's classes, so replacing two of their methods
    reaches every run; both are put back after.

    Raises:
        ValueError: A part not in :data:`PARTS`, or ``lookup`` switched off
            with no ``lookup`` to hand over.
    """
    parts_of(",".join(parts))
    if "lookup" in parts and lookup is None:
        raise ValueError("switching off the lookup needs the lookup to hand the runs")
    saved = AgentRunWorkflow._look_tools_up, RunRecorder.emit

    async def answered(self: AgentRunWorkflow, input: ResolveToolsInput) -> ResolveToolsResult:
        return lookup

    def unpublished(self: RunRecorder, event_type: Any, **fields: Any) -> None:
        return None

    if "lookup" in parts:
        AgentRunWorkflow._look_tools_up = answered
    if "events" in parts:
        RunRecorder.emit = unpublished
    try:
        yield
    finally:
        AgentRunWorkflow._look_tools_up, RunRecorder.emit = saved



def bench_plugin(local: bool = False) -> AgentLoopPlugin:
    """agentloop's plugin for the benchmark: one async ``echo`` tool (``local=True`` with ``local``)."""
    registry = ToolRegistry()

    @registry.tool(local=local)
    async def echo(text: str) -> str:
        """Return the text."""
        return text

    return AgentLoopPlugin(registry=registry)


def bench_spec(deltas: bool) -> AgentSpec:
    """The agent each run is: the scripted model, ``echo`` allowed, :data:`STEPS` tool steps."""
    return AgentSpec(model="scripted:bench-concurrency", tools=["echo"], default_permission="allow",
                     max_steps=STEPS + 2, stream_deltas=deltas)


async def handed_lookup(plugin: AgentLoopPlugin, spec: AgentSpec, queue: str) -> ResolveToolsResult:
    """The one lookup runs without theirs are handed (:func:`switched_off`):
    ``plugin``'s worker's answer to what a run of ``spec`` on ``queue`` asks."""
    asked = ResolveToolsInput(names=spec.tools, hooks=spec.tool_hooks, mcp_servers=spec.mcp_servers,
                              agents_md=spec.agents_md is None, workspace=spec.workspace)
    found = await ActivityEnvironment().run(plugin.agent_activities.resolve_tools, asked)
    return found.model_copy(update={"runs_queue": queue})


async def measure_agentloop(client: Client, n: int, tag: str, deltas: bool, timeout: float, local: bool = False, *,
                            sustained: Sustained | None = None, split: CpuSplit | None = None,
                            without: tuple[str, ...] = ()) -> dict[str, object]:
    """agentloop's runs at ``n`` (``split`` times their activities, the tools
    queue's too; ``without`` those parts, see :func:`switched_off`), on
    queue ``agents-{tag}``."""
    queue = f"agents-{tag}"
    plugin, spec = bench_plugin(local), bench_spec(deltas)
    agents = AgentClient(client, task_queue=queue)
    async with Worker(client, task_queue=queue, plugins=[plugin], interceptors=[split] if split else []):
        stats = plugin.agent_activities.transcripts.stats
        queries_before = stats.queries

        async def start_agent(run_id: str):
            return (await agents.start(spec, "go", run_id=run_id)).workflow_handle

        lookup = await handed_lookup(plugin, spec, queue) if "lookup" in without else None
        prefix = "without" if without else "local" if local else "agent"
        with switched_off(without, lookup):
            driven = await drive(start_agent, f"{prefix}-{tag}", n, timeout, sustained)
        llm_steps = sum(len(CALLS.get(i, [])) for i in driven.started) or 1
        label = ("agentloop" + ("" if deltas else " (deltas off)") + (" (local tool)" if local else "")
                 + (f" without {', '.join(without)}" if without else ""))
        return row_of(label, n, driven, queries=(stats.queries - queries_before) / llm_steps)
