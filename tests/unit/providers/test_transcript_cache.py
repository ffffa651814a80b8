"""The worker's transcript cache (activities/transcripts.py), without a server.

``TranscriptCache.resolve`` is driven with fake fetch functions that answer
from a run's state with the workflow's own helpers (``agentloop.shared.runs.transcripts``:
``page``, ``transcript_hashes``, ``context_hash``), as the run's
``transcript`` and ``model_context`` queries do. ``query_run`` is driven with
a fake workflow handle that answers, fails or stays silent the ways a
Temporal server's query does (honouring its ``rpc_timeout``), with timeouts
of milliseconds. The real queries are exercised on a dev server by the
durability and workflow tests.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import WorkflowQueryFailedError, WorkflowQueryRejectedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from agentloop.activities.transcripts import QueryTimeouts, TranscriptCache, query_run
from agentloop.shared.base.errors import TRANSCRIPT_MISMATCH_ERROR_TYPE, TRANSCRIPT_UNAVAILABLE_ERROR_TYPE
from agentloop.shared.base.messages import Message
from agentloop.shared.definition.activity_io import ToolDefinition, TranscriptRef, TranscriptSeed
from agentloop.shared.runs.transcripts import (
    EMPTY_HASH,
    ModelContext,
    TranscriptPage,
    TranscriptRange,
    context_hash,
    page,
    transcript_hashes,
)

TOOLS = [ToolDefinition(name="read_file", description="Read a file")]


def conversation(count: int, tag: str = "") -> list[Message]:
    """``count`` alternating user and assistant messages."""
    return [
        Message.user(f"question {i}{tag}") if i % 2 == 0 else Message.assistant(f"answer {i}{tag}")
        for i in range(count)
    ]


@dataclass
class FakeRun:
    """A run's side of the transcript queries: its messages and context,
    served as the workflow serves them, in pages of at most ``page_size``
    messages; every query is counted."""

    messages: list[Message]
    system_prompt: str = "You are terse."
    tools: list[ToolDefinition] = field(default_factory=lambda: list(TOOLS))
    page_size: int = 1000
    pages_asked: list[int] = field(default_factory=list)
    contexts_asked: int = 0

    def ref(self, count: int | None = None) -> TranscriptRef:
        """The reference a step of this run would carry (its first ``count`` messages)."""
        messages = self.messages if count is None else self.messages[:count]
        hashes = transcript_hashes(messages)
        return TranscriptRef(
            message_count=len(messages),
            transcript_hash=hashes[-1] if hashes else EMPTY_HASH,
            context_hash=context_hash(self.system_prompt, self.tools),
        )

    async def fetch_context(self) -> ModelContext:
        self.contexts_asked += 1
        await asyncio.sleep(0)  # a query is a round trip: let others run
        return ModelContext(
            system_prompt=self.system_prompt,
            tools=self.tools,
            context_hash=context_hash(self.system_prompt, self.tools),
        )

    async def fetch_page(self, request: TranscriptRange) -> TranscriptPage:
        self.pages_asked.append(request.start)
        await asyncio.sleep(0)
        answer = page(self.messages, transcript_hashes(self.messages), request)
        return answer.model_copy(update={"messages": answer.messages[: self.page_size]})


async def resolve(cache: TranscriptCache, run: FakeRun, ref: TranscriptRef, key: str = "run-1") -> Any:
    return await cache.resolve(key, ref, run.fetch_context, run.fetch_page)


# ---------------------------------------------------------------- resolve


async def test_a_cold_cache_fetches_context_and_whole_transcript() -> None:
    run, cache = FakeRun(conversation(3)), TranscriptCache()

    system_prompt, tools, messages = await resolve(cache, run, run.ref())

    assert (system_prompt, tools, messages) == (run.system_prompt, TOOLS, run.messages)
    assert run.contexts_asked == 1
    assert run.pages_asked == [0]
    assert (cache.stats.hits, cache.stats.fetched_messages, cache.stats.full_fetches) == (0, 3, 0)
    assert cache.stats.context_fetches == 1


async def test_the_same_reference_again_is_a_hit_with_no_query() -> None:
    run, cache = FakeRun(conversation(3)), TranscriptCache()
    await resolve(cache, run, run.ref())

    _, _, messages = await resolve(cache, run, run.ref())

    assert messages == run.messages
    assert cache.stats.hits == 1
    assert run.contexts_asked == 1 and run.pages_asked == [0]


async def test_a_longer_transcript_is_extended_by_what_is_new() -> None:
    run, cache = FakeRun(conversation(3)), TranscriptCache()
    await resolve(cache, run, run.ref())
    run.messages += [Message.assistant("more"), Message.user("and more")]

    _, _, messages = await resolve(cache, run, run.ref())

    assert messages == run.messages
    assert run.pages_asked == [0, 3]  # only from where the cache's copy ends
    assert cache.stats.fetched_messages == 5
    assert (cache.stats.hits, cache.stats.full_fetches, run.contexts_asked) == (0, 0, 1)


async def test_a_transcript_over_several_pages() -> None:
    run, cache = FakeRun(conversation(7), page_size=3), TranscriptCache()

    _, _, messages = await resolve(cache, run, run.ref())

    assert messages == run.messages
    assert run.pages_asked == [0, 3, 6]


async def test_a_run_that_moved_on_gives_only_the_messages_the_step_names() -> None:
    # The step was scheduled at 3 messages; by the time it runs, the run has 5.
    run, cache = FakeRun(conversation(5)), TranscriptCache()

    _, _, messages = await resolve(cache, run, run.ref(3))

    assert messages == run.messages[:3]
    assert cache.stats.fetched_messages == 3


async def test_a_returned_list_is_a_copy_of_the_cache() -> None:
    run, cache = FakeRun(conversation(2)), TranscriptCache()
    _, tools, messages = await resolve(cache, run, run.ref())
    messages.append(Message.user("appended by the caller"))
    tools.clear()

    _, tools_again, messages_again = await resolve(cache, run, run.ref())

    assert messages_again == run.messages and tools_again == TOOLS


async def test_a_diverged_copy_is_refetched_from_the_start_once() -> None:
    # The run rewrote its history (same length so far, other content): the
    # cache's prefix looks usable, extending it gives the wrong hash, and a
    # whole refetch gives the right one.
    run, cache = FakeRun(conversation(2)), TranscriptCache()
    await resolve(cache, run, run.ref())
    run.messages = [*conversation(2, tag=" (rewritten)"), Message.user("next")]

    _, _, messages = await resolve(cache, run, run.ref())

    assert messages == run.messages
    assert run.pages_asked == [0, 2, 0]
    assert cache.stats.full_fetches == 1


async def test_a_shorter_transcript_is_refetched_from_the_start() -> None:
    # Compaction: the run's transcript is now shorter than the cache's copy.
    run, cache = FakeRun(conversation(6)), TranscriptCache()
    await resolve(cache, run, run.ref())
    run.messages = [Message.user("summary of the conversation so far"), *run.messages[-2:]]

    _, _, messages = await resolve(cache, run, run.ref())

    assert messages == run.messages
    assert run.pages_asked == [0, 0]
    assert cache.stats.full_fetches == 1


async def test_a_mismatch_that_persists_is_a_retryable_error_and_forgets_the_run() -> None:
    run, cache = FakeRun(conversation(3)), TranscriptCache()
    stale_ref = run.ref()
    run.messages = conversation(3, tag=" (other)")  # what the run serves never hashes to the ref

    with pytest.raises(ApplicationError) as caught:
        await resolve(cache, run, stale_ref)

    error = caught.value
    assert error.type == TRANSCRIPT_MISMATCH_ERROR_TYPE
    assert not error.non_retryable
    assert error.message == (
        "the transcript fetched from run run-1 does not match the step's reference (3 messages); retrying"
    )
    assert run.pages_asked == [0, 0]  # a whole refetch, once
    # Forgotten: the next attempt starts cold (context included).
    run.messages = conversation(3)
    await resolve(cache, run, stale_ref)
    assert run.contexts_asked == 2 and run.pages_asked == [0, 0, 0]


async def test_a_run_with_fewer_messages_than_the_reference_is_a_retryable_mismatch() -> None:
    run, cache = FakeRun(conversation(2)), TranscriptCache()
    ahead = FakeRun(conversation(4)).ref()

    with pytest.raises(ApplicationError) as caught:
        await resolve(cache, run, ahead)

    assert caught.value.type == TRANSCRIPT_MISMATCH_ERROR_TYPE
    assert not caught.value.non_retryable
    assert caught.value.message == "the run has 2 messages, the step asked for 4; retrying"


async def test_an_empty_transcript_needs_no_page() -> None:
    run, cache = FakeRun([]), TranscriptCache()

    system_prompt, tools, messages = await resolve(cache, run, run.ref())

    assert (system_prompt, tools, messages) == (run.system_prompt, TOOLS, [])
    assert run.pages_asked == []
    assert cache.stats.hits == 1


async def test_an_empty_transcript_with_another_hash_is_a_mismatch() -> None:
    run, cache = FakeRun([]), TranscriptCache()
    ref = run.ref().model_copy(update={"transcript_hash": "0" * 32})

    with pytest.raises(ApplicationError) as caught:
        await resolve(cache, run, ref)

    assert caught.value.type == TRANSCRIPT_MISMATCH_ERROR_TYPE
    assert cache.stats.full_fetches == 1


async def test_a_changed_context_is_fetched_again() -> None:
    run, cache = FakeRun(conversation(2)), TranscriptCache()
    await resolve(cache, run, run.ref())
    run.system_prompt = "You are verbose."
    run.tools = [*TOOLS, ToolDefinition(name="write_file")]

    system_prompt, tools, messages = await resolve(cache, run, run.ref())

    assert (system_prompt, [t.name for t in tools]) == ("You are verbose.", ["read_file", "write_file"])
    assert messages == run.messages
    assert run.contexts_asked == 2
    assert cache.stats.context_fetches == 2
    assert run.pages_asked == [0]  # the messages were still good
    assert cache.stats.hits == 1


async def test_the_least_recently_used_run_is_evicted() -> None:
    cache = TranscriptCache(max_runs=2)
    runs = {key: FakeRun(conversation(2, tag=key)) for key in ("a", "b", "c")}

    async def use(key: str) -> None:
        await resolve(cache, runs[key], runs[key].ref(), key=key)

    for key in ("a", "b", "a", "c"):  # "a" used after "b": "b" is the least recent when "c" comes
        await use(key)
    await use("a")
    await use("c")
    await use("b")

    assert [runs[k].contexts_asked for k in ("a", "b", "c")] == [1, 2, 1]
    assert [len(runs[k].pages_asked) for k in ("a", "b", "c")] == [1, 2, 1]
    assert cache.stats.hits == 3  # "a" twice, "c" once
    assert sorted(cache._runs) == ["b", "c"]  # "b" came back; "a" was the least recent
    assert cache._locks == {} and cache._waiting == {}  # a lock lives only while steps use it


async def test_forget_drops_a_run() -> None:
    run, cache = FakeRun(conversation(2)), TranscriptCache()
    await resolve(cache, run, run.ref())

    cache.forget("run-1")
    cache.forget("never-seen")
    await resolve(cache, run, run.ref())

    assert run.contexts_asked == 2 and run.pages_asked == [0, 0]


async def test_concurrent_steps_of_one_run_fetch_once() -> None:
    run, cache = FakeRun(conversation(4)), TranscriptCache()

    results = await asyncio.gather(*(resolve(cache, run, run.ref()) for _ in range(3)))

    assert all(messages == run.messages for _, _, messages in results)
    assert run.contexts_asked == 1 and run.pages_asked == [0]
    assert cache.stats.hits == 2
    assert cache._locks == {} and cache._waiting == {}


# ---------------------------------------------------------------- query_run


FAST = QueryTimeouts(reask=timedelta(milliseconds=10), total=timedelta(seconds=5))


class FakeHandle:
    """A workflow handle's ``query`` as a Temporal server answers it: each
    ask gets the next behaviour from ``answers`` (the last one repeats):

    * a value: the query's answer;
    * an exception: raised at once;
    * ``SILENT``: no worker answers; the server gives up at ``rpc_timeout``
      with ``DEADLINE_EXCEEDED``.
    """

    SILENT = object()

    def __init__(self, *answers: Any) -> None:
        self.id = "run-1"
        self.answers = list(answers)
        self.asks: list[tuple[str, tuple[Any, ...], type[Any], timedelta]] = []
        self.cancelled = 0

    async def query(self, name: str, *args: Any, result_type: type[Any], rpc_timeout: timedelta) -> Any:
        self.asks.append((name, args, result_type, rpc_timeout))
        answer = self.answers[min(len(self.asks), len(self.answers)) - 1]
        if answer is self.SILENT:
            try:
                await asyncio.sleep(rpc_timeout.total_seconds())
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
            raise RPCError("context deadline exceeded", RPCStatusCode.DEADLINE_EXCEEDED, b"")
        if isinstance(answer, BaseException):
            raise answer
        return answer


async def test_the_first_answer_is_returned() -> None:
    handle = FakeHandle(TranscriptPage(total=0))

    answer = await query_run(handle, "transcript", TranscriptRange(start=3), result_type=TranscriptPage, timeouts=FAST)

    assert answer == TranscriptPage(total=0)
    [(name, args, result_type, rpc_timeout)] = handle.asks
    assert (name, args, result_type) == ("transcript", (TranscriptRange(start=3),), TranscriptPage)
    assert timedelta(0) < rpc_timeout <= FAST.total  # the whole budget, on the first ask


async def test_a_silent_query_is_asked_again_and_the_first_answer_wins() -> None:
    # Right after a worker crash the first ask waits on the dead worker's
    # sticky queue; a later one reaches a live worker.
    context = ModelContext(system_prompt="hi")
    handle = FakeHandle(FakeHandle.SILENT, context)

    answer = await query_run(handle, "model_context", result_type=ModelContext, timeouts=FAST)

    assert answer == context
    assert len(handle.asks) == 2
    assert handle.asks[1][3] < handle.asks[0][3]  # a re-ask gets what is left of the budget
    assert handle.cancelled == 1  # the silent ask is not left behind


async def test_no_answer_in_time_is_a_retryable_unavailable_error() -> None:
    timeouts = QueryTimeouts(reask=timedelta(milliseconds=20), total=timedelta(milliseconds=100))
    handle = FakeHandle(FakeHandle.SILENT)

    with pytest.raises(ApplicationError) as caught:
        await query_run(handle, "transcript", result_type=TranscriptPage, timeouts=timeouts)

    error = caught.value
    assert error.type == TRANSCRIPT_UNAVAILABLE_ERROR_TYPE
    assert not error.non_retryable
    assert error.message == (
        "could not fetch the transcript of run run-1: its 'transcript' query got no answer within 0.1s: no "
        "worker running the run's workflow answered (one may have just crashed, or none polls the run's "
        "task queue); the step can be retried"
    )
    assert len(handle.asks) >= 2  # re-asked while it waited


async def test_queries_that_each_give_up_at_once_are_asked_until_the_deadline() -> None:
    timeouts = QueryTimeouts(reask=timedelta(milliseconds=5), total=timedelta(milliseconds=60))
    handle = FakeHandle(RPCError("cancelled", RPCStatusCode.CANCELLED, b""))

    with pytest.raises(ApplicationError) as caught:
        await query_run(handle, "transcript", result_type=TranscriptPage, timeouts=timeouts)

    assert "got no answer within 0.06s" in caught.value.message
    assert len(handle.asks) >= 2


@pytest.mark.parametrize(
    ("failure", "reason"),
    [
        (WorkflowQueryFailedError("transcript: no such query"), "transcript: no such query"),
        (RPCError("workflow not found", RPCStatusCode.NOT_FOUND, b""), "workflow not found"),
        (WorkflowQueryRejectedError(None), "Query rejected, status: None"),
    ],
    ids=["query-failed", "rpc-error", "query-rejected"],
)
async def test_a_failed_query_is_unavailable_at_once(failure: BaseException, reason: str) -> None:
    handle = FakeHandle(failure, TranscriptPage())

    with pytest.raises(ApplicationError) as caught:
        await query_run(handle, "transcript", result_type=TranscriptPage, timeouts=FAST)

    assert caught.value.type == TRANSCRIPT_UNAVAILABLE_ERROR_TYPE
    assert not caught.value.non_retryable
    assert caught.value.message == (
        f"could not fetch the transcript of run run-1: its 'transcript' query failed: {reason}; "
        "the step can be retried"
    )
    assert len(handle.asks) == 1


async def test_a_failure_after_a_silent_ask_cancels_that_ask() -> None:
    handle = FakeHandle(FakeHandle.SILENT, WorkflowQueryFailedError("boom"))

    with pytest.raises(ApplicationError):
        await query_run(handle, "transcript", result_type=TranscriptPage, timeouts=FAST)

    assert len(handle.asks) == 2 and handle.cancelled == 1


async def test_an_unexpected_error_is_raised_as_is() -> None:
    handle = FakeHandle(TypeError("cannot decode the answer"))

    with pytest.raises(TypeError, match="cannot decode the answer"):
        await query_run(handle, "transcript", result_type=TranscriptPage, timeouts=FAST)


# What the worker produced: no query on the happy path ---------------------------------------


def step_messages(step: int, results: dict[str, str]) -> tuple[Message, Message]:
    """An assistant message asking for calls and the tool message of their results."""
    from agentloop.shared.base.messages import ToolCallPart, ToolResultPart

    calls = [ToolCallPart(id=call_id, name="read_file", arguments={"path": call_id}) for call_id in results]
    assistant = Message.assistant(f"step {step}", calls)
    tool = Message(role="tool", content=[ToolResultPart(id=c, name="read_file", content=r) for c, r in results.items()])
    return assistant, tool


async def test_a_step_the_worker_produced_needs_no_query() -> None:
    from agentloop.shared.base.messages import ToolResultPart

    run, cache = FakeRun(conversation(1)), TranscriptCache()
    await resolve(cache, run, run.ref())
    assistant, tool = step_messages(0, {"a": "alpha", "b": "beta"})
    cache.record_response("run-1", assistant)
    for part in reversed(tool.tool_results):  # results arrive in any order
        cache.record_result("run-1", ToolResultPart(id=part.id, name=part.name, content=part.content))
    run.messages += [assistant, tool]
    pages_before, contexts_before = list(run.pages_asked), run.contexts_asked

    _, _, messages = await resolve(cache, run, run.ref())

    assert messages == run.messages
    assert run.pages_asked == pages_before and run.contexts_asked == contexts_before
    assert cache.stats.predicted == 1


async def test_a_step_the_worker_did_not_fully_produce_asks_for_the_rest() -> None:
    # One call was answered by the workflow (denied by policy): its result
    # never passed through this worker, so the tool message is fetched.
    from agentloop.shared.base.messages import ToolResultPart

    run, cache = FakeRun(conversation(1)), TranscriptCache()
    await resolve(cache, run, run.ref())
    assistant, tool = step_messages(0, {"a": "alpha", "b": "denied"})
    cache.record_response("run-1", assistant)
    cache.record_result("run-1", ToolResultPart(id="a", name="read_file", content="alpha"))
    run.messages += [assistant, tool]

    _, _, messages = await resolve(cache, run, run.ref())

    assert messages == run.messages and cache.stats.predicted == 0
    assert run.pages_asked[-1] == 1  # from the first message the worker did not have


async def test_a_wrong_prediction_is_caught_by_the_hash() -> None:
    from agentloop.shared.base.messages import ToolResultPart

    run, cache = FakeRun(conversation(1)), TranscriptCache()
    await resolve(cache, run, run.ref())
    assistant, tool = step_messages(0, {"a": "what the run recorded"})
    cache.record_response("run-1", assistant)
    cache.record_result("run-1", ToolResultPart(id="a", name="read_file", content="something else"))
    run.messages += [assistant, tool]

    _, _, messages = await resolve(cache, run, run.ref())

    assert messages == run.messages and cache.stats.predicted == 0


async def test_the_cache_is_bounded_by_bytes() -> None:
    cache = TranscriptCache(max_bytes=10_000)
    runs = {f"run-{i}": FakeRun([Message.user("x" * 3000)]) for i in range(5)}
    for key, run in runs.items():
        await cache.resolve(key, run.ref(), run.fetch_context, run.fetch_page)
    assert cache.size <= 10_000
    assert list(cache._runs) == ["run-2", "run-3", "run-4"]  # the least recently used went first


async def test_a_first_step_seed_spares_a_cold_cache_every_query() -> None:
    run = FakeRun(conversation(1))
    cache = TranscriptCache()
    seed = TranscriptSeed(system_prompt=run.system_prompt, tools=run.tools, messages=run.messages)
    prompt, tools, messages = await cache.resolve("r", run.ref(), run.fetch_context, run.fetch_page, seed=seed)
    assert (prompt, tools, messages) == (run.system_prompt, run.tools, run.messages)
    assert (run.contexts_asked, run.pages_asked) == (0, [])
    assert cache.stats.seeded == 1 and cache.stats.queries == 0


async def test_a_seed_that_does_not_match_its_reference_is_ignored() -> None:
    run = FakeRun(conversation(1))
    cache = TranscriptCache()
    wrong = TranscriptSeed(system_prompt="You are verbose.", tools=[], messages=conversation(1, tag="!"))
    prompt, tools, messages = await cache.resolve("r", run.ref(), run.fetch_context, run.fetch_page, seed=wrong)
    # The run's own transcript, asked for as if there were no seed.
    assert (prompt, tools, messages) == (run.system_prompt, run.tools, run.messages)
    assert (run.contexts_asked, len(run.pages_asked)) == (1, 1)
    assert cache.stats.seeded == 0


# Runs that most likely ended: parked as bytes ----------------------------------------------


def tracked_objects_reachable(root: object) -> int:
    """Objects the garbage collector tracks that ``root`` reaches (what a
    full collection walks for it), classes and modules aside."""
    import gc
    import types

    seen: set[int] = set()
    stack, count = [root], 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (type, types.ModuleType, types.FunctionType)):
            continue
        seen.add(id(obj))
        count += gc.is_tracked(obj)
        stack.extend(gc.get_referents(obj))
    return count


async def finished_run(cache: TranscriptCache, key: str, run: FakeRun) -> Message:
    """A run's step resolved, then its model answered without calling a tool."""
    await resolve(cache, run, run.ref(), key=key)
    answer = Message.assistant(f"the final answer of {key}")
    cache.record_response(key, answer)
    return answer


