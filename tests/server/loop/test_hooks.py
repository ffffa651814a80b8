"""Tool hooks (AgentSpec.tool_hooks): before_tool_call and on_tool_error,
inside the execute_tool activity, on a real dev server."""

from __future__ import annotations

import pytest

from agentloop import (
    AgentClient,
    AgentRunFailed,
    EndRun,
    Fallback,
    Override,
    Skip,
    ToolCallInfo,
    ToolContext,
    ToolError,
    before_tool_call,
    on_tool_error,
)
from agentloop.shared.base.errors import UserError
from agentloop.shared.runs.result import ToolStepFailed
from agentloop.testing import call, calls, reply, script
from agentloop.tools.hooks import Hook, run_hooks
from agentloop.tools.registry import ToolRegistry
from tests.helpers.agents import echo_results, spec


async def test_first_deciding_hook_wins_and_bad_answers_are_named() -> None:
    ran: list[str] = []

    async def execute():
        ran.append("tool")
        return "boom"

    first = Hook("a", "before_tool_call", lambda call, ctx: None)
    second = Hook("b", "before_tool_call", lambda call, ctx: Override("from b"))
    third = Hook("c", "before_tool_call", lambda call, ctx: Skip("from c"))
    decision, result = await run_hooks([first, second, third], ToolCallInfo("t"), None, execute, lambda r: None)
    assert decision == Override("from b") and result is None and ran == []
    fallback = Hook("f", "on_tool_error", lambda call, error, ctx: Fallback(f"instead of {error}"))
    decision, result = await run_hooks([first, fallback], ToolCallInfo("t"), None, execute, lambda r: r)
    assert decision == Fallback("instead of boom") and result == "boom"
    wrong = Hook("w", "before_tool_call", lambda call, ctx: Fallback("x"))
    with pytest.raises(TypeError, match="before_tool_call hook 'w' returned Fallback; return None, Skip or Override"):
        await run_hooks([wrong], ToolCallInfo("t"), None, execute, lambda r: None)
    registry = ToolRegistry()
    before_tool_call(lambda call, ctx: None, name="dup", registry=registry)
    with pytest.raises(UserError, match="already registered"):
        on_tool_error(lambda call, error, ctx: None, name="dup", registry=registry)


async def test_before_tool_call_skips_overrides_or_lets_run(
    agent_client: AgentClient, worker, registry: ToolRegistry
) -> None:
    ran: list[str] = []
    seen: list[tuple[str, str, str]] = []

    @registry.tool
    async def charge(amount: int, ctx: ToolContext) -> str:
        """Charge an amount."""
        ran.append(f"charge {amount}")
        seen.append((ctx.agent_name, ctx.model, ctx.idempotency_key))
        return f"charged {amount}"

    @before_tool_call(registry=registry)
    def limits(call: ToolCallInfo, ctx: ToolContext) -> Skip | Override | None:
        seen.append((call.agent_name, call.model, ctx.idempotency_key))
        if call.arguments.get("amount", 0) > 100:
            return Skip("amounts over 100 need a person")
        if call.arguments.get("amount") == 0:
            return Override({"charged": 0, "note": "nothing to do"})
        return None

    model = script(calls(call("charge", {"amount": 500}), call("charge", {"amount": 0}), call("charge", {"amount": 7})),
                   echo_results)
    async with worker():
        result = await agent_client.run(spec(model, name="billing", tools=["charge"], tool_hooks=["limits"],
                                             parallel_tool_calls=False), "charge")
    assert result.final_text == (
        'charge:amounts over 100 need a person | charge:{"charged": 0, "note": "nothing to do"}'
        " | charge:charged 7")
    assert ran == ["charge 7"]
    assert [c.metrics.get("hook") for c in result.report.steps[0].tool_calls] == ["skipped", "override", None]
    # Hooks and tools see the agent's name and model, and the call's idempotency key.
    assert {(name, m) for name, m, _ in seen} == {("billing", model)}
    assert seen[-2][2] == seen[-1][2] != ""


async def test_on_tool_error_gives_a_fallback_or_ends_the_run(
    agent_client: AgentClient, worker, registry: ToolRegistry
) -> None:
    @registry.tool
    def flaky(mode: str) -> str:
        """Fail."""
        raise ToolError(f"flaky is down ({mode})")

    @on_tool_error(registry=registry)
    async def recover(call: ToolCallInfo, error: str, ctx: ToolContext) -> Fallback | EndRun | None:
        if call.arguments["mode"] == "fatal":
            return EndRun(f"{call.tool_name} cannot go on: {error}")
        if call.arguments["mode"] == "soft":
            return Fallback("cached answer")
        return None

    model = script(calls(call("flaky", {"mode": "soft"}), call("flaky", {"mode": "plain"})), echo_results)
    async with worker():
        result = await agent_client.run(spec(model, tools=["flaky"], tool_hooks=["recover"]), "go")
        assert result.final_text == "flaky:cached answer | flaky:ERR Error: flaky is down (plain)"
        fallback = result.report.steps[0].tool_calls[0].metrics
        assert fallback["hook"] == "fallback" and fallback["error"] == "Error: flaky is down (soft)"

        fatal = script(calls(call("flaky", {"mode": "fatal"})), reply("unreachable"))
        with pytest.raises(ToolStepFailed) as caught:
            await agent_client.run(spec(fatal, tools=["flaky"], tool_hooks=["recover"],
                                        max_consecutive_failed_tool_steps=5), "go")
    assert caught.value.reason == "tool_error"
    assert caught.value.result.error == (
        "a tool hook ended the run after flaky failed: flaky cannot go on: Error: flaky is down (fatal)")


async def test_a_hook_that_raises_is_an_error_result(agent_client: AgentClient, worker, registry: ToolRegistry) -> None:
    @before_tool_call(registry=registry)
    def buggy(call: ToolCallInfo, ctx: ToolContext) -> None:
        raise RuntimeError("hook bug")

    model = script(calls(call("list_dir", {"path": "."})), echo_results)
    async with worker():
        result = await agent_client.run(spec(model, tools=["list_dir"], tool_hooks=["buggy"],
                                             max_consecutive_failed_tool_steps=2), "go")
    assert result.final_text == "list_dir:ERR A tool hook failed for 'list_dir': RuntimeError: hook bug"


async def test_a_hook_the_worker_lacks_fails_the_run_at_start(
    agent_client: AgentClient, worker, registry: ToolRegistry
) -> None:
    before_tool_call(lambda call, ctx: None, name="audit", registry=registry)
    async with worker():
        with pytest.raises(AgentRunFailed) as caught:
            await agent_client.run(spec(script(reply("x")), tools=["list_dir"], tool_hooks=["audit", "audti"]), "hi")
    assert caught.value.result.error == (
        "the spec names tool hook 'audti' that the tools worker does not have (it has: audit); register them with "
        "agentloop.before_tool_call or agentloop.on_tool_error in a module the tools worker imports, or remove them "
        "from AgentSpec.tool_hooks")
    assert caught.value.result.usage.requests == 0
