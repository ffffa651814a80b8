"""The bare-Temporal floors the benchmarks compare agentloop against.

Kept in a module of its own with no agentloop imports, and passed through
the workflow sandbox (as agentloop passes through its own package), so a
floor run costs what Temporal itself costs.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import defaultdict
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ApplicationError

#: When each run's model calls started, by workflow id.
MODEL_CALLS: dict[str, list[float]] = defaultdict(list)

#: How long a floor model call takes (set by the benchmark).
MODEL_SECONDS = [0.3]


@activity.defn(name="bench_model")
async def floor_model(step: int) -> str:
    MODEL_CALLS[activity.info().workflow_id].append(time.monotonic())
    await asyncio.sleep(MODEL_SECONDS[0])
    return f"call {step}"


@activity.defn(name="bench_tool")
async def floor_tool(text: str) -> str:
    return text


@workflow.defn(name="BenchConcurrencyFloor")
class AgentShapedFloor:
    """What an agent run does, with plain activities: ``steps`` times a model
    call then a tool call, then a last model call.

    Its activities have an agent run's heartbeat timeout (30 s, so a lost
    worker is noticed as soon as agentloop notices it). The server sets a
    timer for it when an activity starts, fired and dropped 30 s later: a
    floor whose first timer came at 60 s would leave that work until after
    a burst of 1,000 runs (about a minute) that agentloop's runs pay inside it.
    """

    @workflow.run
    async def run(self, steps: int) -> str:
        options = dict(start_to_close_timeout=timedelta(seconds=60), heartbeat_timeout=timedelta(seconds=30))
        for step in range(steps):
            text = await workflow.execute_activity(floor_model, step, **options)
            await workflow.execute_activity(floor_tool, text, **options)
        return await workflow.execute_activity(floor_model, steps, **options)


@workflow.defn(name="BenchConcurrencyFloorUnsandboxed", sandboxed=False)
class UnsandboxedFloor(AgentShapedFloor):
    """:class:`AgentShapedFloor` outside Temporal's workflow sandbox, as
    agentloop's own workflow runs by default (README "What you can
    trade"): the floor of agentloop's code alone, without the sandbox's cost
    that the plain floor pays and agentloop does not."""

    @workflow.run
    async def run(self, steps: int) -> str:
        return await super().run(steps)


@workflow.defn(name="BenchConcurrencyFloorLocalTool")
class LocalToolFloor:
    """:class:`AgentShapedFloor` with its tool call a local activity (the
    model call stays an activity task): the floor of agent runs whose tool
    is registered ``local=True``."""

    @workflow.run
    async def run(self, steps: int) -> str:
        options = dict(start_to_close_timeout=timedelta(seconds=60), heartbeat_timeout=timedelta(seconds=30))
        for step in range(steps):
            text = await workflow.execute_activity(floor_model, step, **options)
            await workflow.execute_local_activity(floor_tool, text, start_to_close_timeout=timedelta(seconds=60))
        return await workflow.execute_activity(floor_model, steps, **options)


#: Byte sizes of what an agent run of the concurrency benchmark records
#: besides its calls' order (one run, 3 tool steps, read from its history):
#: start input, result, first and later model-call inputs, model results,
#: the tool lookup's answer. The tool calls' own (about 180 bytes) come from
#: their text, :data:`RECORD_TOOL_TEXT`.
RECORD_SIZES = {"input": 2661, "result": 3886, "first_model_input": 565, "model_input": 271,
                "model_result": 535, "lookup": 357}
RECORD_TOOL_TEXT = "t" * 170
#: The search attributes an agent run starts with and ends by setting.
AGENT_STATUS = SearchAttributeKey.for_keyword("AgentStatus")
AGENT_PENDING_TOOLS = SearchAttributeKey.for_keyword_list("AgentPendingTools")
RECORD_START_ATTRIBUTES = TypedSearchAttributes([
    SearchAttributePair(SearchAttributeKey.for_keyword("AgentModel"), "scripted:bench-concurrency"),
    SearchAttributePair(AGENT_STATUS, "running"),
    SearchAttributePair(SearchAttributeKey.for_keyword("AgentName"), "agent"),
    # The agent's fingerprint (12 hex digits), as an agent run is indexed with.
    SearchAttributePair(SearchAttributeKey.for_keyword("AgentVersion"), "0123456789ab"),
])


@activity.defn(name="bench_record_model")
async def record_model(context: str) -> str:
    """:func:`floor_model` with an agent run's payload sizes (one input, as an LLM step's)."""
    MODEL_CALLS[activity.info().workflow_id].append(time.monotonic())
    await asyncio.sleep(MODEL_SECONDS[0])
    return "m" * RECORD_SIZES["model_result"]


@activity.defn(name="bench_record_lookup")
async def record_lookup() -> str:
    """The tool lookup's answer, as big as an agent run's."""
    return "l" * RECORD_SIZES["lookup"]


@workflow.defn(name="BenchConcurrencyFloorRecord", sandboxed=False)
class RecordFloor:
    """:class:`AgentShapedFloor` recording what an agent run records besides
    its model and tool calls: its start search attributes and summary, one
    patch marker (and the ``TemporalChangeVersion`` upsert that comes with
    it), the tool lookup as a local activity at its start, a summary on each
    activity, an agent run's payload sizes (:data:`RECORD_SIZES`) and its
    closing status upsert. Outside the sandbox, as agentloop's workflow runs:
    what is left between this floor and agentloop is agentloop's code, not
    the shape of its history nor the sandbox."""

    @workflow.run
    async def run(self, start: dict[str, int | str]) -> str:
        steps = int(start["steps"])
        workflow.patched("bench-record-1")
        await workflow.execute_local_activity(record_lookup, start_to_close_timeout=timedelta(seconds=60),
                                              summary="resolve tools")
        options = {"start_to_close_timeout": timedelta(seconds=60), "heartbeat_timeout": timedelta(seconds=30)}
        context = "c" * RECORD_SIZES["first_model_input"]
        for step in range(steps):
            await workflow.execute_activity(record_model, context, summary=f"LLM step {step + 1}", **options)
            context = "c" * RECORD_SIZES["model_input"]
            await workflow.execute_activity(floor_tool, RECORD_TOOL_TEXT, summary="tool echo", **options)
        await workflow.execute_activity(record_model, context, summary=f"LLM step {steps + 1}", **options)
        workflow.upsert_search_attributes([AGENT_STATUS.value_set("completed"), AGENT_PENDING_TOOLS.value_set([])])
        return "r" * RECORD_SIZES["result"]


def record_start_options(steps: int) -> dict[str, object]:
    """:meth:`Client.start_workflow` keywords that start a
    :class:`RecordFloor` run as an agent run is started: one input of an
    agent run's size (the steps, and padding), the search attributes, the
    summary."""
    start = {"steps": steps, "padding": "p" * (RECORD_SIZES["input"] - 50)}
    return {"args": [start], "search_attributes": RECORD_START_ATTRIBUTES,
            "static_summary": "agent on scripted:bench-concurrency"}


#: The scripted agent run of ``benchmarks.loop.peers``: what every system is told,
#: and the one tool the model asks for (Chat Completions' tool format).
PEER_SYSTEM_PROMPT = "You are a benchmark agent. Call the echo tool until told to stop."
PEER_PROMPT = "Run the benchmark script."
PEER_TOOL_SCHEMA = {
    "type": "function",
    "function": {
        "name": "echo",
        "description": "Return the given text unchanged.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}},
                       "required": ["text"], "additionalProperties": False},
    },
}


def peer_model_name(steps: int) -> str:
    """The model name that tells ``benchmarks.loop.peers``' mock LLM how many tool steps to script."""
    return f"mock-steps-{steps}"


