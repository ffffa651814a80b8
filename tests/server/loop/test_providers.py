"""The provider contract in a real run (a Temporal dev server and an
in-process worker), for each provider (see :mod:`tests.helpers.provider_cases`):
what an LLM step's attempts say when the provider's stream breaks, the
output limit a length failure names, and the provider's stream stopped at
once when the run is cancelled or the worker shuts down.

Nothing here waits for a clock: the cancellation tests wait until the
server saw the stream end, one way or the other, and assert which way.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from agentloop import AgentClient, AgentRunFailed, AgentRunHandle, AgentSpec
from agentloop.activities.providers.models import ModelResolver
from agentloop.shared.base.errors import MODEL_STREAM_BROKEN_ERROR_TYPE
from agentloop.shared.runs.result import OutputLimitReached
from tests.helpers.provider_cases import CASES, ProviderCase
from tests.helpers.servers.provider_servers import ErrorsSeen

#: A model that would stream for this long if nothing stopped it.
RAMBLING_SECONDS = 60


@pytest.fixture(params=CASES, ids=lambda case: case.id)
def provider(request: pytest.FixtureRequest) -> ProviderCase:
    return request.param


# ---------------------------------------------------------------- attempts


async def test_a_broken_stream_says_whether_the_step_is_retried_and_why(
    provider: ProviderCase, agent_client: AgentClient, worker
) -> None:
    # A TCP reset mid-stream: the transport's error has no text of its own,
    # its reason ("Connection reset by peer") is deep in its cause chain.
    broken = provider.stream([("text", "The answer "), ("text", "is ")], finish=None, reset_stream=True)
    with provider.server() as server:
        server.enqueue(broken, broken)
        url = f"{server.origin}{provider.endpoint}"
        seen = ErrorsSeen(provider.model(provider.client(server.base_url, api_key="k")))
        async with worker(models=ModelResolver({provider.id: lambda _provider, _name: seen})):
            with pytest.raises(AgentRunFailed) as failed:
                await agent_client.run(AgentSpec(model=provider.spec_model(), llm_max_attempts=2), "hello")

    broke = (
        f"{provider.name}'s stream from {url} broke off mid-answer: "
        "ReadError: ConnectionResetError: [Errno 104] Connection reset by peer"
    )
    assert [error.message for error in seen.errors] == [
        f"{broke}; the step is retried (attempt 1 of 2 failed)",
        f"{broke}; this was the last attempt (2 of 2), so the step fails",
    ]
    error = failed.value.result.error
    assert error == (f"LLM step 1 failed after 2 attempts: {broke}; "
                     "this was the last attempt (2 of 2), so the step fails")
    assert "retried" not in error


async def test_a_length_failure_names_the_limit_that_was_sent(
    provider: ProviderCase, agent_client: AgentClient, worker
) -> None:
    # The spec sets no max_tokens: the provider's default went out, and the
    # run's error names it (it said "max_tokens=None" before).
    with provider.server() as server:
        server.enqueue(provider.reply(text="On and on", finish="length"))
        async with worker(models=provider.models(server)):
            with pytest.raises(OutputLimitReached) as failed:
                await agent_client.run(AgentSpec(model=provider.spec_model()), "ramble")
    assert server.requests[0].json[provider.limit_field] == provider.default_max_tokens == 4096
    assert failed.value.result is not None
    assert failed.value.result.error == (
        "the model stopped because it reached its output token limit (max_tokens=4096, the provider's "
        "default while AgentSpec.max_tokens is unset); raise AgentSpec.max_tokens (agentloop run "
        "--max-tokens) or ask for less"
    )


# ---------------------------------------------------------------- cancellation


async def first_delta(handle: AgentRunHandle) -> None:
    """Wait until the run's first streamed text arrived (the model is answering)."""
    async for event in handle.events():
        if event.type == "thread.message.delta":
            return


async def test_cancelling_a_run_closes_the_provider_stream(
    provider: ProviderCase, agent_client: AgentClient, worker
) -> None:
    with provider.server() as server:
        server.enqueue(provider.slow_stream(seconds=RAMBLING_SECONDS))
        async with worker(models=provider.models(server)):
            handle = await agent_client.start(AgentSpec(model=provider.spec_model()), "ramble on")
            await first_delta(handle)
            await handle.cancel()
            outcome = await asyncio.to_thread(server.wait_for_stream_outcome)
    assert outcome.ended == "client_closed"


async def test_a_worker_shutting_down_stops_the_stream_and_the_step_is_retried(
    provider: ProviderCase, agent_client: AgentClient, worker
) -> None:
    # As after Ctrl-C in `agentloop run`: the worker shuts down right away, so
    # the workflow never gets to cancel the LLM call. Before, the stream went
    # on for the worker's whole graceful shutdown timeout (here longer than
    # the stream: it ran to its end).
    with provider.server() as server:
        server.enqueue(provider.slow_stream(seconds=RAMBLING_SECONDS), provider.reply(text="Short answer."))
        async with worker(models=provider.models(server), graceful_shutdown_timeout=timedelta(minutes=10)):
            handle = await agent_client.start(AgentSpec(model=provider.spec_model()), "ramble on")
            await first_delta(handle)
        outcome = await asyncio.to_thread(server.wait_for_stream_outcome)
        assert outcome.ended == "client_closed"
        # The run lives on: the next worker takes the step again.
        async with worker(models=provider.models(server)):
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
            (
                f"the worker shut down while {provider.name} was still answering, so the answer was stopped; "
                "the step is retried (attempt 1 of 5 failed)"
            ),
        )
    ]
