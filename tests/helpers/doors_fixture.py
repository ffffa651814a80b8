"""A script for the rebinding test, imported by worker subprocesses with
``agentloop worker --import tests.helpers.doors_fixture``: the model asks the
shell to leave a file named ``pwned`` in the workspace."""

from __future__ import annotations

from agentloop.testing import call, calls, register_scripted_model, reply

register_scripted_model("rebind", [calls(call("shell_command", {"command": "touch pwned"})), reply("done")])
