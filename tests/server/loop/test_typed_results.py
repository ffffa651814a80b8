"""Typed results (``AgentSpec.output``) on the real dev server: both
providers' wire formats, a wrong answer fed back then a right one, the tries
running out, a ``final_result`` tool call between other tools, a child agent
in a user's workflow, and a thread whose turns each return a typed value."""

from __future__ import annotations

import json
import uuid
from typing import Literal

import pytest
from pydantic import BaseModel

from agentloop import AgentClient, AgentSpec
from agentloop.shared.runs.result import OutputInvalid
from agentloop.testing import call, calls, reply, script
from tests.helpers.agents import recording, spec
from tests.helpers.provider_cases import CASES, ProviderCase


class Triage(BaseModel):
    decision: Literal["refund", "escalate"]
    reason: str


@pytest.fixture(params=CASES, ids=lambda case: case.id)
def provider(request: pytest.FixtureRequest) -> ProviderCase:
    return request.param


async def test_native_structured_output_on_the_wire(provider: ProviderCase, agent_client: AgentClient,
                                                    worker) -> None:
    # The model first answers with a wrong value, hears what was wrong, and answers again.
    with provider.server() as server:
        server.enqueue(provider.reply(text='{"decision": "maybe", "reason": "unsure"}'),
                       provider.reply(text='{"decision": "refund", "reason": "broken on arrival"}'))
        async with worker(models=provider.models(server)):
            handle = await agent_client.start(AgentSpec(model=provider.spec_model()), "Order A-1: broken mug",
                                              output_type=Triage)
            result = await handle.result()
    assert result.output == Triage(decision="refund", reason="broken on arrival")
    assert json.loads(result.final_text) == {"decision": "refund", "reason": "broken on arrival"}
    assert result.report.output == {"decision": "refund", "reason": "broken on arrival"}
    first, second = (r.json for r in server.requests)
    if provider.id == "openai":
        fmt = first["response_format"]
        assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
        schema = fmt["json_schema"]["schema"]
    else:
        schema = first["output_config"]["format"]["schema"]
        assert first["output_config"]["format"]["type"] == "json_schema"
    assert schema["properties"]["decision"]["enum"] == ["refund", "escalate"]
    assert schema["required"] == ["decision", "reason"] and schema["additionalProperties"] is False
    retry = json.dumps(second["messages"][-1])
    assert "decision: 'maybe' is not one of ['refund', 'escalate']" in retry
    assert result.report.step_count == 2  # the retry is a step like any other


async def test_a_wrong_answer_is_fed_back_naming_the_field(agent_client: AgentClient, worker) -> None:
    model, seen = recording(lambda r: reply('{"decision": "refund"}') if len(seen) == 1
                            else reply('{"decision": "refund", "reason": "crushed parcel"}'))
    async with worker():
        result = await agent_client.run(spec(model), "Order A-1", output_type=Triage)
    assert result.output == Triage(decision="refund", reason="crushed parcel")
    feedback = seen[1].messages[-1]
    assert feedback.role == "user"
    assert "reason: missing (a required field)" in feedback.text
    assert "1 more try" not in feedback.text and "2 more tries" in feedback.text


async def test_the_run_fails_output_invalid_when_the_tries_run_out(agent_client: AgentClient, worker) -> None:
    model, seen = recording(reply("I think it should be refunded."))
    async with worker():
        handle = await agent_client.start(spec(model, output_retries=1), "Order A-1", output_type=Triage)
        with pytest.raises(OutputInvalid) as failed:
            await handle.result()
        events = [e async for e in handle.events()]
    assert len(seen) == 2  # the first answer and one retry
    assert failed.value.reason == "output_invalid"
    assert failed.value.result is not None
    assert failed.value.result.error is not None
    assert "after 2 tries; last validation error: the answer is not JSON" in failed.value.result.error
    assert events[-1].type == "thread.run.failed" and events[-1].reason == "output_invalid"


async def test_tools_then_a_final_result_call(agent_client: AgentClient, worker) -> None:
    # A model without native structured output (scripted) answers with the
    # final_result tool, after a real tool; a wrong call is answered as an error result.
    model, seen = recording(lambda r: [
        calls(call("list_dir", {"path": "."})),
        calls(call("final_result", {"result": "maybe"})),
        calls(call("final_result", {"result": "escalate"})),
    ][len(seen) - 1])
    async with worker():
        handle = await agent_client.start(spec(model, tools=["list_dir"]), "Order A-1",
                                          output_type=Literal["refund", "escalate"])
        result = await handle.result()
        messages = await handle.messages()
    assert result.output == "escalate"
    assert result.final_text == '"escalate"'
    tool_results = [p for m in messages if m.role == "tool" for p in m.content]
    assert [r.name for r in tool_results] == ["list_dir", "final_result", "final_result"]
    assert {t.name for t in seen[0].tools} == {"list_dir", "final_result"}
    assert tool_results[1].is_error and "'maybe' is not one of ['refund', 'escalate']" in tool_results[1].content
    assert not tool_results[2].is_error


async def test_a_child_agent_in_a_users_workflow_returns_the_type(agent_client: AgentClient, worker,
                                                                  task_queue: str) -> None:
    from tests.helpers.fixtures.user_workflows import TypedTriageWorkflow

    model = script(reply("refund"), reply('{"decision": "escalate", "reason": "customer is a reseller"}'))
    async with worker(workflows=[TypedTriageWorkflow]):
        outcome = await agent_client.temporal.execute_workflow(
            TypedTriageWorkflow.run, model, id=f"typed-{uuid.uuid4().hex[:8]}", task_queue=task_queue)
    assert outcome == "escalate: customer is a reseller"


async def test_each_turn_of_a_thread_returns_a_typed_value(agent_client: AgentClient, worker) -> None:
    model = script(reply("3"), reply("[1, 2]"), reply('{"result": 7}'))
    thread = f"typed-{uuid.uuid4().hex[:8]}"
    async with worker():
        first = await agent_client.start(spec(model, output=int), "how many?", thread_id=thread)
        assert (await first.result()).output == 3
        second = await agent_client.send(thread, "and now?", output_type=int)
        assert (await second.result()).output == 7  # "[1, 2]" was fed back first
        events = [e async for e in second.events()]
        turn = await second.turn_state(2)
    ended = [e for e in events if e.type == "agent.turn.ended"]
    assert ended and ended[-1].output == 7
    assert turn is not None and turn.output == 7 and turn.steps == 2
