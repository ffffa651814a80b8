"""view_image: an image from the workspace reaches the model as an image
part of the tool's result, on both providers' wire formats (local provider
servers, real SDKs)."""

from __future__ import annotations

import base64
import json
from pathlib import Path


from agentloop import AgentClient, AgentSpec
from agentloop.activities.anthropic_model import to_anthropic_messages
from agentloop.activities.image_tool import image_media_type
from agentloop.activities.openai_model import to_openai_messages
from agentloop.messages import ImagePart, Message, ToolResultPart
from agentloop.testing import call, calls, last_tool_results, reply, script
from tests.helpers.provider_servers import (
    AnthropicServer,
    OpenAIServer,
    ScriptedResponse,
    anthropic_message,
    anthropic_models,
    openai_completion,
    openai_models,
    openai_tool_call,
)

#: A 1x1 transparent PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=")
PNG_B64 = base64.b64encode(PNG).decode()


def spec(model: str, **kw) -> AgentSpec:
    return AgentSpec(model=model, tools=["view_image"], heartbeat_timeout_seconds=5, **kw)


def tool_message() -> Message:
    image = ImagePart(media_type="image/png", data=PNG_B64)
    return Message(role="tool", content=[ToolResultPart(id="c1", name="view_image", content="(attached)",
                                                        images=[image])])


def test_media_types_and_json_without_images() -> None:
    assert image_media_type(PNG[:16]) == "image/png"
    assert image_media_type(b"\xff\xd8\xff\xe0") == "image/jpeg"
    assert image_media_type(b"RIFF\x00\x00\x00\x00WEBPVP8 ") == "image/webp"
    assert image_media_type(b"hello") is None
    # Results without images serialise as before (transcript hashes unchanged).
    assert "images" not in ToolResultPart(id="a", content="x").model_dump()
    assert ToolResultPart.model_validate_json(tool_message().content[0].model_dump_json()).images[0].data == PNG_B64


def test_each_provider_puts_the_image_where_it_takes_one() -> None:
    tool, user = to_openai_messages("", [tool_message()])
    assert tool == {"role": "tool", "tool_call_id": "c1", "content": "(attached)"}
    assert user["role"] == "user"
    assert user["content"][1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}}
    (turn,) = to_anthropic_messages([tool_message()])
    result = turn["content"][0]
    assert result["type"] == "tool_result" and result["content"][0] == {"type": "text", "text": "(attached)"}
    assert result["content"][1] == {"type": "image",
                                    "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}}


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
