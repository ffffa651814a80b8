"""An LLM step's provider stream stops at once when the run is cancelled or
the worker shuts down: the local server that speaks OpenAI's format sees the
connection closed while the answer is still streaming. Nothing here waits
for a clock: each test waits until the server saw the stream end, one way or
the other, and asserts which way."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from agentloop import AgentClient, AgentRunHandle, AgentSpec
from agentloop.shared.errors import MODEL_STREAM_BROKEN_ERROR_TYPE
from tests.helpers.provider_servers import (
    OpenAIServer,
    ScriptedResponse,
    openai_completion,
    openai_models,
    slow_openai_stream,
)

#: A model that would stream for this long if nothing stopped it.
RAMBLING_SECONDS = 60


async def first_delta(handle: AgentRunHandle) -> None:
    """Wait until the run's first streamed text arrived (the model is answering)."""
    async for event in handle.events():
        if event.type == "thread.message.delta":
            return


async def test_cancelling_a_run_closes_the_provider_stream(agent_client: AgentClient, worker) -> None:
    with OpenAIServer() as server:
        server.enqueue(slow_openai_stream(seconds=RAMBLING_SECONDS))
        async with worker(models=openai_models(server)):
            handle = await agent_client.start(AgentSpec(model="openai:gpt-test"), "ramble on")
            await first_delta(handle)
            await handle.cancel()
            outcome = await asyncio.to_thread(server.wait_for_stream_outcome)
    assert outcome.ended == "client_closed"


async def test_a_worker_shutting_down_stops_the_stream_and_the_step_is_retried(
    agent_client: AgentClient, worker
) -> None:
    # As after Ctrl-C in `agentloop run`: the worker shuts down right away, so
    # the workflow never gets to cancel the LLM call. Before, the stream went
    # on for the worker's whole graceful shutdown timeout (here longer than
    # the stream: it ran to its end).
    with OpenAIServer() as server:
        server.enqueue(slow_openai_stream(seconds=RAMBLING_SECONDS),
                       ScriptedResponse(json_body=openai_completion(content="Short answer.")))
        async with worker(models=openai_models(server), graceful_shutdown_timeout=timedelta(minutes=10)):
            handle = await agent_client.start(AgentSpec(model="openai:gpt-test"), "ramble on")
            await first_delta(handle)
        outcome = await asyncio.to_thread(server.wait_for_stream_outcome)
        assert outcome.ended == "client_closed"
        # The run lives on: the next worker takes the step again.
        async with worker(models=openai_models(server)):
            result = await handle.result()
    assert result.final_text == "Short answer."
    history = await agent_client.temporal.get_workflow_handle(handle.run_id).fetch_history()
    retried = [
        event.activity_task_started_event_attributes.last_failure
        for event in history.events
        if event.HasField("activity_task_started_event_attributes")
        and event.activity_task_started_event_attributes.attempt > 1
    ]
    assert [(f.application_failure_info.type, f.message) for f in retried] == [
        (
            MODEL_STREAM_BROKEN_ERROR_TYPE,
            "the worker shut down while OpenAI was still answering, so the answer was stopped; "
            "the step is retried (attempt 1 of 5 failed)",
        )
    ]
