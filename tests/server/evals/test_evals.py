"""agentloop eval on a real Temporal dev server: cases from recorded runs,
tools answered from the recording (never executed), a changed prompt that
fails the tool-set check, live-read-only refusing a write, JUnit XML."""

from __future__ import annotations

from collections import Counter

import junitparser

from agentloop import AgentClient
from agentloop.client.evals import Overrides, cases_from_runs, snapshot_from_history, start_eval
from agentloop.shared.definition.activity_io import ModelRequest, ModelResponse
from agentloop.shared.evals.cases import case_from_snapshot
from agentloop.shared.evals.checks import SameTools
from agentloop.shared.evals.output import junit_xml
from agentloop.testing import call, calls, last_tool_results, reply, script_every_step, step_of
from agentloop.tools.registry import ToolRegistry
from tests.helpers import agents


def answer(request: ModelRequest) -> ModelResponse:
    """Looks the question up (or searches, when the prompt says so; writes a
    note first when it says that), then answers with what the tool said."""
    step, prompt = step_of(request), request.system_prompt
    question = next(m.text for m in request.messages if m.role == "user")
    if step == 0 and "write a note" in prompt:
        return calls(call("write_note", {"text": question}))
    if step == 0 or (step == 1 and "write a note" in prompt):
        return calls(call("search" if "search" in prompt else "lookup", {"q": question}))
    return reply(" | ".join(r.content for r in last_tool_results(request)))


def tools(registry: ToolRegistry) -> Counter[str]:
    """lookup and search (read-only) and write_note; each counts its executions."""
    ran: Counter[str] = Counter()

    @registry.tool(read_only=True)
    async def lookup(q: str) -> str:
        """Look a question up."""
        ran["lookup"] += 1
        return f"facts about {q}"

    @registry.tool(read_only=True)
    async def search(q: str) -> str:
        """Search the web."""
        ran["search"] += 1
        return f"results for {q}"

    @registry.tool
    async def write_note(text: str) -> str:
        """Write a note."""
        ran["write_note"] += 1
        return "noted"

    return ran


async def test_an_unchanged_spec_passes_and_a_changed_prompt_fails_the_tool_check(
    agent_client: AgentClient, worker, registry: ToolRegistry
) -> None:
    ran = tools(registry)
    spec = agents.spec(script_every_step(answer), tools=["lookup", "search", "write_note"],
                       system_prompt="Answer from the facts.")
    async with worker():
        recorded = [await agent_client.run(spec, f"question {i}") for i in range(3)]
        assert ran["lookup"] == 3 and all(r.final_text.startswith("facts about") for r in recorded)
        cases = await cases_from_runs(agent_client, [r.run_id for r in recorded])
        assert [c.tools for c in cases] == [["lookup"]] * 3
        # Read from each run's history (its input and result), without a worker: the cases its export gives.
        assert all([await snapshot_from_history(agent_client, r.run_id) for r in recorded])
        assert cases == [case_from_snapshot(await agent_client.get_handle(r.run_id).export()) for r in recorded]

        same = await (await start_eval(agent_client, cases, concurrency=2)).result()
        assert same.totals.pass_rate == 1.0, [o.reasons for o in same.cases]
        # Every call was answered from the recording: the tool never ran again.
        assert ran["lookup"] == 3
        assert [(o.candidate.recorded, o.candidate.live, o.candidate.refused) for o in same.cases] == [(1, 0, 0)] * 3
        assert same.totals.steps.p50 == same.totals.steps.recorded_p50 == 2

        changed = await (await start_eval(
            agent_client, cases, overrides=Overrides(system_prompt="Use search."), checks=[SameTools()],
            fallback="live")).result()
        assert changed.totals.passed == 0
        first = changed.cases[0]
        assert first.case_id == cases[0].id and not first.passed
        assert first.reasons == ["same_tools: did not call lookup; called search"]
        assert ran["search"] == 3 and first.candidate.live == 1  # no recording of search: the fallback ran it

        suite = junitparser.JUnitXml.fromstring(junit_xml(changed))
        (junit_suite,) = list(suite)
        junit_cases = list(junit_suite)
        assert [c.name for c in junit_cases] == [c.id for c in cases]
        assert all(not c.is_passed for c in junit_cases)
        assert "did not call lookup" in junit_cases[0].result[0].message


async def test_live_read_only_refuses_a_write_tool(agent_client: AgentClient, worker, registry: ToolRegistry) -> None:
    ran = tools(registry)
    spec = agents.spec(script_every_step(answer), tools=["lookup", "write_note"], system_prompt="Answer.")
    async with worker():
        recorded = await agent_client.run(spec, "question")
        cases = await cases_from_runs(agent_client, [recorded.run_id])
        report = await (await start_eval(
            agent_client, cases, policy="live-read-only",
            overrides=Overrides(system_prompt="First write a note, then answer."))).result()
    (outcome,) = report.cases
    assert ran["write_note"] == 0 and ran["lookup"] == 2  # the recording and the eval's live read
    assert (outcome.candidate.refused, outcome.candidate.live) == (1, 1)
    assert not outcome.passed and "called write_note" in "; ".join(outcome.reasons)