async def test_an_answer_that_calls_no_tool_parks_the_run_and_its_next_step_asks_nothing() -> None:
    run, cache = FakeRun(conversation(3)), TranscriptCache()
    answer = await finished_run(cache, "run-1", run)
    assert cache.stats.parked == 1
    run.messages.append(answer)  # the run goes on after all (say, its answer failed a check)
    asked = (run.contexts_asked, list(run.pages_asked))

    prompt, tools, messages = await resolve(cache, run, run.ref())

    assert (prompt, tools, messages) == (run.system_prompt, run.tools, run.messages)
    assert (run.contexts_asked, run.pages_asked) == asked  # the answer was predicted: no query
    assert (cache.stats.unparked, cache.stats.predicted) == (1, 1)


async def test_a_parked_run_asks_only_for_what_came_after_it() -> None:
    run, cache = FakeRun(conversation(3)), TranscriptCache()
    answer = await finished_run(cache, "run-1", run)
    run.messages += [answer, Message.user("a new message in the conversation")]

    _, _, messages = await resolve(cache, run, run.ref())

    assert messages == run.messages
    assert run.pages_asked == [0, 3] and run.contexts_asked == 1


async def test_parked_runs_hold_bytes_not_objects() -> None:
    cache = TranscriptCache()
    runs = {f"run-{i}": FakeRun(conversation(6, tag=f" {i}")) for i in range(50)}
    for key, run in runs.items():
        await resolve(cache, run, run.ref(), key=key)
    live = tracked_objects_reachable(cache)
    for key in runs:
        cache.record_response(key, Message.assistant(f"done {key}"))
    parked = tracked_objects_reachable(cache)

    # Held live, each run's messages are objects (a message: model, dict,
    # fields set, content list, part, ...); parked, a run is an entry and a
    # tuple of hashes, whatever its length.
    assert live > 50 * 6 * 5
    assert parked <= 50 * 3 + 20
    assert cache.size == sum(cache._runs[key].size for key in runs)


