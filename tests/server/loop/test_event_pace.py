"""Deltas at the provider's pace, on a real dev server: the first delta of a
message is published without waiting for the batch window, and a reader
caught up can wait in the workflow (the Workflow Streams long-poll update)
instead of polling: at once when the offset exists, when it arrives, empty
at the bound, and polling for a run that does not know the update."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from temporalio import workflow
from temporalio.client import Client
from temporalio.contrib.workflow_streams import PollInput, PollResult
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from agentloop import AgentClient, AgentSpec
from agentloop.activities.providers.models import ModelResolver
from agentloop.client.events import EventReader
from agentloop.server.streams.hub import RunHub
from agentloop.shared.base.messages import Message, TextPart
from agentloop.shared.base.usage import Usage
from agentloop.shared.definition.activity_io import DeltaSink, ModelRequest, ModelResponse, StreamDelta
from agentloop.shared.runs.events import MessageDelta
from agentloop.testing import reply, script
from tests.server.loop.test_events import check_invariants, collect


class HeldModel:
    """Streams "Hel", then holds its second chunk until ``release`` is set."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def complete(self, request: ModelRequest, on_delta: DeltaSink | None = None) -> ModelResponse:
        assert on_delta is not None
        on_delta(StreamDelta(kind="text", text="Hel"))
        await asyncio.wait_for(self.release.wait(), 60)
        on_delta(StreamDelta(kind="text", text="lo"))
        return ModelResponse(message=Message(role="assistant", content=[TextPart(text="Hello")]),
                             usage=Usage(requests=1), finish_reason="stop")


async def test_the_first_delta_is_published_without_waiting_for_the_batch_window(
        agent_client: AgentClient, worker) -> None:
    model = HeldModel()
    models = ModelResolver({"openai": lambda _provider, _name: model})
    async with worker(models=models):
        # A window of 10 s: a first delta that waited for it would miss the 5 s below.
        handle = await agent_client.start(AgentSpec(model="openai:gpt-test", stream_batch_seconds=10), "hi")
        events = []

        async def first_delta() -> MessageDelta:
            async for event in handle.events(poll_interval=0.02):
                events.append(event)
                if isinstance(event, MessageDelta):
                    return event
            raise AssertionError("the run ended without a delta")

        try:
            delta = await asyncio.wait_for(first_delta(), 5)
        finally:
            model.release.set()  # the model's second chunk comes only now
        assert delta.delta.text == "Hel"
        assert (await handle.result()).final_text == "Hello"
        whole = await collect(agent_client, handle.run_id)
    check_invariants(whole)
    assert [e.delta.text for e in whole if isinstance(e, MessageDelta)] == ["Hel"]


async def test_waiting_for_an_offset(agent_client: AgentClient, worker) -> None:
    release = asyncio.Event()

    async def slow(request):
        await release.wait()
        return reply("ok")

    async with worker():
        handle = await agent_client.start(AgentSpec(model=script(slow), stream_deltas=False), "go")
        reader = EventReader(handle.workflow_handle, wait=True)
        events = await collect(agent_client, handle.run_id, limit=3)  # created, status, step: then it waits
        # An offset that exists: at once.
        assert await asyncio.wait_for(reader.wait_past(0, bound=30), 10)
        end = events[-1].seq + 1
        while await reader.wait_past(end, bound=0.3):  # to the stream's end (the step may add one)
            end += 1
        # Nothing past it: empty (False) at the bound, and the same update is joined when asked again.
        assert not await reader.wait_past(end, bound=0.3)
        waiting = asyncio.ensure_future(reader.wait_past(end, bound=30))
        await asyncio.sleep(0.3)
        assert not waiting.done()
        release.set()  # the step completes: events past the offset arrive
        assert await asyncio.wait_for(waiting, 20)
        assert reader.wait  # still waiting, not polling
        await handle.result()
    history = await handle.workflow_handle.fetch_history()
    accepted = [e for e in history.events if e.HasField("workflow_execution_update_accepted_event_attributes")]
    ids = [e.workflow_execution_update_accepted_event_attributes.protocol_instance_id for e in accepted]
    # One update per offset waited on, however often it was asked.
    assert len(ids) == len(set(ids)) >= 1


async def test_a_reader_that_waits_reads_the_same_events_as_one_that_polls(
        agent_client: AgentClient, worker) -> None:
    model = script(reply("Hello there, how are you today?"), delta_seconds=0.05)
    async with worker():
        handle = await agent_client.start(AgentSpec(model=model, stream_batch_seconds=0.05), "hi")
        waited = [e async for e in agent_client.events(handle.run_id, wait=True)]
        await handle.result()
        polled = await collect(agent_client, handle.run_id)
    check_invariants(waited)
    assert [e.model_dump() for e in waited] == [e.model_dump() for e in polled]
    assert any(isinstance(e, MessageDelta) for e in waited)


