"""The web console (docs/http-api.md, "The console") on a real uvicorn server
with the session's dev server and an in-process worker: its pages and assets
over HTTP, then the console itself in Debian's Chromium driven by Playwright.

The browser test is the issue's walk through: the console asks for a token,
lists the run that waits for approval, shows the call's arguments, approves
it, shows the answer while the provider is still streaming it and the run
complete; then a thread's page sends the next message and shows its answer.
Screenshots at desktop and phone widths go to ``tests/artifacts/console/``.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentloop import AgentClient, AgentSpec
from agentloop.server import ApiToken, ServerSettings
from agentloop.server.console import SCRIPTS, temporal_ui_link
from agentloop.shared.definition.spec import SubAgent
from agentloop.testing import call, calls, reply, script
from tests.helpers.agents import echo_results, recording
from tests.helpers.browser import chromium, launch
from tests.helpers.http_api import serve
from tests.helpers.paths import ROOT
from tests.helpers.runs import wait_state
from tests.helpers.servers.provider_servers import (
    OpenAIServer,
    ScriptedResponse,
    openai_chunk,
    openai_completion,
    openai_completion_chunks,
    openai_models,
    openai_stream,
    openai_tool_call,
    openai_usage,
    sse_event,
)

ARTIFACTS = ROOT / "tests" / "artifacts" / "console"
UI = "http://127.0.0.1:8233"
SECRET = "console-test-secret-0123456789"
OPS = ApiToken("ops", "act", SECRET)
PHONE = {"viewport": {"width": 390, "height": 844}, "device_scale_factor": 2, "is_mobile": True, "has_touch": True}
DESKTOP = {"viewport": {"width": 1280, "height": 860}}


# Pages and assets over HTTP ------------------------------------------------------------


async def test_pages_are_shells_that_name_the_run_and_its_temporal_ui_page(agent_client: AgentClient) -> None:
    namespace = agent_client.temporal.namespace
    async with serve(agent_client, ServerSettings(tokens=[OPS], temporal_ui=UI + "/")) as served:
        home = await served.http.get("/")
        run = await served.http.get("/runs/run-1")
        thread = await served.http.get("/threads/chat 7")
        odd = await served.http.get("/runs/%3Cscript%3Ealert(1)%3C%5Cscript%3E")
        spec = (await served.http.get("/v1/openapi.json")).json()
    # No token needed for a shell (it holds no data); the script asks for one.
    for page in (home, run, thread, odd):
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        assert 'data-auth="1"' in page.text
        assert '<script type="module" src="/assets/console.js?v=' in page.text
    assert 'data-page="runs"' in home.text and 'data-temporal-ui=""' in home.text
    assert 'data-page="run"' in run.text and 'data-id="run-1"' in run.text
    assert f'data-temporal-ui="{UI}/namespaces/{namespace}/workflows/run-1"' in run.text
    assert 'data-page="thread"' in thread.text and 'data-id="chat 7"' in thread.text
    assert f'data-temporal-ui="{UI}/namespaces/{namespace}/workflows/chat%207"' in thread.text
    assert "<script>alert" not in odd.text and "&lt;script&gt;alert(1)&lt;\\script&gt;" in odd.text
    # The console is not part of the API's description.
    assert not [path for path in spec["paths"] if not path.startswith("/v1/")]


async def test_assets_are_served_with_etags_and_nothing_else_is(agent_client: AgentClient) -> None:
    async with serve(agent_client) as served:
        script = await served.http.get("/assets/console.js")
        modules = {name: await served.http.get(f"/assets/{name}") for name in SCRIPTS}
        style = await served.http.get("/assets/console.css")
        again = await served.http.get("/assets/console.js", headers={"If-None-Match": script.headers["etag"]})
        missing = await served.http.get("/assets/page.html")
        outside = await served.http.get("/assets/..%2F..%2Fapp.py")
        page = await served.http.get("/")
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
    # The script is native ES modules, each served as JavaScript: the entry imports the others.
    assert 'from "./run-page.js"' in script.text
    for name, module in modules.items():
        assert module.status_code == 200 and module.headers["content-type"].startswith("text/javascript"), name
        assert module.headers["x-content-type-options"] == "nosniff", name
    assert "new EventSource(" in modules["run-page.js"].text and "access_token" in modules["run-page.js"].text
    assert style.status_code == 200 and style.headers["content-type"].startswith("text/css")
    assert again.status_code == 304 and again.content == b""
    assert f'console.js?v={script.headers["etag"].strip(chr(34))}' in page.text
    assert 'data-auth="0"' in page.text and 'data-temporal-ui-base=""' in page.text
    for answer in (missing, outside):
        assert answer.status_code == 404 and answer.headers["content-type"] == "application/problem+json"
    assert missing.json()["detail"].startswith(
        "the console has no asset 'page.html'; it serves api.js, composer.js, console.css, ")
    assert missing.json()["detail"].endswith(", run-waiting.js, runs.js")


def test_the_temporal_ui_link_quotes_the_namespace_and_run() -> None:
    assert temporal_ui_link(None, "default", "r") == ""
    assert temporal_ui_link("http://ui:8233/", "my ns", "a/b") == "http://ui:8233/namespaces/my%20ns/workflows/a%2Fb"


# In a browser ----------------------------------------------------------------------------------

SUMMARY = "# Q3 notes\n\n- revenue up 12%\n- two new hires\n"
FIRST_HALF = "The summary is saved in `summary.md`. "
SECOND_HALF = "It has **two** points:\n\n1. revenue is up 12%\n2. two people joined the team"


def gated_answer(gate: threading.Event) -> ScriptedResponse:
    """A Chat Completions stream that sends FIRST_HALF, waits for ``gate``,
    then sends SECOND_HALF: the test sees the answer while it streams."""

    def chunks() -> Iterator[bytes]:
        yield sse_event(openai_chunk({"role": "assistant", "content": ""}))
        yield sse_event(openai_chunk({"content": FIRST_HALF}))
        gate.wait(timeout=120)
        for piece in (SECOND_HALF[:20], SECOND_HALF[20:]):
            yield sse_event(openai_chunk({"content": piece}))
        yield sse_event(openai_chunk({}, finish_reason="stop"))
        yield sse_event(openai_chunk(choices=False, usage=openai_usage(prompt_tokens=2105, completion_tokens=64)))
        yield sse_event("[DONE]")

    return ScriptedResponse(body_chunks=chunks())


def write_call() -> ScriptedResponse:
    answer = openai_completion(
        content="I will save the summary first.", finish_reason="tool_calls", prompt_tokens=1840, completion_tokens=96,
        tool_calls=[openai_tool_call("call_write", "write_file",
                                     json.dumps({"file_path": "summary.md", "content": SUMMARY}))],
        extra_message_fields={"reasoning_content": "The user wants the notes summarised and kept in a file."},
    )
    return openai_stream(openai_completion_chunks(answer))


class Page:
    """A Playwright page that fails the test on any script error, and saves screenshots."""

    def __init__(self, page: Any, name: str) -> None:
        self.page, self.name, self.errors = page, name, []
        page.on("pageerror", lambda err: self.errors.append(str(err)))
        page.on("console", lambda msg: msg.type == "error" and self.errors.append(msg.text))

    async def shot(self, what: str, *, full: bool = True) -> Path:
        path = ARTIFACTS / f"{what}-{self.name}.png"
        if full:  # from the top, so that the sticky bar is where it belongs
            await self.page.evaluate("window.scrollTo(0, 0)")
        await self.page.screenshot(path=str(path), full_page=full)
        return path

    async def fits(self) -> None:
        """Nothing is wider than the screen (no sideways scrolling)."""
        width = await self.page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert width[0] <= width[1], f"{self.name}: the page is {width[0]} px wide on a {width[1]} px screen"


async def test_the_console_in_a_browser(
    agent_client: AgentClient, worker: Any, workspace: Path, tmp_path: Path
) -> None:
    chromium()  # skips without the browser (fails when AGENTLOOP_REQUIRE_BROWSER=1)
    from playwright.async_api import async_playwright, expect

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    gate = threading.Event()
    thread_model, _ = recording(lambda r: reply(f"answer {sum(1 for m in r.messages if m.role == 'user')}"))
    settings = ServerSettings(tokens=[OPS], temporal_ui=UI, default_workspace=str(workspace))
    with OpenAIServer() as provider:
        provider.enqueue(write_call(), gated_answer(gate))
        try:
            async with worker(models=openai_models(provider)), serve(agent_client, settings) as served, \
                    async_playwright() as playwright:
                browser = await launch(playwright)
                spec = AgentSpec(model="openai:gpt-4.1-mini", name="quarterly-note-taker", tools=["write_file"],
                                 default_permission="auto", stream_batch_seconds=0.02)
                run = await agent_client.start(spec, "Summarise my Q3 notes and keep the summary in a file.")
                await wait_state(run, lambda s: s.status == "awaiting_approval", "the write to wait for approval")

                desk = Page(await (await browser.new_context(**DESKTOP)).new_page(), "desktop")
                page = desk.page
                expect.set_options(timeout=30_000)

                # A token first: the server has one configured.
                await page.goto(served.url + "/")
                await page.fill("input[name=token]", SECRET)
                await page.click("button[type=submit]")
                # The runs waiting on someone: ours, with the tool it waits on.
                await page.click("button[data-filter=waiting]")
                row = page.locator(f'a.run-row[data-run-id="{run.run_id}"]')
                await expect(row).to_contain_text("awaiting approval")
                await expect(row).to_contain_text("note-taker")
                await expect(row).to_contain_text("write_file")
                await desk.shot("runs-waiting")

                # The run's page: the call's arguments as formatted JSON, and the decision buttons.
                await row.click()
                await page.wait_for_url(f"**/runs/{run.run_id}")
                decision = page.locator('.decision[data-call-id="call_write"]')
                await expect(decision.locator("pre.json")).to_contain_text('"file_path": "summary.md"')
                await expect(decision.locator("pre.json .k").first).to_have_text('"file_path"')
                # The arguments wrap: the end of a long value (a command's tail) stays in sight.
                assert await decision.locator("pre.json").evaluate("e => getComputedStyle(e).whiteSpace") == "pre-wrap"
                await expect(page.locator(".thinking")).to_contain_text("notes summarised")
                await expect(page.locator("#temporal-link")).to_have_attribute(
                    "href", f"{UI}/namespaces/{agent_client.temporal.namespace}/workflows/{run.run_id}")
                await expect(page.locator(".live")).to_have_text("live")
                await desk.shot("run-waiting", full=False)

                await decision.locator("input[name=reason]").fill("looks right")
                await decision.locator("button[data-decision=approve]").click()
                tool_card = page.locator('.tool[data-call-id="call_write"]')
                await expect(tool_card.locator(".decided")).to_have_text("approve by ops: looks right")
                await expect(tool_card.locator(".result")).to_be_visible()
                await expect(page.locator("#waiting")).to_be_hidden()

                # The answer streams in: its first half shows while the provider holds the rest.
                answer = page.locator(".msg.assistant .prose.text").last
                await expect(answer).to_contain_text("The summary is saved in summary.md.")
                await expect(answer.locator("code")).to_have_text("summary.md")
                await expect(page.locator("#run-ended")).to_have_count(0)
                await desk.shot("run-streaming")
                gate.set()
                await expect(page.locator("#run-ended")).to_have_attribute("data-status", "completed")
                await expect(answer.locator("ol li")).to_have_text(["revenue is up 12%", "two people joined the team"])
                await expect(answer.locator("strong")).to_have_text("two")
                await expect(page.locator("[data-status].badge").first).to_have_text("completed")
                await expect(page.locator("#cost")).to_have_text(re.compile(r"^\$0\.00\d\d$"))
                # Tool time and the wait for the approval are apart; every row's name is capitalised.
                await expect(page.locator("#approval-wait")).not_to_have_text("—")
                report = await run.report()
                assert report.total_approval_wait_ms > 0
                # The spec names no workspace: the run got the worker's, which the server knows.
                await expect(page.locator("#details")).to_contain_text(str(workspace))
                for name in await page.locator("dl.facts dt").all_inner_texts():
                    assert name[:1].isupper(), name
                await desk.shot("run-completed")
                assert (workspace / "summary.md").read_text() == SUMMARY
                assert (await run.result()).final_text == FIRST_HALF + SECOND_HALF

                # A thread's page: its first turn, then the next message sent from the page.
                first = await agent_client.start(AgentSpec(model=thread_model, name="helper"), "first question",
                                                 thread_id=f"chat-{run.run_id[-8:]}")
                assert (await first.result()).final_text == "answer 1"
                await page.goto(f"{served.url}/threads/{first.run_id}")
                conversation = page.locator("#conversation")
                await expect(conversation.locator(".msg.assistant .prose.text")).to_have_text(["answer 1"])
                await page.fill("#message", "second question")
                await page.click("#send")
                await expect(conversation.locator(".msg.user").last).to_contain_text("second question")
                await expect(conversation.locator(".msg.user").last).to_contain_text("by ops")
                await expect(conversation.locator(".msg.assistant .prose.text").last).to_have_text("answer 2")
                await expect(page.locator("#message")).to_have_value("")
                await desk.shot("thread")
                assert desk.errors == []

                # A phone's width: the same pages, nothing wider than the screen.
                phone_context = await browser.new_context(**PHONE)
                await phone_context.add_init_script(f"localStorage.setItem('agentloop.console.token', {SECRET!r})")
                phone = Page(await phone_context.new_page(), "phone")
                for url, ready, what in (
                    ("/", f'a.run-row[data-run-id="{run.run_id}"]', "runs"),
                    (f"/runs/{run.run_id}", "#run-ended", "run-completed"),
                    (f"/threads/{first.run_id}", "#conversation .msg.assistant >> nth=1", "thread"),
                ):
                    await phone.page.goto(served.url + url)
                    await expect(phone.page.locator(ready)).to_be_visible()
                    await phone.fits()
                    if what == "runs":  # the agent's name is whole, not cut beside the status badge
                        agent = phone.page.locator(f'a.run-row[data-run-id="{run.run_id}"] .agent')
                        assert await agent.evaluate("e => e.scrollWidth <= e.clientWidth"), await agent.inner_text()
                    await phone.shot(what)
                assert phone.errors == []
                await browser.close()
        finally:
            gate.set()


async def test_the_sub_agent_tree_links_every_run_of_a_delegation(agent_client: AgentClient, worker: Any) -> None:
    chromium()
    from playwright.async_api import async_playwright, expect

    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def sub(model: str, name: str, **fields: Any) -> SubAgent:
        return SubAgent(spec=AgentSpec(model=model, name=name, heartbeat_timeout_seconds=5, **fields),
                        description=f"The {name}.")

    checker = sub(script(reply("All three figures check out.")), "fact_checker")
    researcher = sub(script(calls(call("fact_checker", {"task": "Check the Q3 figures."})), echo_results),
                     "researcher", sub_agents={"fact_checker": checker})
    writer = sub(script(reply("A two-line summary, drafted.")), "writer")
    lead = AgentSpec(model=script(calls(call("researcher", {"task": "Find the Q3 figures."}),
                                        call("writer", {"task": "Draft the summary."})), echo_results),
                     name="lead", heartbeat_timeout_seconds=5, sub_agents={"researcher": researcher, "writer": writer})
    async with worker(), serve(agent_client) as served, async_playwright() as playwright:
        handle = await agent_client.start(lead, "Report on Q3.")
        await handle.result()
        report = await handle.report()
        children = {r.name: r.run_id for r in report.sub_runs}
        grandchild = (await agent_client.get_handle(children["researcher"]).report()).sub_runs[0].run_id
        browser = await launch(playwright)
        desk = Page(await (await browser.new_context(**DESKTOP)).new_page(), "desktop")
        await desk.page.goto(f"{served.url}/runs/{handle.run_id}")
        tree = desk.page.locator("#sub-agents .tree")
        await expect(tree.locator(":scope > li > .node a")).to_have_text(["researcher", "writer"], timeout=30_000)
        for name in ("researcher", "writer"):
            await expect(tree.locator(f'a[href="/runs/{children[name]}"]')).to_have_text(name)
        await expect(tree.locator(":scope > li ul a")).to_have_text(["fact_checker"])
        await expect(tree.locator(":scope > li ul a")).to_have_attribute("href", f"/runs/{grandchild}")
        await expect(desk.page.locator('.tool .sub-link a').first).to_have_attribute(
            "href", f"/runs/{children['researcher']}")
        await desk.shot("sub-agents")
        await tree.locator(":scope > li > .node a").first.click()
        await desk.page.wait_for_url(f"**/runs/{children['researcher']}")
        await expect(desk.page.locator("#sub-agents .tree a")).to_have_text(["fact_checker"], timeout=30_000)
        # "Compare with another run" (docs/diff.md): the page asks for run B, then shows both side by side.
        await desk.page.goto(f"{served.url}/runs/{handle.run_id}")
        await desk.page.locator("#compare-link").click()
        await desk.page.wait_for_url(f"**/diff?a={handle.run_id}")
        await desk.page.fill("input[name=b]", children["writer"])
        await desk.page.click("#diff-form button[type=submit]")
        await desk.page.wait_for_url(f"**/diff?a={handle.run_id}&b={children['writer']}")
        summary = desk.page.locator("#diff-summary")
        await expect(summary).to_contain_text("different tools: A researcher, writer; B none")
        await expect(desk.page.locator("#diff-definition")).to_contain_text("sub_agents")
        await expect(desk.page.locator(".diff-row.only_a .cell.a").first).to_contain_text("researcher")
        changed = desk.page.locator('.diff-row.changed[data-part="output"]')
        await expect(changed.locator(".cell.a del")).to_contain_text("researcher:fact_checker:")
        await expect(changed.locator(".cell.b")).to_have_text("A two-line summary, drafted.")
        await expect(desk.page.locator(f'#diff-runs a[href="/runs/{children["writer"]}"]')).to_be_visible()
        await desk.shot("diff")
        assert desk.errors == []
        phone = Page(await (await browser.new_context(**PHONE)).new_page(), "phone")
        await phone.page.goto(f"{served.url}/diff?a={handle.run_id}&b={children['writer']}")
        await expect(phone.page.locator("#diff-steps")).to_be_visible()
        await phone.fits()
        await phone.shot("diff")
        assert phone.errors == []
        await browser.close()
