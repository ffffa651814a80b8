"""StepAccumulator and the deltas of a streamed answer, without a server."""

from __future__ import annotations

import json

import pytest

from agentloop.activities.providers.streaming import (
    StepAccumulator,
    message_deltas,
    parse_tool_arguments,
    tool_call_part,
)
from agentloop.shared.base.messages import Message, TextPart, ThinkingPart, ToolCallPart
from agentloop.shared.base.usage import Usage
from agentloop.shared.definition.activity_io import ModelRequest, ModelResponse, StreamDelta
from agentloop.testing import ScriptedChatModel, call, calls, reply


def recording() -> tuple[StepAccumulator, list[StreamDelta]]:
    received: list[StreamDelta] = []
    return StepAccumulator(received.append), received


# ---------------------------------------------------------------- text and thinking


def test_text_deltas_form_one_part_and_are_passed_on() -> None:
    accumulator, received = recording()

    for piece in ["Hel", "lo, ", "", "world."]:
        accumulator.add_text(piece)
    accumulator.set_finish_reason("stop", "stop")
    response = accumulator.finalize(model="m-1")

    assert response == ModelResponse(
        message=Message(role="assistant", content=[TextPart(text="Hello, world.")]),
        usage=Usage(requests=1),
        finish_reason="stop",
        raw_finish_reason="stop",
        model="m-1",
    )
    assert received == [
        StreamDelta(kind="text", text="Hel"),
        StreamDelta(kind="text", text="lo, "),
        StreamDelta(kind="text", text="world."),
    ]


def test_parts_keep_their_order_and_end_part_splits() -> None:
    accumulator, received = recording()

    accumulator.add_thinking("Think ")
    accumulator.add_thinking("hard.")
    accumulator.add_text("One.")
    accumulator.end_part()
    accumulator.add_text("Two.")
    accumulator.add_thinking("More.")
    response = accumulator.finalize()

    assert response.message.content == [
        ThinkingPart(text="Think hard."),
        TextPart(text="One."),
        TextPart(text="Two."),
        ThinkingPart(text="More."),
    ]
    assert [d.kind for d in received] == ["thinking", "thinking", "text", "text", "thinking"]


def test_signatures_attach_to_their_thinking_part() -> None:
    accumulator, received = recording()

    accumulator.add_thinking("First.")
    accumulator.add_thinking_signature("sig-")
    accumulator.add_thinking_signature("one")
    accumulator.end_part()
    accumulator.add_thinking_signature("sig-two")  # a signed block with no text
    accumulator.end_part()
    accumulator.add_thinking("Third.")
    response = accumulator.finalize()

    assert response.message.content == [
        ThinkingPart(text="First.", signature="sig-one"),
        ThinkingPart(text="", signature="sig-two"),
        ThinkingPart(text="Third."),
    ]
    assert received == [
        StreamDelta(kind="thinking", text="First."),
        StreamDelta(kind="thinking", text="Third."),
    ]


def test_an_empty_stream_is_an_empty_answer() -> None:
    response = StepAccumulator().finalize()

    assert response.message == Message(role="assistant", content=[])
    assert response.finish_reason == "other"
    assert response.raw_finish_reason is None
    assert response.usage == Usage(requests=1)


def test_usage_is_the_last_reported() -> None:
    accumulator = StepAccumulator()

    accumulator.set_usage(Usage(input_tokens=5, requests=1))
    accumulator.set_usage(Usage(input_tokens=10, output_tokens=3, cached_input_tokens=4, requests=1))

    assert accumulator.finalize().usage == Usage(
        input_tokens=10, output_tokens=3, cached_input_tokens=4, requests=1
    )


# ---------------------------------------------------------------- tool calls


def test_tool_calls_in_start_order_with_interleaved_arguments() -> None:
    accumulator, received = recording()

    accumulator.add_text("Checking.")
    accumulator.start_tool_call("a", "get_weather")
    accumulator.start_tool_call("b", "get_time")
    accumulator.add_tool_arguments("b", '{"zone": ')
    accumulator.add_tool_arguments("a", '{"city": "Paris"}')
    accumulator.add_tool_arguments("b", '"CET"}')
    accumulator.end_tool_call("b")
    accumulator.end_tool_call("a")
    accumulator.set_finish_reason("stop", "end_turn")
    response = accumulator.finalize()

    assert response.message.content == [
        TextPart(text="Checking."),
        ToolCallPart(id="a", name="get_weather", arguments={"city": "Paris"}),
        ToolCallPart(id="b", name="get_time", arguments={"zone": "CET"}),
    ]
    # Calls make the finish reason tool_calls; the provider's word is kept.
    assert response.finish_reason == "tool_calls"
    assert response.raw_finish_reason == "end_turn"
    assert [(d.kind, d.call_id) for d in received if d.kind != "text"] == [
        ("tool_call_start", "a"),
        ("tool_call_start", "b"),
        ("tool_call_delta", "b"),
        ("tool_call_delta", "a"),
        ("tool_call_delta", "b"),
        ("tool_call_end", "b"),
        ("tool_call_end", "a"),
    ]


