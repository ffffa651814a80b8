"""Scripts for the escape test, imported by worker subprocesses with
``agentloop worker --import tests.helpers.escape_fixture``.

``escape``: the model asks the shell to run ``$AGENTLOOP_TEST_ESCAPE`` (a
command that tries to start a wider run through every door on loopback).
``wide``: the run it would start, whose shell would read ``/etc/shadow`` and
leave ``$AGENTLOOP_TEST_MARKER`` outside every workspace.
"""

from __future__ import annotations

import os

from agentloop.testing import call, calls, register_scripted_model, reply

register_scripted_model("escape", [calls(call("shell_command", {"command": os.environ.get("AGENTLOOP_TEST_ESCAPE",
                                                                                          "true")})),
                                   reply("tried")])
register_scripted_model("wide", [calls(call("shell_command", {
    "command": f"cat /etc/shadow; touch {os.environ.get('AGENTLOOP_TEST_MARKER', '/nonexistent/marker')}"})),
    reply("done")])
