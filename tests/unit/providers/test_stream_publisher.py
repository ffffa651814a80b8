"""``DeltaPublisher``'s batching, against a recording stream client.

The publisher's way to a real run's stream is covered on a dev server by
``tests/server/loop/test_events.py``; here is what it hands to the stream client, and
when: merged batches, nothing at all for an answer that comes whole, the
first delta at once (leading edge), the reset of a retried
attempt, and a client that fails.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agentloop.activities.stream_publisher import DeltaPublisher
from agentloop.shared.base.usage import Usage
from agentloop.shared.definition.activity_io import StreamDelta
from agentloop.shared.runs.events import EVENTS_TOPIC, MessageDelta, MessageReset, ToolCallCreated, message_id


class RecordingClient:
    """The part of ``WorkflowStreamClient`` the publisher uses."""

    def __init__(self, fail: bool = False) -> None:
        self.topics: list[str] = []
        self.flushes: list[list[Any]] = []
        self.pending: list[Any] = []
        self.fail = fail

    def topic(self, name: str) -> RecordingClient:
        self.topics.append(name)
        return self

    def publish(self, event: Any) -> None:
        self.pending.append(event)

    async def flush(self) -> None:
        if self.fail:
            raise ConnectionError("the server is unreachable")
        self.flushes.append(self.pending)
        self.pending = []


def text(piece: str) -> StreamDelta:
    return StreamDelta(kind="text", text=piece)


async def test_an_answer_without_a_pause_publishes_nothing_and_makes_no_stream_client() -> None:
    client = RecordingClient()
    async with DeltaPublisher("run-1", 0, 1, batch_seconds=5.0, client=client) as publisher:
        for piece in ("Hel", "lo"):
            publisher.add(text(piece))
        publisher.add(StreamDelta(kind="usage", usage=Usage(input_tokens=3)))
    assert client.topics == [] and client.flushes == [] and publisher.published == 0


async def test_the_first_delta_goes_out_at_once_and_the_next_wait_for_the_window() -> None:
    client = RecordingClient()
    async with DeltaPublisher("run-1", 0, 1, batch_seconds=0.3, client=client) as publisher:
        publisher.add(text("Hel"))
        await asyncio.wait_for(until(lambda: len(client.flushes) == 1), 0.25)  # well within the window
        publisher.add(text("lo"))
        publisher.add(text(", you"))
        await asyncio.sleep(0.05)
        assert len(client.flushes) == 1  # gathered: a batch a window at most
        await asyncio.wait_for(until(lambda: len(client.flushes) == 2), 2.0)
        await asyncio.sleep(0.4)  # a quiet spell of more than a window
        publisher.add(text("!"))
        await asyncio.wait_for(until(lambda: len(client.flushes) == 3), 0.25)
    assert [[e.delta.text for e in batch] for batch in client.flushes[:3]] == [["Hel"], ["lo, you"], ["!"]]


async def test_an_answer_that_starts_with_a_tool_call_waits_for_the_window() -> None:
    client = RecordingClient()
    async with DeltaPublisher("run-1", 0, 1, batch_seconds=5.0, client=client) as publisher:
        publisher.add(StreamDelta(kind="tool_call_start", call_id="c1", name="read_file"))
        await asyncio.sleep(0.1)
        publisher.add(StreamDelta(kind="tool_call_delta", call_id="c1", text="{}"))
    assert client.flushes == [] and publisher.published == 0  # ended within the window: no signal


async def test_without_the_leading_edge_an_answer_within_one_window_publishes_nothing() -> None:
    client = RecordingClient()
    publisher = DeltaPublisher("run-1", 0, 1, batch_seconds=5.0, client=client)
    publisher.leading = False  # the fixed window of earlier releases
    async with publisher:
        publisher.add(text("Hel"))
        await asyncio.sleep(0.1)
        publisher.add(text("lo"))
    assert client.topics == [] and client.flushes == [] and publisher.published == 0


async def until(condition: Any) -> None:
    while not condition():
        await asyncio.sleep(0.005)


async def test_a_batch_merges_text_and_each_calls_arguments_and_keeps_arrival_times() -> None:
    client = RecordingClient()
    async with DeltaPublisher("run-1", 2, 1, batch_seconds=0.05, client=client) as publisher:
        publisher.add(text("Let me "))
        publisher.add(text("look."))
        publisher.add(StreamDelta(kind="tool_call_start", call_id="c1", name="read_file"))
        publisher.add(StreamDelta(kind="tool_call_delta", call_id="c1", text='{"path": '))
        publisher.add(StreamDelta(kind="tool_call_delta", call_id="c1", text='"a.txt"}'))
        publisher.add(StreamDelta(kind="tool_call_end", call_id="c1"))
        await asyncio.sleep(0.3)  # the batch goes out
        publisher.add(text("left behind"))  # the answer ends before its window does
    assert client.topics == [EVENTS_TOPIC]
    # The step's last flush sends what the client still holds, and not the
    # delta that came after the batch: the completed message carries it.
    batch, last = client.flushes
    assert last == []
    assert [type(event) for event in batch] == [MessageDelta, ToolCallCreated, MessageDelta]
    first, created, arguments = batch
    assert first.delta == StreamDelta(kind="text", text="Let me look.")
    assert (created.call_id, created.name) == ("c1", "read_file")
    assert arguments.delta == StreamDelta(kind="tool_call_delta", call_id="c1", text='{"path": "a.txt"}')
    assert {event.message_id for event in batch} == {message_id("run-1", 2)}
    assert first.time <= created.time <= arguments.time
    assert publisher.published == 3


async def test_a_retried_attempt_publishes_its_reset_even_without_deltas() -> None:
    client = RecordingClient()
    async with DeltaPublisher("run-1", 1, 2, batch_seconds=5.0, client=client):
        pass
    [[reset]] = client.flushes
    assert isinstance(reset, MessageReset) and reset.attempt == 2


async def test_a_failing_client_stops_publishing_and_the_step_goes_on(caplog: Any) -> None:
    client = RecordingClient(fail=True)
    async with DeltaPublisher("run-1", 0, 1, batch_seconds=0.02, client=client) as publisher:
        publisher.add(text("a"))
        await asyncio.sleep(0.2)
        publisher.add(text("b"))
        await asyncio.sleep(0.2)
    assert client.flushes == [] and publisher.published == 0
    assert "could not publish deltas" in caplog.text and caplog.text.count("could not publish") == 1
