"""The hub's merge for a subscriber that takes live text only once it
follows that part of the run (``accept``, the A2A door's turn): live text
it refused is caught up when it takes it, or left to the history once the
message is complete; never counted as shown. A fake reader stands in for
the run (no server)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from agentloop.server.streams.hub import RunHub
from agentloop.server.streams.live import Seen
from agentloop.shared.base.messages import Message, TextPart
from agentloop.shared.definition.activity_io import StreamDelta
from agentloop.shared.runs.events import (
    MessageCompleted,
    MessageDelta,
    MessageReset,
    RunCompleted,
    StepCreated,
)

T = datetime(2026, 1, 1, tzinfo=UTC)


class History:
    """A run whose history events the test hands out one by one."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Any] = asyncio.Queue()

    async def events(self, run_id: str, start: int, **_: Any) -> Any:
        while True:
            yield await self.queue.get()


def delta(mid: str, text: str, seq: int | None = None) -> MessageDelta:
    return MessageDelta(run_id="r", time=T, seq=seq, message_id=mid, attempt=1,
                        delta=StreamDelta(kind="text", text=text))


def completed(mid: str, text: str, seq: int) -> MessageCompleted:
    return MessageCompleted(run_id="r", time=T, seq=seq, message_id=mid,
                            message=Message(role="assistant", content=[TextPart(text=text)]))


class Reader:
    """A subscriber that takes text only after step 1 began (a later turn)."""

    def __init__(self) -> None:
        self.started = False
        self.seen: list[Any] = []

    def accept(self, event: Any) -> bool:
        return self.started

    async def read(self, hub: RunHub) -> None:
        async for event in hub.subscribe("r", 0, live=True, accept=self.accept):
            self.started = self.started or (isinstance(event, StepCreated) and event.step == 1)
            if self.started:
                self.seen.append(event)

    def text(self) -> str:
        """What it shows: deltas appended, a reset clearing."""
        shown = ""
        for event in self.seen:
            shown = "" if isinstance(event, MessageReset) else \
                shown + event.delta.text if isinstance(event, MessageDelta) else shown
        return shown


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_live_text_refused_is_caught_up_once_taken_and_an_earlier_message_is_not() -> None:
    history = History()
    hub = RunHub(history, live=True)  # type: ignore[arg-type]
    reader = Reader()
    task = asyncio.create_task(reader.read(hub))
    await settle()
    # Step 0's message streams live before the reader follows; it completes.
    hub.post_live("r", [(delta("r:msg:0", "old"), 0)])
    for event in (StepCreated(run_id="r", time=T, seq=0), delta("r:msg:0", "old", 1), completed("r:msg:0", "old", 2)):
        history.queue.put_nowait(event)
    await settle()
    # Step 1's message: live text before the reader read that step 1 began...
    hub.post_live("r", [(delta("r:msg:1", "Hel"), 0)])
    await settle()
    assert reader.seen == []
    history.queue.put_nowait(StepCreated(run_id="r", time=T, seq=3, step=1))
    await settle()  # ...shown once it does, without waiting for the next delta
    assert reader.text() == "Hel" and [type(e).__name__ for e in reader.seen][-2:] == ["MessageReset", "MessageDelta"]
    hub.post_live("r", [(delta("r:msg:0", "old"), 0), (delta("r:msg:1", "lo"), 3)])  # a late one of step 0
    for event in (delta("r:msg:1", "Hello", 4), completed("r:msg:1", "Hello", 5),
                  RunCompleted(run_id="r", time=T, seq=6, final_text="Hello")):
        history.queue.put_nowait(event)
    await asyncio.wait_for(task, 5)
    await hub.close()
    assert reader.text() == "Hello"  # once; "old" never, as it was complete before the reader followed
    assert sum(isinstance(e, MessageReset) for e in reader.seen) == 1
    assert any(isinstance(e, Seen) and e.seq == 4 for e in reader.seen)  # the history's delta: its id alone