def test_text_after_a_tool_call_is_a_new_part() -> None:
    accumulator = StepAccumulator()

    accumulator.add_text("Before.")
    accumulator.start_tool_call("a", "t")
    accumulator.add_text("After.")

    assert accumulator.finalize().message.content == [
        TextPart(text="Before."),
        ToolCallPart(id="a", name="t"),
        TextPart(text="After."),
    ]


def test_unended_tool_calls_are_finalized_and_their_end_passed_on() -> None:
    accumulator, received = recording()

    accumulator.start_tool_call("a", "t1")
    accumulator.add_tool_arguments("a", '{"x": 1}')
    accumulator.start_tool_call("b", "t2")
    accumulator.end_tool_call("b")
    response = accumulator.finalize()

    assert response.message.tool_calls == [
        ToolCallPart(id="a", name="t1", arguments={"x": 1}),
        ToolCallPart(id="b", name="t2"),
    ]
    assert [(d.kind, d.call_id) for d in received if d.kind == "tool_call_end"] == [
        ("tool_call_end", "b"),
        ("tool_call_end", "a"),
    ]
    # Finalizing again passes nothing more on.
    count = len(received)
    assert accumulator.finalize() == response
    assert len(received) == count


def test_end_with_an_unknown_id_ends_the_first_unfinished_call() -> None:
    accumulator, received = recording()

    accumulator.start_tool_call("a", "t1")
    accumulator.start_tool_call("b", "t2")
    accumulator.end_tool_call("nope")
    accumulator.end_tool_call(None)
    accumulator.end_tool_call()  # every call has ended: ignored

    assert [d.call_id for d in received if d.kind == "tool_call_end"] == ["a", "b"]


def test_arguments_with_an_unknown_id_go_to_the_latest_unfinished_call() -> None:
    accumulator, received = recording()

    accumulator.add_tool_arguments("x", '{"lost": true}')  # no call yet: dropped
    accumulator.start_tool_call("a", "t1")
    accumulator.start_tool_call("b", "t2")
    accumulator.add_tool_arguments(None, '{"to": "b"}')
    accumulator.end_tool_call("b")
    accumulator.add_tool_arguments("b", '{"to": "a"}')  # b ended: the latest unfinished is a

    assert accumulator.finalize().message.tool_calls == [
        ToolCallPart(id="a", name="t1", arguments={"to": "a"}),
        ToolCallPart(id="b", name="t2", arguments={"to": "b"}),
    ]
    assert [d.call_id for d in received if d.kind == "tool_call_delta"] == ["b", "a"]


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ('{"city": "Par', "not valid JSON"),
        ("city=Paris", "not valid JSON"),
        ('["Paris"]', "must be a JSON object, not an array"),
        ('"Paris"', "must be a JSON object, not a string"),
        ("3", "must be a JSON object, not a number"),
        ("true", "must be a JSON object, not a boolean"),
        ("null", "must be a JSON object, not null"),
    ],
)
def test_arguments_that_are_not_an_object_are_kept_with_an_error(raw: str, problem: str) -> None:
    accumulator = StepAccumulator()
    accumulator.start_tool_call("a", "t")
    for index in range(0, len(raw), 2):
        accumulator.add_tool_arguments("a", raw[index : index + 2])

    (call,) = accumulator.finalize().message.tool_calls

    assert call.arguments == {}
    assert call.raw_arguments == raw
    assert call.arguments_error is not None and problem in call.arguments_error


def test_empty_arguments_mean_no_arguments() -> None:
    assert tool_call_part("a", "t", "") == ToolCallPart(id="a", name="t", arguments={})
    assert tool_call_part("a", "t", "  \n") == ToolCallPart(id="a", name="t", arguments={})
    assert parse_tool_arguments('{"a": [1, 2]}') == ({"a": [1, 2]}, None)


def test_sink_errors_propagate() -> None:
    def failing(delta: StreamDelta) -> None:
        raise RuntimeError("sink broke")

    accumulator = StepAccumulator(failing)

    with pytest.raises(RuntimeError, match="sink broke"):
        accumulator.add_text("x")


# ---------------------------------------------------------------- deltas of a message


