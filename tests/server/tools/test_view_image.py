"""view_image: an image from the workspace reaches the model as an image
part of the tool's result, on both providers' wire formats (local provider
servers, real SDKs)."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

from agentloop import AgentClient
from agentloop.testing import call, calls, last_tool_results, reply, script
from tests.helpers import agents
from tests.helpers.servers.provider_servers import (
    AnthropicServer,
    OpenAIServer,
    ScriptedResponse,
    anthropic_message,
    anthropic_models,
    openai_completion,
    openai_models,
    openai_tool_call,
)
from tests.helpers.tools import PNG, PNG_B64

spec = partial(agents.spec, tools=["view_image"], default_permission="auto")



async def test_view_image_in_a_run_and_its_errors(agent_client: AgentClient, worker, workspace: Path) -> None:
    (workspace / "dot.png").write_bytes(PNG)
    (workspace / "notes.txt").write_text("not an image")

    def answer(request):
        return reply(json.dumps([{"content": r.content, "images": [i.media_type for i in r.images], "error": r.is_error}
                                 for r in last_tool_results(request)]))

    model = script(calls(call("view_image", {"file_path": "dot.png"}), call("view_image", {"file_path": "notes.txt"}),
                         call("view_image", {"file_path": "../x.png"})), answer)
    async with worker():
        result = await agent_client.run(spec(model, default_permission="allow",
                                             max_consecutive_failed_tool_steps=2), "look")
    seen = json.loads(result.final_text)
    assert seen[0] == {"content": "(the image image/png is attached)", "images": ["image/png"], "error": False}
    assert seen[1]["error"] and "is not a PNG, JPEG, GIF or WebP image" in seen[1]["content"]
    assert seen[2]["error"] and "outside the workspace" in seen[2]["content"]


async def test_openai_wire_format(agent_client: AgentClient, worker, workspace: Path) -> None:
    (workspace / "dot.png").write_bytes(PNG)
    with OpenAIServer() as server:
        server.enqueue(
            ScriptedResponse(json_body=openai_completion(
                tool_calls=[openai_tool_call("call_1", "view_image", '{"file_path": "dot.png"}')],
                finish_reason="tool_calls")),
            ScriptedResponse(json_body=openai_completion(content="a dot")),
        )
        async with worker(models=openai_models(server)):
            result = await agent_client.run(spec("openai:gpt-test", default_permission="allow"), "look")
        second = server.requests[1].json["messages"]
    assert result.final_text == "a dot"
    tool, images = second[-2:]
    assert tool["role"] == "tool" and tool["tool_call_id"] == "call_1"
    assert images["role"] == "user"
    assert images["content"][1]["image_url"]["url"] == f"data:image/png;base64,{PNG_B64}"


async def test_anthropic_wire_format(agent_client: AgentClient, worker, workspace: Path) -> None:
    (workspace / "dot.png").write_bytes(PNG)
    with AnthropicServer() as server:
        server.enqueue(
            ScriptedResponse(json_body=anthropic_message(
                [{"type": "tool_use", "id": "toolu_1", "name": "view_image", "input": {"file_path": "dot.png"}}],
                stop_reason="tool_use")),
            ScriptedResponse(json_body=anthropic_message([{"type": "text", "text": "a dot"}])),
        )
        async with worker(models=anthropic_models(server)):
            result = await agent_client.run(spec("anthropic:claude-test", default_permission="allow"), "look")
        last = server.requests[1].json["messages"][-1]
    assert result.final_text == "a dot"
    block = last["content"][0]
    assert block["type"] == "tool_result" and block["tool_use_id"] == "toolu_1"
    image = next(c for c in block["content"] if c["type"] == "image")
    assert image["source"] == {"type": "base64", "media_type": "image/png", "data": PNG_B64}