async def test_runs_of_one_agent_share_one_copy_of_its_prompt_and_tools() -> None:
    cache = TranscriptCache()
    first, second = FakeRun(conversation(1, tag="a")), FakeRun(conversation(1, tag="b"))
    await resolve(cache, first, first.ref(), key="a")
    await resolve(cache, second, second.ref(), key="b")
    seeded = FakeRun(conversation(1, tag="c"))
    seed = TranscriptSeed(system_prompt=seeded.system_prompt, tools=seeded.tools, messages=seeded.messages)
    await cache.resolve("c", seeded.ref(), seeded.fetch_context, seeded.fetch_page, seed=seed)

    contexts = {id(cache._runs[key].context) for key in "abc"}
    assert len(contexts) == 1


async def test_a_run_whose_step_is_resolving_is_not_parked() -> None:
    # A step of the run still resolving holds the run's objects: parking it
    # under that step would lose what the step is adding.
    run, cache = FakeRun(conversation(2)), TranscriptCache()
    release = asyncio.Event()
    fetch_page = run.fetch_page

    async def slow_page(request: TranscriptRange) -> TranscriptPage:
        await release.wait()
        return await fetch_page(request)

    step = asyncio.create_task(cache.resolve("run-1", run.ref(), run.fetch_context, slow_page))
    await asyncio.sleep(0.01)
    cache.record_response("run-1", Message.assistant("an answer from an earlier attempt"))
    release.set()
    _, _, messages = await step

    assert messages == run.messages and cache.stats.parked == 0
    assert cache.size == sum(len(m.model_dump_json()) for m in run.messages)
