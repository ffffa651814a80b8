"""``agentloop eval`` as a user types it: save a query's runs to a dataset,
run the eval from it with JUnit output, and fail under --min-pass-rate."""

from __future__ import annotations

import json
import re
from pathlib import Path

import junitparser

from agentloop import AgentClient
from agentloop.testing import call, calls, last_tool_results, reply, script_every_step, step_of
from agentloop.tools.registry import ToolRegistry
from tests.helpers import agents
from tests.helpers.cli import agentloop_async


def answer(request):
    if step_of(request) == 0:
        return calls(call("lookup", {"q": request.messages[0].text}))
    return reply(" | ".join(r.content for r in last_tool_results(request)))


def lookup_tool(registry: ToolRegistry) -> None:
    @registry.tool(read_only=True)
    async def lookup(q: str) -> str:
        """Look it up."""
        return f"facts about {q}"


async def test_save_then_run_from_the_dataset_with_junit_and_a_min_pass_rate(
    agent_client: AgentClient, worker, registry: ToolRegistry, env: dict[str, str], tmp_path: Path
) -> None:
    lookup_tool(registry)
    spec = agents.spec(script_every_step(answer), tools=["lookup"], name="cli-eval-agent")
    suite, junit = tmp_path / "suite.jsonl", tmp_path / "eval.xml"
    async with worker():
        for question in ("one", "two"):
            await agent_client.run(spec, question)
        saved = await agentloop_async("eval", "save", "--query", 'AgentName="cli-eval-agent"', "-o", str(suite),
                                      env=env)
        assert saved.code == 0, saved.err
        lines = [json.loads(line) for line in suite.read_text().splitlines()]
        assert sorted(line["input"][0]["content"][0]["text"] for line in lines) == ["one", "two"]

        passed = await agentloop_async("eval", "run", "--dataset", str(suite), "--junit", str(junit),
                                       "--min-pass-rate", "1", env=env)
        assert passed.code == 0, passed.err
        assert "2/2 passed (100%)" in passed.out and "tool calls: 2 from the recording, 0 live" in passed.out
        (junit_suite,) = list(junitparser.JUnitXml.fromfile(str(junit)))
        assert [c.is_passed for c in junit_suite] == [True, True]
        # `agentloop watch` follows an eval as it follows a run: its report at the end.
        eval_id = re.search(r"eval (eval-\w+): 2 cases", passed.err).group(1)
        watched = await agentloop_async("watch", eval_id, env=env)
        assert watched.code == 0 and "2/2 passed (100%)" in watched.out, watched.err

        failed = await agentloop_async("eval", "run", "--dataset", str(suite), "--check", "contains:three",
                                       "--min-pass-rate", "0.5", "--json", env=env)
        assert failed.code == 1, failed.err
        assert "pass rate 0% is under --min-pass-rate 50%" in failed.err
        report = json.loads(failed.out)
        assert [o["reasons"] for o in report["cases"]] == [["contains: the answer lacks three"]] * 2

        bad = await agentloop_async("eval", "run", "--dataset", str(tmp_path / "nope.jsonl"), env=env)
        assert bad.code == 2 and "no such file" in bad.err and "Traceback" not in bad.err


async def test_save_a_threads_later_turn_by_query_and_a_missing_turn_is_a_sentence(
    agent_client: AgentClient, worker, registry: ToolRegistry, env: dict[str, str], tmp_path: Path
) -> None:
    lookup_tool(registry)

    def per_turn(request):
        if request.messages[-1].role == "user":
            return calls(call("lookup", {"q": request.messages[-1].text}))
        return reply(" | ".join(r.content for r in last_tool_results(request)))

    spec = agents.spec(script_every_step(per_turn), tools=["lookup"], name="cli-eval-thread")
    suite = tmp_path / "turns.jsonl"
    async with worker():
        await (await agent_client.start(spec, "one", thread_id="cli-eval-thread")).result()
        await (await agent_client.send("cli-eval-thread", "two")).result()
        saved = await agentloop_async("eval", "save", "--query", 'AgentName="cli-eval-thread"', "--turn", "2",
                                      "-o", str(suite), env=env)
        assert saved.code == 0, saved.err
        (line,) = [json.loads(text) for text in suite.read_text().splitlines()]
        assert (line["id"], line["turn"], line["expected_text"]) == ("cli-eval-thread.turn-2", 2, "facts about two")
        assert [m["role"] for m in line["messages"]] == ["user", "assistant", "tool", "assistant"]

        missing = await agentloop_async("eval", "run", "--runs", "cli-eval-thread~5", env=env)
        assert missing.code == 2 and "thread cli-eval-thread holds no turn 5 (turns kept: 1, 2)" in missing.err
        assert "Traceback" not in missing.err
