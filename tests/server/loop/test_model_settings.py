"""tool_choice and thinking: the spec's checks, each provider's mapping,
and runs whose requests reach local provider servers through the real SDKs."""

from __future__ import annotations

import pytest

from agentloop import AgentClient, AgentRunFailed, AgentSpec
from agentloop.activities.providers.anthropic_model import DEFAULT_MAX_TOKENS, to_anthropic_request
from agentloop.activities.providers.openai_model import to_openai_request
from agentloop.shared.base.messages import Message
from agentloop.shared.base.model_settings import ThinkingConfig, anthropic_tool_choice
from agentloop.shared.definition.activity_io import ModelRequest, ToolDefinition
from agentloop.testing import reply, script
from tests.helpers.servers.provider_servers import (
    AnthropicServer,
    OpenAIServer,
    ScriptedResponse,
    anthropic_message,
    anthropic_models,
    openai_completion,
    openai_models,
)

TOOL = ToolDefinition(name="list_dir", parameters={"type": "object", "properties": {}})


def request(**kw) -> ModelRequest:
    return ModelRequest(model="m", messages=[Message.user("hi")], tools=[TOOL], **kw)


def test_each_provider_says_tool_choice_and_thinking_its_way() -> None:
    openai = to_openai_request(request(tool_choice="list_dir", thinking=ThinkingConfig(budget_tokens=10_000)))
    assert openai["tool_choice"] == {"type": "function", "function": {"name": "list_dir"}}
    assert openai["reasoning_effort"] == "medium"
    assert to_openai_request(request(tool_choice="required"))["tool_choice"] == "required"
    assert "tool_choice" not in to_openai_request(request()) and "reasoning_effort" not in to_openai_request(request())

    anthropic = to_anthropic_request(request(tool_choice="none", thinking=ThinkingConfig(effort="low")))
    assert anthropic["tool_choice"] == {"type": "none"}
    assert anthropic["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert anthropic["max_tokens"] == DEFAULT_MAX_TOKENS  # above the budget already
    big = to_anthropic_request(request(thinking=ThinkingConfig(effort="high")))
    assert big["thinking"]["budget_tokens"] == 24576 and big["max_tokens"] == 24576 + DEFAULT_MAX_TOKENS
    assert anthropic_tool_choice("required", parallel=False) == {"type": "any", "disable_parallel_tool_use": True}
    assert anthropic_tool_choice("list_dir", parallel=True) == {"type": "tool", "name": "list_dir"}
    assert anthropic_tool_choice(None, parallel=True) is None
    assert anthropic_tool_choice(None, parallel=False) == {"type": "auto", "disable_parallel_tool_use": True}


async def test_openai_run_sends_tool_choice_and_reasoning_effort(agent_client: AgentClient, worker) -> None:
    with OpenAIServer() as server:
        server.enqueue(ScriptedResponse(json_body=openai_completion(content="done")))
        spec = AgentSpec(model="openai:o4-mini", tools=["list_dir"], tool_choice="none",
                         thinking=ThinkingConfig(effort="high"), heartbeat_timeout_seconds=5)
        async with worker(models=openai_models(server)):
            result = await agent_client.run(spec, "hi")
        body = server.requests[0].json
    assert result.final_text == "done"
    assert body["tool_choice"] == "none" and body["reasoning_effort"] == "high"
    assert body["tools"][0]["function"]["name"] == "list_dir"


async def test_anthropic_run_sends_tool_choice_and_thinking(agent_client: AgentClient, worker) -> None:
    with AnthropicServer() as server:
        server.enqueue(ScriptedResponse(json_body=anthropic_message([{"type": "text", "text": "done"}])))
        spec = AgentSpec(model="anthropic:claude-test", tools=["list_dir"], tool_choice="list_dir",
                         parallel_tool_calls=False, heartbeat_timeout_seconds=5)
        thinking = AgentSpec(model="anthropic:claude-test", thinking={"budget_tokens": 5000}, max_tokens=1000)
        server.enqueue(ScriptedResponse(json_body=anthropic_message([{"type": "text", "text": "thought"}])))
        async with worker(models=anthropic_models(server)):
            result = await agent_client.run(spec, "hi")
            thought = await agent_client.run(thinking, "think")
        first, second = (r.json for r in server.requests)
    assert result.final_text == "done" and thought.final_text == "thought"
    assert first["tool_choice"] == {"type": "tool", "name": "list_dir", "disable_parallel_tool_use": True}
    assert "thinking" not in first
    assert second["thinking"] == {"type": "enabled", "budget_tokens": 5000}
    assert second["max_tokens"] == 5000 + DEFAULT_MAX_TOKENS and "tool_choice" not in second


async def test_a_tool_choice_naming_no_tool_of_the_run_fails_it_at_start(agent_client: AgentClient, worker) -> None:
    async with worker():
        with pytest.raises(AgentRunFailed) as caught:
            await agent_client.run(AgentSpec(model=script(reply("x")), tools=["list_dir"], tool_choice="lst_dir"), "hi")
    assert caught.value.result.error.startswith("tool_choice names 'lst_dir', which is not one of the run's tools")
    assert caught.value.result.usage.requests == 0