class ChatFloorActivities:
    """The chat floor's activities: the model called with the ``openai``
    SDK at ``base_url`` (``benchmarks.loop.peers``' mock LLM), and ``echo``."""

    def __init__(self, base_url: str) -> None:
        from openai import AsyncOpenAI

        self._client = AsyncOpenAI(base_url=base_url, api_key="mock", max_retries=0)

    @activity.defn(name="bench_chat_model")
    async def call_model(self, model: str, messages: list[dict]) -> dict:
        response = await self._client.chat.completions.create(model=model, messages=messages,
                                                              tools=[PEER_TOOL_SCHEMA])
        return response.choices[0].message.model_dump(exclude_none=True)

    @activity.defn(name="bench_chat_tool")
    async def echo(self, text: str) -> str:
        return text


@workflow.defn(name="BenchPeersChatFloor")
class ChatFloor:
    """The floor of ``benchmarks.loop.peers``: a hand-written tool-calling loop of
    plain activities. Each step, one activity calls the model with the whole
    message list (kept as plain dicts) and one runs the ``echo`` tool it
    asked for, until the model answers without a tool call."""

    @workflow.run
    async def run(self, steps: int) -> str:
        return await chat_loop(steps, None)


@workflow.defn(name="BenchPeersChatFloorOnQueue")
class ChatFloorOnQueue:
    """:class:`ChatFloor` with its model calls on a queue of their own (as
    agentloop's provider lanes put them), served by a second worker; the
    tool calls stay on the run's queue."""

    @workflow.run
    async def run(self, steps: int, model_queue: str) -> str:
        return await chat_loop(steps, model_queue)


async def chat_loop(steps: int, model_queue: str | None) -> str:
    """The chat floors' loop: the model asked with the whole message list
    (on ``model_queue``, or the run's own queue when None) and each ``echo``
    call it asks for run, until it answers without a tool call."""
    timeout = timedelta(seconds=30)
    messages: list[dict] = [{"role": "system", "content": PEER_SYSTEM_PROMPT},
                            {"role": "user", "content": PEER_PROMPT}]
    for _ in range(steps + 1):
        answer = await workflow.execute_activity("bench_chat_model", args=[peer_model_name(steps), messages],
                                                 start_to_close_timeout=timeout, task_queue=model_queue)
        messages.append(answer)
        if not answer.get("tool_calls"):
            return answer.get("content") or ""
        for tool_call in answer["tool_calls"]:
            text = json.loads(tool_call["function"]["arguments"])["text"]
            result = await workflow.execute_activity("bench_chat_tool", text, start_to_close_timeout=timeout)
            messages.append({"role": "tool", "tool_call_id": tool_call["id"], "content": result})
    raise ApplicationError("the model did not stop within steps + 1 calls", non_retryable=True)
