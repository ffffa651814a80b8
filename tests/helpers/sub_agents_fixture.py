"""A lead and a member for the kill-the-worker test of sub-agents, imported
by worker subprocesses with ``agentloop worker --import tests.helpers.sub_agents_fixture``."""

from __future__ import annotations

from agentloop.testing import call, calls, last_tool_results, register_scripted_model, reply
from tests.helpers.durable_fixture import block, record  # noqa: F401  (the tools the member calls)

register_scripted_model(
    "sub-lead",
    [
        calls(call("member", {"task": "record, then block"})),
        lambda request: reply("lead heard: " + " | ".join(r.content for r in last_tool_results(request))),
    ],
)

register_scripted_model(
    "sub-member",
    [
        calls(call("record", {"label": "a"})),
        calls(call("block")),
        reply("member survived"),
    ],
)
