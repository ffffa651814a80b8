"""Temporal activities as tools: the run schedules the activity itself, on
its own task queue, served by a second worker process that knows only its
activities (tests/helpers/fixtures/activity_tool_worker.py), not agentloop."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentloop import AgentClient, AgentSpec, activity_as_tool
from agentloop.shared.definition.activity_tools import ActivityTool
from agentloop.testing import call, calls, reply, script
from agentloop.workers.devserver import DevServer
from tests.helpers.fixtures.activity_tool_worker import charge_card
from tests.helpers.paths import ROOT


class Payments:
    def __init__(self, queue: str, ledger: Path) -> None:
        self.queue, self.ledger = queue, ledger

    def entries(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.ledger.read_text().splitlines()]


@pytest.fixture
def payments(dev_server: DevServer, tmp_path: Path) -> Iterator[Payments]:
    """The second worker process, on a queue of its own."""
    queue, ledger = f"payments-{uuid.uuid4().hex[:8]}", tmp_path / "ledger.jsonl"
    process = subprocess.Popen([sys.executable, "-m", "tests.helpers.fixtures.activity_tool_worker",
                                dev_server.address, queue,
                                str(ledger)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        yield Payments(queue, ledger)
    finally:
        process.terminate()
        process.wait(15)


def tools_for(queue: str) -> list[ActivityTool]:
    account = {"type": "object", "properties": {"account": {"type": "string"}}, "required": ["account"]}
    return [
        activity_as_tool(charge_card, task_queue=queue, initial_interval_seconds=0.2),
        ActivityTool(name="lookup_account", description="An account's balance.", parameters=account,
                     activity="lookup_account", task_queue=queue, read_only=True),
        ActivityTool(name="close_account", parameters=account, activity="close_account", task_queue=queue),
    ]


async def test_activities_on_another_queue_are_tools(worker: Any, agent_client: AgentClient,
                                                     payments: Payments) -> None:
    model = script(
        calls(call("charge_card", {"account": "acct-1", "amount_cents": 1250}, id="c1"),
              call("lookup_account", {"account": "acct-1"}, id="l1"),
              call("close_account", {"account": "acct-1"}, id="x1")),
        reply("charged"),
    )
    spec = AgentSpec(model=model, activity_tools=tools_for(payments.queue), default_permission="allow")
    async with worker():  # agentloop's worker: it does not know these activities
        handle = await agent_client.start(spec, "charge acct-1 12.50")
        result = await handle.result()
    assert result.final_text == "charged"
    results = {r.name: r for m in result.messages for r in m.tool_results}
    assert json.loads(results["charge_card"].content) == {"account": "acct-1", "charged_cents": 1250,
                                                          "currency": "EUR"}
    assert not results["charge_card"].is_error
    assert results["lookup_account"].content.startswith("account acct-1: balance 1200 EUR (key ")
    assert results["close_account"].is_error
    assert results["close_account"].content == (
        f"Tool 'close_account' (activity close_account on {payments.queue}) failed: "
        "account acct-1 has a pending charge")
    # The failed first attempt and the retry carried the same key; it charged once.
    charges = [e for e in payments.entries()]
    assert [e["attempt"] for e in charges] == [1, 2]
    assert charges[0]["key"] == charges[1]["key"] and charges[0]["key"].startswith(f"{handle.run_id}/")
    assert charges[0]["key"].endswith("/c1") and [e["charged"] for e in charges] == [False, True]
    report = next(r for s in result.report.steps for r in s.tool_calls if r.tool_name == "charge_card")
    assert report.metrics["activity"] == "charge_card" and report.metrics["idempotency_key"] == charges[0]["key"]


async def test_an_activity_that_keeps_failing_is_an_error_result_after_its_attempts(
        worker: Any, agent_client: AgentClient, payments: Payments) -> None:
    tool = activity_as_tool(charge_card, task_queue=payments.queue, max_attempts=1)
    spec = AgentSpec(model=script(calls(call("charge_card", {"account": "a", "amount_cents": 1})), reply("sorry")),
                     activity_tools=[tool], default_permission="allow", max_consecutive_failed_tool_steps=2)
    async with worker():
        result = await agent_client.run(spec, "charge")
    (charged,) = [r for m in result.messages for r in m.tool_results]
    assert charged.is_error and charged.content == (
        f"Tool 'charge_card' (activity charge_card on {payments.queue}) failed after 1 attempt: "
        "the card network timed out")


async def test_arguments_that_do_not_match_the_schema_are_an_error_result_not_a_call(
        worker: Any, agent_client: AgentClient, temporal_client: Any, payments: Payments) -> None:
    model = script(
        calls(call("charge_card", {"account": "acct-1", "amount_cents": "a lot"}, id="c1"),
              call("lookup_account", {"account": 12}, id="l1")),
        calls(call("lookup_account", {"account": "acct-1"}, id="l2")),
        reply("done"),
    )
    spec = AgentSpec(model=model, activity_tools=tools_for(payments.queue), default_permission="allow",
                     max_consecutive_failed_tool_steps=2)
    async with worker():
        handle = await agent_client.start(spec, "charge acct-1")
        result = await handle.result()
    charged, looked_up, again = [r for m in result.messages for r in m.tool_results]
    schema = json.dumps(tools_for("q")[0].parameters, separators=(",", ":"))
    assert charged.is_error and charged.content == (
        "Invalid arguments for tool 'charge_card': amount_cents: 'a lot' is not of type 'integer'. Expected "
        f"arguments matching this JSON schema: {schema}")
    assert looked_up.is_error and looked_up.content.startswith(
        "Invalid arguments for tool 'lookup_account': account: 12 is not of type 'string'.")
    assert not again.is_error and again.content.startswith("account acct-1: balance")
    # Neither invalid call reached the payments worker: only the valid lookup was scheduled.
    history = await temporal_client.get_workflow_handle(handle.run_id).fetch_history()
    scheduled = [e.activity_task_scheduled_event_attributes.activity_type.name for e in history.events
                 if e.HasField("activity_task_scheduled_event_attributes")]
    assert "charge_card" not in scheduled and scheduled.count("lookup_account") == 1
    assert not payments.ledger.exists() or payments.entries() == []


async def test_tool_hooks_apply_to_activity_tools(worker: Any, agent_client: AgentClient, registry: Any,
                                                  payments: Payments) -> None:
    from agentloop import AgentRunFailed, EndRun, Fallback, Override, Skip, before_tool_call, on_tool_error

    keys: list[str] = []

    @before_tool_call(registry=registry)
    def guard(call, ctx):
        keys.append(ctx.idempotency_key)
        if call.tool_name == "charge_card" and call.arguments.get("amount_cents", 0) > 100_000:
            return Skip("charges over 1000 EUR need a person")
        if call.tool_name == "lookup_account" and call.arguments.get("account") == "acct-9":
            return Override({"account": "acct-9", "balance": 0})
        return None

    @on_tool_error(registry=registry)
    def rescue(call, error, ctx):
        if call.tool_name == "close_account":
            return Fallback(f"closing waits for the charge to settle ({error.split(': ')[-1]})")
        return None

    @on_tool_error(registry=registry)
    def stop_on_close(call, error, ctx):
        return EndRun("an account could not be closed") if call.tool_name == "close_account" else None

    model = script(
        calls(call("charge_card", {"account": "acct-1", "amount_cents": 500_000}, id="c1"),
              call("lookup_account", {"account": "acct-9"}, id="l1"),
              call("close_account", {"account": "acct-1"}, id="x1")),
        reply("done"),
    )
    tools = tools_for(payments.queue)
    async with worker():
        handle = await agent_client.start(AgentSpec(model=model, activity_tools=tools, default_permission="allow",
                                                    tool_hooks=["guard", "rescue"]), "tidy up acct-1")
        result = await handle.result()
        with pytest.raises(AgentRunFailed) as ended:
            await agent_client.run(AgentSpec(model=script(calls(call("close_account", {"account": "acct-1"})),
                                                          reply("unreachable")),
                                             activity_tools=tools, default_permission="allow",
                                             tool_hooks=["stop_on_close"]), "close acct-1")
    results = {r.name: r for m in result.messages for r in m.tool_results}
    assert (results["charge_card"].content, results["charge_card"].is_error) == (
        "charges over 1000 EUR need a person", False)
    assert json.loads(results["lookup_account"].content) == {"account": "acct-9", "balance": 0}
    assert (results["close_account"].content, results["close_account"].is_error) == (
        "closing waits for the charge to settle (account acct-1 has a pending charge)", False)
    assert not payments.ledger.exists()  # the skipped charge never reached the payments worker
    hooks = {r.tool_name: r.metrics.get("hook") for s in result.report.steps for r in s.tool_calls}
    assert hooks == {"charge_card": "skipped", "lookup_account": "override", "close_account": "fallback"}
    assert len(keys) == 3 and all(k.startswith(f"{handle.run_id}/") for k in keys) and len(set(keys)) == 3
    assert ended.value.reason == "tool_error"
    assert ended.value.result.error == (
        "a tool hook ended the run after close_account failed: an account could not be closed")
