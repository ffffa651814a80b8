"""``/v1/quotas/{tenant}`` on a real uvicorn server: ``read`` reads, only
``admin`` sets, a bad tenant or bad limits are a sentence."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentloop import AgentClient
from agentloop.server import ServerSettings, parse_tokens
from agentloop.shared.runs.quotas import QuotaLimits
from tests.helpers.http_api import serve

ADMIN, OPS, DASH = "admin-secret-0123456789", "ops-secret-0123456789", "dash-secret-0123456789"
TOKENS = parse_tokens(f"root:admin:{ADMIN},ops:act:{OPS},dashboard:read:{DASH}")


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


async def test_read_reads_admin_sets(agent_client: AgentClient, worker: Callable[..., Any], task_queue: str) -> None:
    tenant = f"http-{task_queue}"
    limits = {"usd": 50, "window_seconds": 86400, "at_limit": "wait"}
    async with worker(), serve(agent_client, ServerSettings(tokens=TOKENS, registered_only=False)) as api:
        http = api.http
        assert (await http.get(f"/v1/quotas/{tenant}")).status_code == 401
        missing = await http.get(f"/v1/quotas/{tenant}", headers=bearer(DASH))
        assert missing.status_code == 404 and "has no quota" in missing.json()["detail"]
        for secret in (DASH, OPS):
            refused = await http.put(f"/v1/quotas/{tenant}", json=limits, headers=bearer(secret))
            assert refused.status_code == 403 and "needs 'admin'" in refused.json()["detail"]
        bad = await http.put(f"/v1/quotas/{tenant}", json={"usd": -1}, headers=bearer(ADMIN))
        assert bad.status_code == 422
        empty = await http.put(f"/v1/quotas/{tenant}", json={}, headers=bearer(ADMIN))
        assert empty.status_code == 422 and "limits tokens" in empty.json()["detail"]
        done = await http.put(f"/v1/quotas/{tenant}", json=limits, headers=bearer(ADMIN))
        assert done.status_code == 200, done.text
        shown = await http.get(f"/v1/quotas/{tenant}", headers=bearer(DASH))
        assert shown.status_code == 200 and shown.json()["limits"]["usd"] == 50
        assert (await http.get("/v1/quotas/a%20b", headers=bearer(DASH))).status_code == 422


async def test_the_console_shows_a_tenants_quota(
    agent_client: AgentClient, worker: Callable[..., Any], task_queue: str
) -> None:
    from tests.helpers.browser import chromium, launch

    chromium()  # skips without the browser (fails when AGENTLOOP_REQUIRE_BROWSER=1)
    from playwright.async_api import async_playwright, expect

    tenant = f"console-{task_queue}"
    async with worker(), serve(agent_client, ServerSettings(tokens=TOKENS, registered_only=False)) as api, \
            async_playwright() as playwright:
        shell = await api.http.get(f"/quotas/{tenant}")
        assert shell.status_code == 200 and 'data-page="quota"' in shell.text
        await agent_client.quotas.set(tenant, QuotaLimits(usd=50, at_limit="fail"))
        browser = await launch(playwright)
        page = await (await browser.new_context()).new_page()
        await page.goto(f"{api.url}/quotas/{tenant}")
        await page.fill("input[name=token]", DASH)
        await page.click("button[type=submit]")
        await page.goto(f"{api.url}/quotas/{tenant}")
        facts = page.locator("#quota")
        await expect(facts).to_contain_text("$50.00 per 86400s (at the limit: fail)", timeout=30_000)
        await expect(facts).to_contain_text("reserved")
        await browser.close()
