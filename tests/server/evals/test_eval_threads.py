"""agentloop eval of a thread's later turn, and of a case run too large for
its Temporal result, on a real Temporal dev server."""

from __future__ import annotations

from collections import Counter

import pytest

from agentloop import AgentClient, EvalCase, Overrides, cases_from_runs, read_dataset, start_eval
from agentloop.client.evals import snapshot_from_history
from agentloop.shared.base.errors import UserError
from agentloop.shared.definition.activity_io import ModelRequest, ModelResponse
from agentloop.shared.evals.cases import dataset_line
from agentloop.shared.evals.checks import OutputEquals, SameTools
from agentloop.testing import call, calls, last_tool_results, reply, script_every_step
from agentloop.tools.registry import ToolRegistry
from tests.helpers import agents
from tests.server.evals.test_evals import tools

#: Every request the thread's model got: (system prompt, user texts, last message's role).
SEEN: list[tuple[str, list[str], str]] = []


def answer(request: ModelRequest) -> ModelResponse:
    """Looks the latest question up (searches, when the prompt says so), then
    answers with what the tool said and how many questions it has seen: an
    answer that depends on the earlier turns."""
    users = [m.text for m in request.messages if m.role == "user"]
    SEEN.append((request.system_prompt, users, request.messages[-1].role))
    if request.messages[-1].role == "user":
        return calls(call("search" if "search" in request.system_prompt else "lookup", {"q": users[-1]}))
    results = " | ".join(r.content for r in last_tool_results(request))
    return reply(f"{results} (question {len(users)})")


async def test_a_threads_third_turn_is_a_case_that_starts_with_turns_one_and_two(
    agent_client: AgentClient, worker, registry: ToolRegistry
) -> None:
    ran = tools(registry)
    spec = agents.spec(script_every_step(answer), tools=["lookup", "search"], system_prompt="Answer from the facts.")
    async with worker():
        first = await agent_client.start(spec, "first question", thread_id="eval-thread-three")
        await first.result()
        for text in ("second question", "third question"):
            await (await agent_client.send("eval-thread-three", text)).result()
        assert ran["lookup"] == 3

        (case,) = await cases_from_runs(agent_client, ["eval-thread-three~3"])
        assert (case.id, case.turn, case.recorded_run_id) == ("eval-thread-three.turn-3", 3, "eval-thread-three")
        assert [m.text for m in case.input] == ["third question"]
        assert [(m.role, m.text) for m in case.messages if m.role != "tool"] == [
            ("user", "first question"), ("assistant", ""), ("assistant", "facts about first question (question 1)"),
            ("user", "second question"), ("assistant", ""),
            ("assistant", "facts about second question (question 2)")]
        assert case.tools == ["lookup"] and case.expected_text == "facts about third question (question 3)"
        assert [c.arguments for c in case.recorded_calls] == [{"q": "third question"}]
        # Every completed turn of the thread is a case; a dataset line keeps the earlier messages.
        every = await cases_from_runs(agent_client, ["eval-thread-three"])
        assert [c.turn for c in every] == [1, 2, 3] and [len(c.messages) for c in every] == [0, 4, 8]
        assert read_dataset([dataset_line(case)]) == [EvalCase.model_validate_json(dataset_line(case))]
        assert read_dataset([dataset_line(case)])[0].messages == case.messages
        assert await snapshot_from_history(agent_client, "eval-thread-three") is None  # a thread: exported
        with pytest.raises(UserError, match="thread eval-thread-three holds no turn 7"):
            await cases_from_runs(agent_client, ["eval-thread-three~7"])

        SEEN.clear()
        same = await (await start_eval(agent_client, [case])).result()
        (outcome,) = same.cases
        assert outcome.passed, outcome.reasons
        assert (outcome.turn, outcome.candidate.recorded, outcome.candidate.live) == (3, 1, 0)
        assert ran["lookup"] == 3  # answered from the recording: the tool did not run
        # The candidate's model saw turns 1 and 2 before the third question.
        assert SEEN[0] == ("Answer from the facts.", ["first question", "second question", "third question"], "user")

        changed = await (await start_eval(agent_client, [case], overrides=Overrides(system_prompt="Use search."),
                                          checks=[SameTools(), OutputEquals()])).result()
    (failed,) = changed.cases
    assert not failed.passed and (failed.case_id, failed.turn) == ("eval-thread-three.turn-3", 3)
    assert failed.reasons[0] == "same_tools: did not call lookup; called search"
    assert ran["search"] == 0 and failed.candidate.refused == 1  # no recording of search: refused


async def test_a_case_run_too_large_for_its_result_still_counts_its_tools(
    agent_client: AgentClient, worker, registry: ToolRegistry
) -> None:
    ran: Counter[str] = Counter()

    @registry.tool(read_only=True)
    async def dump(part: int) -> str:
        """A large output."""
        ran["dump"] += 1
        return f"part {part}: " + "x" * 20_000

    def four_dumps(request: ModelRequest) -> ModelResponse:
        done = sum(1 for m in request.messages for _ in m.tool_results)
        return calls(call("dump", {"part": done})) if done < 4 else reply("dumped four parts")

    spec = agents.spec(script_every_step(four_dumps), tools=["dump"], tool_output_limit=30_000)
    async with worker():
        recorded = await agent_client.run(spec, "dump four parts")
        assert await snapshot_from_history(agent_client, recorded.run_id) is None  # its messages left its result
        cases = await cases_from_runs(agent_client, [recorded.run_id])
        report = await (await start_eval(agent_client, cases, checks=[SameTools(order=True)])).result()
        (outcome,) = report.cases
        raw = await agent_client.temporal.get_workflow_handle(outcome.run_id, result_type=dict).result()
    # Its messages (80 KB of tool results) and its report's steps left its Temporal result ...
    assert raw["report_steps_omitted"] is True and raw["report"]["steps"] == [] and raw["messages"] == []
    # ... and the checks still saw its four calls, answered from the recording.
    assert outcome.passed, outcome.reasons
    assert outcome.candidate.tools == ["dump"] * 4
    assert (outcome.candidate.recorded, outcome.candidate.live, outcome.candidate.refused) == (4, 0, 0)
    assert report.totals.recorded == 4 and ran["dump"] == 4