async def test_an_approval_in_a_case_run_is_answered_without_the_run_awaiting_it(
    agent_client: AgentClient, worker, registry: ToolRegistry
) -> None:
    from tests.helpers.polling import eventually

    ran = tools(registry)
    spec = agents.spec(script_every_step(answer), tools=["lookup", "write_note"], default_permission="auto",
                       system_prompt="First write a note, then answer.")
    async with worker():
        recorded = await agent_client.start(spec, "question")
        pending = await eventually(lambda: _approvals(recorded), "the write waits for approval")
        await recorded.approve(pending[0].call_id, by="ops")
        await recorded.result()
        cases = await cases_from_runs(agent_client, [recorded.run_id])
        assert [(d.tool, d.decision) for d in cases[0].decisions] == [("write_note", "approve")]
        report = await (await start_eval(agent_client, cases)).result()
        (outcome,) = report.cases
        events = [e async for e in agent_client.get_handle(outcome.run_id).events()]
    assert outcome.passed and outcome.candidate.recorded == 2, outcome.reasons
    assert ran["write_note"] == 1  # approved by the recorded decision, answered from the recording
    kinds = [e.type for e in events]
    assert "agent.tool.approval.requested" in kinds and "agent.tool.approval.resolved" in kinds
    statuses = [e.status for e in events if e.type == "agent.run.status.changed"]
    assert "awaiting_approval" not in statuses, statuses


def verdict_of(case, candidate):
    """A user's check (``function:tests.server.evals.test_evals:verdict_of``)."""
    return candidate.final_text.endswith("question"), f"answer was {candidate.final_text!r}"


async def test_the_judge_and_a_users_function_check_each_case(
    agent_client: AgentClient, worker, registry: ToolRegistry
) -> None:
    from agentloop.shared.evals.checks import Function, Judge
    from tests.helpers.servers.provider_servers import (
        OpenAIServer,
        ScriptedResponse,
        openai_completion,
        openai_models,
    )

    tools(registry)
    spec = agents.spec(script_every_step(answer), tools=["lookup"])
    with OpenAIServer() as provider:
        provider.enqueue(ScriptedResponse(json_body=openai_completion(
            content='{"passed": false, "reason": "it only repeats the facts"}', prompt_tokens=100,
            completion_tokens=20)))
        async with worker(models=openai_models(provider)):
            recorded = await agent_client.run(spec, "question")
            cases = await cases_from_runs(agent_client, [recorded.run_id])
            report = await (await start_eval(agent_client, cases, checks=[
                Judge(model="openai:gpt-4.1-mini", rubric="The answer must explain, not repeat."),
                Function(path="tests.server.evals.test_evals:verdict_of")])).result()
        (request,) = provider.requests
    assert request.json["model"] == "gpt-4.1-mini"
    system = request.json["messages"][0]["content"]
    assert "The answer must explain, not repeat." in system
    assert "facts about question" in request.json["messages"][1]["content"]
    (outcome,) = report.cases
    assert outcome.reasons == ["judge: it only repeats the facts"]
    judged, function = outcome.checks
    assert judged.cost_usd and judged.cost_usd > 0 and report.totals.judge_cost_usd == judged.cost_usd
    assert function.passed and function.reason == "answer was 'facts about question'"


async def test_the_http_api_lists_evals_and_serves_their_reports_to_readers(
    agent_client: AgentClient, worker, registry: ToolRegistry
) -> None:
    from agentloop.server import ServerSettings, parse_tokens
    from tests.helpers.http_api import serve

    secret = "dash-secret-0123456789"
    tools(registry)
    spec = agents.spec(script_every_step(answer), tools=["lookup"])
    async with worker():
        recorded = await agent_client.run(spec, "question")
        handle = await start_eval(agent_client, await cases_from_runs(agent_client, [recorded.run_id]))
        await handle.result()
        settings = ServerSettings(tokens=parse_tokens(f"dashboard:read:{secret}"))
        async with serve(agent_client, settings) as api:
            http, auth = api.http, {"Authorization": f"Bearer {secret}"}
            assert (await http.get("/v1/evals")).status_code == 401
            listed = (await http.get("/v1/evals", headers=auth)).json()["evals"]
            assert handle.id in [e["eval_id"] for e in listed]
            page = (await http.get(f"/v1/evals/{handle.id}", headers=auth)).json()
            assert page["status"] == "completed"
            (case,) = page["report"]["cases"]
            assert case["passed"] and case["recorded_run_id"] == recorded.run_id
            assert case["run_id"] == f"{handle.id}--{case['case_id']}"
            assert (await http.get("/v1/evals/eval-nope", headers=auth)).status_code == 404
            shell = await http.get(f"/evals/{handle.id}")
            assert shell.status_code == 200 and 'data-page="eval"' in shell.text
            await console_shows_the_eval(api.url, secret, handle.id, case)


async def console_shows_the_eval(url: str, secret: str, eval_id: str, case: dict) -> None:
    """The console's evals list leads to the eval's page: the case, passed,
    with links to both runs and to their diff."""
    from playwright.async_api import async_playwright, expect

    from tests.helpers.browser import chromium, launch

    chromium()  # skips without the browser (fails when AGENTLOOP_REQUIRE_BROWSER=1)
    async with async_playwright() as playwright:
        browser = await launch(playwright)
        page = await browser.new_page()
        await page.goto(url + "/evals")
        await page.fill("input[name=token]", secret)
        await page.click("button[type=submit]")
        await page.click(f'a.eval-row[data-eval-id="{eval_id}"]')
        row = page.locator(f'tr.case[data-case-id="{case["case_id"]}"]')
        await expect(row.locator(".verdict")).to_have_text("pass")
        await expect(row.locator(f'a[href="/runs/{case["recorded_run_id"]}"]')).to_have_count(1)
        await expect(row.locator(f'a[href="/runs/{case["run_id"]}"]')).to_have_count(1)
        diff = f'/diff?a={case["recorded_run_id"]}&b={case["run_id"]}'
        await expect(row.locator("a.diff-link")).to_have_attribute("href", diff)
        await expect(page.locator(".pass-rate")).to_have_text("1/1 (100%)")
        await browser.close()


async def _approvals(handle):  # noqa: ANN001, ANN202
    return (await handle.pending()).approvals
