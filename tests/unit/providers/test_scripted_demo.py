"""The offline demo model (``scripted:demo``): each message gets its own
answer, in a thread's later turns too."""

from __future__ import annotations

from agentloop.activities.providers.scripted_model import get_scripted_model
from agentloop.shared.base.messages import Message, ToolResultPart
from agentloop.shared.definition.activity_io import ModelRequest


async def answer(messages: list[Message]) -> Message:
    request = ModelRequest(model="demo", messages=messages)
    return (await get_scripted_model("demo").complete(request)).message


async def play(messages: list[Message], listing: str, file_text: str) -> list[Message]:
    """One turn of the demo: it lists, reads, reports (tools answered here)."""
    for result in (listing, file_text, None):
        message = await answer(messages)
        messages.append(message)
        if result is None:
            break
        call = message.tool_calls[0]
        messages.append(Message(role="tool", content=[ToolResultPart(id=call.id, name=call.name, content=result)]))
    return messages


async def test_each_turn_answers_its_own_message() -> None:
    listing = "README.md\nnotes.txt\n"
    messages = await play([Message.user("What is in this workspace?")], listing, "1\t# notes\n")
    assert "What is in this workspace?" in messages[-1].text

    messages.append(Message.user("And what does notes.txt say?"))
    first = await answer(messages)
    assert [c.name for c in first.tool_calls] == ["list_dir"]   # it looks again, for this message
    messages = await play(messages, listing, "1\tbuy milk\n")
    final = messages[-1].text
    assert "And what does notes.txt say?" in final and "What is in this workspace?" not in final
    assert "notes.txt" in final and '"buy milk"' in final
    reads = [c for m in messages for c in m.tool_calls if c.name == "read_file"]
    assert reads[-1].arguments["file_path"] == "notes.txt"   # the file the message names
