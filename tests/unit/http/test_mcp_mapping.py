"""The pure MCP mapping (agentloop/server/mcp/mapping.py): tools from specs,
arguments, results, tasks, elicitations and their answers; the ``mcp``
package's Host/Origin checks derived from the server's doors; who a stdio
server acts as."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agentloop import AgentSpec
from agentloop.server.access.doors import doors_for
from agentloop.server.mcp import mapping
from agentloop.server.mcp.door import transport_security
from agentloop.server.mcp.stdio import stdio_identity
from agentloop.server.settings import ServerSettings, parse_tokens
from agentloop.shared.base.errors import UserError
from agentloop.shared.definition.activity_io import StreamDelta
from agentloop.shared.definition.approvals import PendingAction, PendingApproval, PendingWork
from agentloop.shared.runs.events import MessageDelta, MessageReset, StepCreated

NOW = datetime(2026, 7, 28, tzinfo=UTC)


def waiting() -> PendingWork:
    return PendingWork(
        approvals=[PendingApproval(call_id="c1", tool_name="write_file", arguments={"file_path": "a.txt"}, step=1,
                                   asked_at=NOW, reason="writes ask first")],
        actions=[PendingAction(call_id="c2", tool_name="pick", arguments={"n": 2}, step=1, asked_at=NOW,
                               reason="client_tool")])


def test_a_spec_is_a_tool_with_the_message_and_a_typed_output() -> None:
    plain = mapping.tool_entry("helper", AgentSpec(model="scripted:x", system_prompt="You triage tickets.\nMore."))
    assert plain["inputSchema"]["required"] == ["message"] and "outputSchema" not in plain
    assert plain["description"].endswith(": You triage tickets.")
    typed = mapping.tool_entry("n", AgentSpec(model="scripted:x", output={"type": "integer"}))
    assert typed["outputSchema"] == {"type": "object", "properties": {"result": {"type": "integer"}},
                                     "required": ["result"]}


def test_arguments() -> None:
    assert mapping.read_arguments({"message": "go"}) == mapping.Message("go")
    assert "only `message`" in mapping.read_arguments({"message": "go", "x": 1}).detail  # type: ignore[union-attr]
    assert "required" in mapping.read_arguments(None).detail  # type: ignore[union-attr]
    assert isinstance(mapping.read_arguments({"message": "  "}), mapping.BadArguments)


def test_results() -> None:
    assert mapping.call_result("completed", "{}", {"a": 1}, None)["structuredContent"] == {"a": 1}
    assert mapping.call_result("completed", "3", 3, None)["structuredContent"] == {"result": 3}
    assert "structuredContent" not in mapping.call_result("completed", "hi", None, None)
    failed = mapping.call_result("failed", "", None, "boom")
    assert failed["isError"] and failed["content"][0]["text"] == "the run ended failed: boom"


def test_tasks_and_their_input_requests() -> None:
    requests = mapping.input_requests("writer", waiting())
    assert set(requests) == {"approve:c1", "output:c2"}
    asked = requests["approve:c1"]["params"]
    assert "write_file" in asked["message"] and "a.txt" in asked["message"] and "writes ask first" in asked["message"]
    assert asked["requestedSchema"] == mapping.DECISION_SCHEMA and asked["mode"] == "form"
    task = mapping.task_view("r1", "input_required", "t0", "t1", requests=requests)
    assert task["taskId"] == "r1" and task["inputRequests"] is requests and task["ttlMs"] is None
    assert mapping.task_view("r1", "completed", "t0", "t1")["result"] == {"content": [], "isError": False}
    assert mapping.task_view("r1", "failed", "t0", "t1")["error"]["code"] == -32603
    assert mapping.live_status("awaiting_approval") == "input_required" == mapping.live_status("requires_action")
    assert mapping.live_status("running") == "working"


def test_answers() -> None:
    pending = waiting()
    read = mapping.read_responses
    assert read({"approve:c1": {"action": "accept", "content": {"decision": "skip", "result": "no"}}}, pending) == \
        [mapping.Decide("c1", "skip", result="no")]
    assert read({"approve:c1": {"action": "decline"}}, pending) == [mapping.Decide("c1", "deny",
                                                                                   reason="declined over MCP")]
    # Unknown or answered keys are ignored; a cancelled elicitation leaves the call waiting.
    assert read({"approve:zz": {"action": "accept"}, "approve:c1": {"action": "cancel"}}, pending) == []
    assert isinstance(read({"approve:c1": {"action": "accept", "content": {}}}, pending)[0], mapping.Refused)
    assert read({"output:c2": {"action": "accept", "content": {"output": "2"}}}, pending) == \
        [mapping.Submit({"c2": "2"})]
    two = PendingWork(actions=[*pending.actions, pending.actions[0].model_copy(update={"call_id": "c3"})])
    [partial] = read({"output:c2": {"action": "accept", "content": {"output": "2"}}}, two)
    assert isinstance(partial, mapping.Refused) and "output:c3" in partial.detail


def test_transport_security_follows_the_doors() -> None:
    local = transport_security(doors_for(tokens=False, allowed_hosts=["agents.example"], cors_origins=[], port=8420))
    assert local.enable_dns_rebinding_protection
    assert "127.0.0.1:8420" in local.allowed_hosts and "agents.example:8420" in local.allowed_hosts
    assert "http://localhost:8420" in local.allowed_origins
    anywhere = transport_security(doors_for(tokens=True, allowed_hosts=[], cors_origins=[], port=8420))
    assert not anywhere.enable_dns_rebinding_protection


def test_stdio_identity() -> None:
    settings = ServerSettings(tokens=parse_tokens("ci:read:ci-secret-0123456789:agents=a"))
    assert stdio_identity(settings, {}).scope == "act"
    token = stdio_identity(settings, {"AGENTLOOP_MCP_TOKEN": "ci-secret-0123456789"})
    assert (token.name, token.scope, token.agents) == ("ci", "read", ("a",))
    with pytest.raises(UserError, match="not the secret of a token"):
        stdio_identity(settings, {"AGENTLOOP_MCP_TOKEN": "wrong-secret-0123456789"})


def test_progress_messages_and_a_retried_attempt_s_reset() -> None:
    def delta(kind: str, text: str) -> MessageDelta:
        return MessageDelta(run_id="r", time=NOW, message_id="m", delta=StreamDelta(kind=kind, text=text))  # type: ignore[arg-type]

    assert mapping.progress_text(StepCreated(run_id="r", time=NOW, step=1)) == "step 2"
    assert mapping.progress_text(delta("text", "Hel")) == "Hel"
    assert mapping.progress_text(delta("thinking", "hmm")) is None and mapping.progress_text(delta("text", "")) is None
    reset = MessageReset(run_id="r", time=NOW, message_id="m", attempt=2, reason="OpenAI server error (503)")
    assert mapping.progress_text(reset) == f"{mapping.RESET_PREFIX} (attempt 2)"
