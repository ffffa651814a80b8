"""Traces and metrics of runs on a real dev server, with an in-process
worker: GenAI spans, the agent's name on every span, sub-agents in their
parent's trace, no span twice when every workflow task replays the run
(``max_cached_workflows=0``), and the metrics against the run's report."""

from __future__ import annotations

from collections import Counter

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentloop import AgentClient, AgentSpec
from agentloop.shared.definition.pricing import Budget, ModelPrice
from agentloop.shared.definition.spec import SubAgent
from agentloop.testing import call, calls, reply, script
from agentloop.workers.metrics import AgentMetrics
from agentloop.workers.telemetry import Telemetry
from agentloop.workers.tracing import tracer_provider
from tests.helpers import agents
from tests.helpers.agents import awaiting, echo_results, write
from tests.helpers.runs import wait_state

EXPORTER = InMemorySpanExporter()
PROVIDER = tracer_provider(EXPORTER, simple=True)
TRACER = PROVIDER.get_tracer("agentloop")

PRICE = ModelPrice(input_per_mtok=3.0, output_per_mtok=15.0)


def spec(model: str, **kw) -> AgentSpec:
    """A test spec whose scripted model has a price (its cost is not 0)."""
    kw.setdefault("tools", agents.ASKING_TOOLS)
    return agents.spec(model, budget=Budget(prices={model: PRICE}), **kw)


def telemetry(**kw) -> Telemetry:
    return Telemetry(tracer=TRACER, **kw)


def spans_of(trace_id: int) -> list:
    return [s for s in EXPORTER.get_finished_spans() if s.context.trace_id == trace_id]


def ancestors(span, by_id: dict) -> list[str]:
    names = []
    while span.parent is not None and span.parent.span_id in by_id:
        span = by_id[span.parent.span_id]
        names.append(span.name)
    return names


async def test_every_step_and_tool_call_is_one_span_when_every_task_replays(
    agent_client: AgentClient, worker
) -> None:
    EXPORTER.clear()
    model = script(calls(write("a.txt", "A"), write("b.txt", "B")),
                   calls(call("read_file", {"file_path": "a.txt"})), echo_results)
    metrics = AgentMetrics()
    async with worker(telemetry=telemetry(metrics=metrics), max_cached_workflows=0):
        handle = await agent_client.start(spec(model, name="writer"), "write two files, read one")
        result = await handle.result()
    assert result.status == "completed"
    runs = [s for s in EXPORTER.get_finished_spans() if s.name == "invoke_agent writer"]
    assert len(runs) == 1, [s.name for s in EXPORTER.get_finished_spans()]
    run = runs[0]
    spans = spans_of(run.context.trace_id)
    names = Counter(s.name for s in spans)
    # Three LLM steps, three tool calls: each exactly once, however often the run replayed.
    assert names[f"chat {model.split(':', 1)[1]}"] == 3, names
    assert names["execute_tool write_file"] == 2 and names["execute_tool read_file"] == 1, names
    assert names["StartActivity:call_model"] == 3 and names["RunActivity:call_model"] == 3, names
    calls_seen = sorted(s.attributes["gen_ai.tool.call.id"] for s in spans if s.name.startswith("execute_tool"))
    assert calls_seen == ["call_0_0", "call_0_1", "call_1_0"]
    # gen_ai.agent.name on every span of the run, and every span under invoke_agent.
    assert all(s.attributes.get("gen_ai.agent.name") == "writer" for s in spans), \
        [s.name for s in spans if s.attributes.get("gen_ai.agent.name") != "writer"]
    by_id = {s.context.span_id: s for s in spans}
    for s in spans:
        if s is not run:
            assert "invoke_agent writer" in ancestors(s, by_id), (s.name, ancestors(s, by_id))
    # The chat spans carry the usage the report counts; no content by default.
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert sum(s.attributes["gen_ai.usage.input_tokens"] for s in chats) == result.usage.input_tokens
    assert sum(s.attributes["gen_ai.usage.output_tokens"] for s in chats) == result.usage.output_tokens
    assert {s.attributes["gen_ai.response.finish_reasons"][0] for s in chats} == {"tool_calls", "stop"}
    assert all(s.attributes["gen_ai.operation.name"] == "chat" and s.attributes["gen_ai.provider.name"] == "scripted"
               for s in chats)
    assert not any(k.startswith("gen_ai.input") or k.endswith("arguments") for s in spans for k in s.attributes)
    assert run.attributes["gen_ai.usage.input_tokens"] == result.usage.input_tokens
    # The metrics say the same as the report.
    label = f"scripted:{model.split(':', 1)[1]}"
    assert metrics.tokens.labels(label, "input")._value.get() == result.usage.input_tokens
    assert metrics.tokens.labels(label, "output")._value.get() == result.usage.output_tokens
    assert abs(metrics.cost.labels(label)._value.get() - result.report.total_cost_usd) < 1e-9
    assert result.report.total_cost_usd > 0
    assert metrics.tool_calls.labels("write_file")._value.get() == 2
    assert metrics.runs_ended.labels("completed")._value.get() == 1


