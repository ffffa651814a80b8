"""Guardrails (AgentSpec.guardrails): pure decisions, and runs on a real dev
server with function guardrails and LLM judges (scripted models)."""

from __future__ import annotations

import pytest

from agentloop import AgentClient, AgentRunFailed, GuardrailContext, GuardrailResult, guardrail, llm_judge
from agentloop.shared.runs.result import GuardrailTripped
from agentloop.testing import call, calls, reply, script, script_every_step
from agentloop.tools.guardrails import (
    guardrails_of,
)
from agentloop.tools.registry import ToolRegistry
from tests.helpers.agents import spec


async def events_of(agent_client: AgentClient, run_id: str) -> list:
    return [e async for e in agent_client.events(run_id)]


# Pure decisions ---------------------------------------------------------------------


# Runs --------------------------------------------------------------------------------


async def test_input_tripwire_ends_the_run_before_the_model_is_asked(
    agent_client: AgentClient, worker, registry: ToolRegistry
) -> None:
    seen: list[GuardrailContext] = []

    @guardrail(stage="input", registry=registry)
    def no_card_numbers(ctx: GuardrailContext) -> GuardrailResult:
        seen.append(ctx)
        if "4111 1111 1111 1111" in ctx.text:
            return GuardrailResult.trip("the message holds a card number", severity="critical")
        return GuardrailResult.ok()

    model = script(reply("never said"))
    async with worker():
        handle = await agent_client.start(spec(model, name="payments", guardrails=["no_card_numbers"]),
                                          "charge 4111 1111 1111 1111 please")
        with pytest.raises(GuardrailTripped) as caught:
            await handle.result()
        events = await events_of(agent_client, handle.run_id)
    result = caught.value.result
    assert caught.value.reason == "guardrail" and result.reason == "guardrail"
    assert result.final_text == "the message holds a card number"
    assert "guardrail no_card_numbers (input) tripped: the message holds a card number" in result.error
    assert result.usage.requests == 0  # the model was never asked
    (triggered,) = [e for e in events if e.type == "agent.guardrail.triggered"]
    assert (triggered.name, triggered.stage, triggered.tripwire, triggered.severity) == (
        "no_card_numbers", "input", True, "critical")
    assert events[-1].type == "thread.run.failed" and events[-1].reason == "guardrail"
    assert result.report.steps[0].guardrails[0].tripwire
    assert seen[0].agent_name == "payments" and seen[0].model == model and seen[0].step == 0


async def test_failures_without_tripwire_are_events_and_report_entries(
    agent_client: AgentClient, worker, registry: ToolRegistry
) -> None:
    checked: list[tuple[str, str]] = []

    @guardrail(stage="output", registry=registry)
    async def no_shouting(ctx: GuardrailContext) -> GuardrailResult:
        checked.append(("output", ctx.text))
        if ctx.messages[0].text.isupper():
            return GuardrailResult.fail("the answer shouts", severity="low")
        return GuardrailResult.ok()

    @guardrail(stage="input", registry=registry)
    def note_input(ctx: GuardrailContext) -> GuardrailResult:
        checked.append(("input", ctx.text))
        return GuardrailResult.ok()

    model = script(calls(call("list_dir", {"path": "."}), text="LOOKING"), reply("All done."))
    async with worker():
        handle = await agent_client.start(spec(model, tools=["list_dir"], guardrails=["note_input", "no_shouting"]),
                                          "look around")
        result = await handle.result()
        events = await events_of(agent_client, handle.run_id)
    assert result.status == "completed" and result.final_text == "All done."
    first, second = result.report.steps
    assert [(g.name, g.stage, g.tripwire, g.reason, g.severity) for g in first.guardrails] == [
        ("no_shouting", "output", False, "the answer shouts", "low")]
    assert second.guardrails == []
    triggered = [e for e in events if e.type == "agent.guardrail.triggered"]
    assert [(e.name, e.tripwire, e.step) for e in triggered] == [("no_shouting", False, 0)]
    # Input guardrails saw the input, then the tool results; output ones each response.
    stages = [s for s, _ in checked]
    assert stages == ["input", "output", "input", "output"]
    assert checked[0][1] == "user: look around"
    assert checked[2][1].startswith("tool: [tool result list_dir]")