async def test_the_gateway_feed_waits_with_one_update_in_flight(agent_client: AgentClient, worker) -> None:
    model = script(reply("Hello there, how are you today?"), delta_seconds=0.05)
    hub = RunHub(agent_client, wait=True)
    try:
        async with worker():
            handle = await agent_client.start(AgentSpec(model=model, stream_batch_seconds=0.05), "hi")

            async def follow() -> list:
                return [e async for e in hub.subscribe(handle.run_id)]

            first, second = await asyncio.gather(follow(), follow())  # two listeners, one reader
            await handle.result()
            polled = await collect(agent_client, handle.run_id)
    finally:
        await hub.close()
    assert [e.model_dump() for e in first] == [e.model_dump() for e in second] == [e.model_dump() for e in polled]
    history = await handle.workflow_handle.fetch_history()
    accepted = [e.workflow_execution_update_accepted_event_attributes.protocol_instance_id
                for e in history.events if e.HasField("workflow_execution_update_accepted_event_attributes")]
    assert accepted and len(accepted) == len(set(accepted))  # the feed waited, once per offset


@workflow.defn(name="agentloop-test-old-stream")
class OldStream:
    """A run of an older kind: its events answer the poll query, and it
    knows no long-poll update."""

    def __init__(self) -> None:
        self.done = False

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: self.done, timeout=timedelta(seconds=60))

    @workflow.query(name="__temporal_workflow_stream_poll")
    def poll(self, request: PollInput) -> PollResult:
        return PollResult(items=[], next_offset=request.from_offset)

    @workflow.signal
    def finish(self) -> None:
        self.done = True


async def test_a_run_without_the_update_is_polled(temporal_client: Client) -> None:
    queue = f"old-stream-{uuid.uuid4().hex[:8]}"
    async with Worker(temporal_client, task_queue=queue, workflows=[OldStream],
                      workflow_runner=UnsandboxedWorkflowRunner()):
        handle = await temporal_client.start_workflow(OldStream.run, id=f"old-{uuid.uuid4().hex}", task_queue=queue)
        reader = EventReader(handle, wait=True)
        assert not await asyncio.wait_for(reader.wait_past(0, bound=5), 10)
        assert not reader.wait  # refused: the reader polls from now on
        await handle.signal(OldStream.finish)
        # Reading goes on by the query and ends when the run closes.
        assert [e async for e in reader.own_events(0, 0.02)] == []
        await handle.result()
    history = await handle.fetch_history()
    assert not [e for e in history.events if e.HasField("workflow_execution_update_accepted_event_attributes")]


def test_the_gateway_waits_when_the_environment_says_so() -> None:
    from agentloop.server import ServerSettings

    assert ServerSettings.from_env({"AGENTLOOP_WAIT_FOR_EVENTS": "1"}).wait_for_events
    assert not ServerSettings.from_env({}).wait_for_events
    assert not ServerSettings.from_env({"AGENTLOOP_WAIT_FOR_EVENTS": "0"}).wait_for_events
    assert not ServerSettings.from_env({"AGENTLOOP_WAIT_FOR_EVENTS": "1"}, wait_for_events=False).wait_for_events


async def test_an_eager_start_hands_the_first_workflow_task_to_this_process(
        agent_client: AgentClient, worker, temporal_client) -> None:
    # With a worker of the queue on the same client, Temporal answers the start with the run's first workflow
    # task (agentloop serve and run when they embed the worker); with none here, the start is as usual.
    agent_client.eager_start = True
    async with worker():
        handle = await agent_client.start(AgentSpec(model=script(reply("hi"))), "hi")
        await handle.result()
    started = (await handle.workflow_handle.fetch_history()).events[0].workflow_execution_started_event_attributes
    assert started.eager_execution_accepted
    elsewhere = AgentClient(temporal_client, task_queue=f"{agent_client.task_queue}-nobody-here")
    elsewhere.eager_start = True
    waiting = await elsewhere.start(AgentSpec(model=script(reply("hi"))), "hi")
    try:
        first = (await waiting.workflow_handle.fetch_history()).events[0]
        assert not first.workflow_execution_started_event_attributes.eager_execution_accepted
    finally:
        await waiting.workflow_handle.terminate("test over")