def test_message_deltas_replay_to_the_same_message() -> None:
    message = Message(
        role="assistant",
        content=[
            ThinkingPart(text="Let me think about the two cities."),
            TextPart(text="I will check the weather in Paris and Oslo."),
            ToolCallPart(id="a", name="get_weather", arguments={"city": "Paris", "days": [1, 2]}),
            ToolCallPart(id="b", name="noop"),
            ToolCallPart(id="c", name="broken", arguments_error="not JSON", raw_arguments="{oops"),
        ],
    )

    deltas = message_deltas(message)
    accumulator, received = recording()
    for delta in deltas:
        accumulator.feed(delta)
    rebuilt = accumulator.finalize().message

    assert received == deltas
    assert rebuilt.content[:2] == message.content[:2]
    assert rebuilt.tool_calls[:2] == message.tool_calls[:2]
    broken = rebuilt.tool_calls[2]
    assert broken.raw_arguments == "{oops" and broken.arguments_error is not None
    assert len([d for d in deltas if d.kind == "text"]) == 3
    b_deltas = [d for d in deltas if d.call_id == "b"]
    assert b_deltas[0].kind == "tool_call_start" and b_deltas[-1].kind == "tool_call_end"
    assert "".join(d.text for d in b_deltas) == "{}"


def test_message_deltas_of_short_and_empty_text() -> None:
    assert message_deltas(Message.assistant("ab"), pieces=5) == [
        StreamDelta(kind="text", text="a"),
        StreamDelta(kind="text", text="b"),
    ]
    assert message_deltas(Message.assistant("")) == []
    assert message_deltas(Message.user("not from the model"), pieces=1) == [
        StreamDelta(kind="text", text="not from the model")
    ]


# ---------------------------------------------------------------- the scripted model


def scripted_request() -> ModelRequest:
    return ModelRequest(model="scripted", messages=[Message.user("Weather?")])


async def test_scripted_model_streams_its_answer() -> None:
    model = ScriptedChatModel(
        [calls(call("get_weather", {"city": "Paris"}), call("get_time"), text="Checking both.")]
    )
    received: list[StreamDelta] = []

    response = await model.complete(scripted_request(), received.append)

    assert response.message.text == "Checking both."
    assert [c.id for c in response.message.tool_calls] == ["call_0_0", "call_0_1"]
    assert "".join(d.text for d in received if d.kind == "text") == "Checking both."
    assert len([d for d in received if d.kind == "text"]) > 1
    starts = [(d.call_id, d.name) for d in received if d.kind == "tool_call_start"]
    assert starts == [("call_0_0", "get_weather"), ("call_0_1", "get_time")]
    arguments = "".join(d.text for d in received if d.kind == "tool_call_delta" and d.call_id == "call_0_0")
    assert json.loads(arguments) == {"city": "Paris"}
    assert [d.call_id for d in received if d.kind == "tool_call_end"] == ["call_0_0", "call_0_1"]


async def test_scripted_model_keeps_given_call_ids_and_numbers_the_others_by_step() -> None:
    given = calls(call("get_weather", {"city": "Paris"}, id="mine"), call("get_time"))
    model = ScriptedChatModel([reply("first"), given])
    second_step = ModelRequest(model="scripted", messages=[Message.user("Weather?"), Message.assistant("first")])

    response = await model.complete(second_step)

    # The missing id is the call's place among the step's calls, as on a retry.
    assert [c.id for c in response.message.tool_calls] == ["mine", "call_1_1"]
    assert [c.id for c in given.message.tool_calls] == ["mine", ""]  # the script is not changed
    assert (await model.complete(second_step)) == response


async def test_scripted_model_returns_an_identified_answer_as_written() -> None:
    answer = calls(call("get_time", id="call_a")).model_copy(update={"usage": Usage(input_tokens=3, requests=1)})
    model = ScriptedChatModel(lambda request: answer)

    response = await model.complete(scripted_request())

    assert response == answer
    assert response.usage == Usage(input_tokens=3, requests=1)  # reported usage is kept, not estimated


async def test_scripted_model_answers_the_same_with_or_without_on_delta() -> None:
    model = ScriptedChatModel([reply("Hello there, how can I help?")])
    received: list[StreamDelta] = []

    streamed = await model.complete(scripted_request(), received.append)
    plain = await model.complete(scripted_request())

    assert streamed == plain
    assert "".join(d.text for d in received) == "Hello there, how can I help?"


async def test_scripted_model_streams_nothing_when_it_raises() -> None:
    model = ScriptedChatModel([RuntimeError("scripted failure")])
    received: list[StreamDelta] = []

    with pytest.raises(RuntimeError, match="scripted failure"):
        await model.complete(scripted_request(), received.append)
    assert received == []
