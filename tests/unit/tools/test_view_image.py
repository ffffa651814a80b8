"""view_image without a server: media types, and JSON of messages without
images (the image reaching each provider: tests/server/tools/test_view_image.py)."""


from __future__ import annotations

from agentloop.activities.builtin_tools.image_tool import image_media_type
from agentloop.activities.providers.anthropic_model import to_anthropic_messages
from agentloop.activities.providers.openai_model import to_openai_messages
from agentloop.shared.base.messages import ToolResultPart
from tests.helpers.tools import PNG, PNG_B64, image_tool_message


def test_media_types_and_json_without_images() -> None:
    assert image_media_type(PNG[:16]) == "image/png"
    assert image_media_type(b"\xff\xd8\xff\xe0") == "image/jpeg"
    assert image_media_type(b"RIFF\x00\x00\x00\x00WEBPVP8 ") == "image/webp"
    assert image_media_type(b"hello") is None
    # Results without images serialise as before (transcript hashes unchanged).
    assert "images" not in ToolResultPart(id="a", content="x").model_dump()
    part = ToolResultPart.model_validate_json(image_tool_message().content[0].model_dump_json())
    assert part.images[0].data == PNG_B64


def test_each_provider_puts_the_image_where_it_takes_one() -> None:
    tool, user = to_openai_messages("", [image_tool_message()])
    assert tool == {"role": "tool", "tool_call_id": "c1", "content": "(attached)"}
    assert user["role"] == "user"
    assert user["content"][1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}}
    (turn,) = to_anthropic_messages([image_tool_message()])
    result = turn["content"][0]
    assert result["type"] == "tool_result" and result["content"][0] == {"type": "text", "text": "(attached)"}
    assert result["content"][1] == {"type": "image",
                                    "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}}