async def test_llm_judge_tripwire_on_the_response(agent_client: AgentClient, worker, registry: ToolRegistry) -> None:
    asked: list[str] = []

    def judge(request):
        asked.append(request.messages[0].text)
        if "idiot" in request.messages[0].text:
            return reply('{"pass": false, "tripwire": true, "reason": "the answer insults the user", '
                         '"severity": "high"}')
        return reply('{"pass": true, "tripwire": false, "reason": "", "severity": "info"}')

    llm_judge("polite", stage="output", model=script_every_step(judge), prompt="Fail rude answers.",
              registry=registry)
    model = script(reply("Only an idiot would ask that."))
    async with worker():
        handle = await agent_client.start(spec(model, guardrails=["polite"]), "what is 2+2?")
        with pytest.raises(GuardrailTripped) as caught:
            await handle.result()
        messages = await handle.messages()
    result = caught.value.result
    assert result.final_text == "the answer insults the user"
    assert "guardrail polite (output) tripped" in result.error
    assert len(asked) == 1 and "Only an idiot" in asked[0]
    # The response that tripped did not join the conversation.
    assert [m.role for m in messages] == ["user"]


async def test_a_judge_that_fails_is_retried_then_the_run_fails_clearly(
    agent_client: AgentClient, worker, registry: ToolRegistry
) -> None:
    attempts: list[int] = []

    def broken_judge(request):
        attempts.append(1)
        return reply("I would rather not say.")  # not the JSON asked for

    llm_judge("strict", stage="input", model=script_every_step(broken_judge), prompt="Judge.", registry=registry)
    model = script(reply("unreachable"))
    async with worker():
        handle = await agent_client.start(spec(model, guardrails=["strict"], llm_max_attempts=2), "hello")
        with pytest.raises(AgentRunFailed) as caught:
            await handle.result()
    assert caught.value.reason == "error"
    error = caught.value.result.error
    assert error.startswith("guardrail strict (input) could not run after 2 attempts: LLM judge strict")
    assert "holds no JSON object" in error
    assert len(attempts) == 2
    assert caught.value.result.usage.requests == 0


async def test_a_guardrail_the_worker_lacks_fails_the_run_with_a_sentence(
    agent_client: AgentClient, worker, registry: ToolRegistry
) -> None:
    guardrail(lambda ctx: GuardrailResult.ok(), stage="input", name="known", registry=registry)
    async with worker():
        with pytest.raises(AgentRunFailed) as caught:
            await agent_client.run(spec(script(reply("x")), guardrails=["known", "typo"]), "hi")
    error = caught.value.result.error
    assert "the spec names guardrail 'typo' that the worker does not have (it has: known)" in error
    assert guardrails_of(registry).keys() == {"known"}


async def test_judge_tokens_count_in_the_runs_usage_cost_and_budget(
    agent_client: AgentClient, worker, registry: ToolRegistry
) -> None:
    from agentloop import Budget
    from agentloop.shared.base.usage import Usage
    from agentloop.shared.definition.pricing import ModelPrice
    from agentloop.shared.runs.result import CostLimitExceeded

    judge_usage = Usage(input_tokens=1000, output_tokens=100, requests=1)

    def judge(request):
        return reply('{"pass": true}').model_copy(update={"usage": judge_usage})

    judge_model = script_every_step(judge)
    llm_judge("judge_in", stage="input", model=judge_model, prompt="Judge.", registry=registry)
    llm_judge("judge_out", stage="output", model=judge_model, prompt="Judge.", registry=registry)

    def answer(request):
        return reply("4").model_copy(update={"usage": Usage(input_tokens=10, output_tokens=1, requests=1)})

    main_model = script_every_step(answer)
    # The judge's tokens are priced at the judge's price, the run's at its own.
    prices = {judge_model: ModelPrice(input_per_mtok=1000, output_per_mtok=10_000, cached_input_per_mtok=0),
              main_model: ModelPrice(input_per_mtok=1, output_per_mtok=1, cached_input_per_mtok=0)}
    async with worker():
        result = await agent_client.run(spec(main_model, guardrails=["judge_in", "judge_out"],
                                             budget=Budget(prices=prices)), "what is 2+2?")
        with pytest.raises(CostLimitExceeded) as over:
            await agent_client.run(spec(main_model, guardrails=["judge_in", "judge_out"],
                                        budget=Budget(max_total_tokens=1000)), "what is 2+2?")
    report = result.report
    assert report.total_usage == Usage(input_tokens=2010, output_tokens=201, requests=3)
    assert report.steps[0].usage == Usage(input_tokens=10, output_tokens=1, requests=1)  # the step's own call
    assert report.total_cost_usd == pytest.approx(2 * (1000 * 1000 + 100 * 10_000) / 1e6 + (10 + 1) / 1e6)
    assert "2,211 tokens (input plus output), over AgentSpec.budget.max_total_tokens=1,000" in over.value.result.error
    assert over.value.result.usage.total_tokens == 2211