async def test_content_is_on_the_spans_only_when_asked(agent_client: AgentClient, worker) -> None:
    EXPORTER.clear()
    model = script(calls(write("c.txt", "secret-ish content")), reply("done"))
    async with worker(telemetry=telemetry(content=True)):
        handle = await agent_client.start(spec(model, name="writer"), "the prompt text")
        await handle.result()
    spans = EXPORTER.get_finished_spans()
    chat = next(s for s in spans if s.name.startswith("chat "))
    tool = next(s for s in spans if s.name == "execute_tool write_file")
    assert "the prompt text" in chat.attributes["gen_ai.input.messages"]
    assert "secret-ish content" in tool.attributes["gen_ai.tool.call.arguments"]


async def test_a_sub_agent_is_in_its_parents_trace(agent_client: AgentClient, worker) -> None:
    EXPORTER.clear()
    child = SubAgent(spec=AgentSpec(model=script(reply("Paris.")), name="researcher", heartbeat_timeout_seconds=5),
                     description="The researcher.")
    model = script(calls(call("researcher", {"task": "capital of France?"})), echo_results)
    lead = AgentSpec(model=model, name="lead", sub_agents={"researcher": child}, heartbeat_timeout_seconds=5)
    async with worker(telemetry=telemetry(), max_cached_workflows=0):
        handle = await agent_client.start(lead, "Find the capital of France.")
        await handle.result()
    parent = next(s for s in EXPORTER.get_finished_spans() if s.name == "invoke_agent lead")
    spans = spans_of(parent.context.trace_id)
    by_id = {s.context.span_id: s for s in spans}
    sub = [s for s in spans if s.name == "invoke_agent researcher"]
    assert len(sub) == 1
    assert "invoke_agent lead" in ancestors(sub[0], by_id), ancestors(sub[0], by_id)
    child_chat = [s for s in spans if s.name.startswith("chat ") and "invoke_agent researcher" in ancestors(s, by_id)]
    assert len(child_chat) == 1 and child_chat[0].attributes["gen_ai.agent.name"] == "researcher"
    parent_chats = [s for s in spans if s.name.startswith("chat ") and s not in child_chat]
    assert len(parent_chats) == 2 and all(s.attributes["gen_ai.agent.name"] == "lead" for s in parent_chats)


async def test_approvals_waiting_and_runs_by_status(agent_client: AgentClient, worker) -> None:
    metrics = AgentMetrics()
    model = script(calls(write("a.txt"), write("b.txt")), echo_results)
    async with worker(telemetry=Telemetry(traces=False, metrics=metrics)):
        handle = await agent_client.start(spec(model, default_permission="auto"), "w")
        await wait_state(handle, awaiting(2), "two approvals")
        assert metrics.approvals_waiting._value.get() == 2
        assert metrics.runs_live.labels("awaiting_approval")._value.get() == 1
        await handle.approve("call_0_0")
        await wait_state(handle, awaiting(1), "one approval")
        assert metrics.approvals_waiting._value.get() == 1
        await handle.approve("call_0_1")
        result = await handle.result()
    assert metrics.approvals_waiting._value.get() == 0
    # The waits for the two decisions, apart from the tools' time.
    waits = [c.waited_ms / 1000 for c in result.report.steps[0].tool_calls]
    assert metrics.registry.get_sample_value("agentloop_approval_wait_seconds_count") == 2
    assert metrics.registry.get_sample_value("agentloop_approval_wait_seconds_sum") == pytest.approx(sum(waits))
    assert metrics.runs_live.labels("awaiting_approval")._value.get() == 0
    assert metrics.runs_ended.labels("completed")._value.get() == 1
