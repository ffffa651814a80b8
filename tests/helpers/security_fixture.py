"""A scripted model that tries every known way to read the worker's provider
keys from ``shell_command``, and a Python tool that reports its own process's
environment; imported by the CLI and worker subprocesses of
``tests/process/test_security.py`` with ``--import tests.helpers.security_fixture``.

The model runs where the keys are (the process that calls models), so
``os.getpid()`` here is the pid a prompt-injected agent would go after.
"""

from __future__ import annotations

import os

from agentloop import ToolContext, tool
from agentloop.testing import call, calls, register_scripted_model, reply

_WORKER_PID = os.getpid()

#: Shell commands that printed the worker's environment before the sandbox.
TRICKS = [
    "cat /proc/$PPID/environ",
    "ps eww -p $PPID",
    "cat /proc/*/environ",
    # Filtered, so tool_output_limit cannot cut the interesting part out.
    "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -ai -e key -e url -e token",
    "env",
    "tr '\\0' '\\n' < /proc/1/environ",
    f"cat /proc/{_WORKER_PID}/environ; tr '\\0' '\\n' < /proc/{os.getppid()}/environ",
    "for pid in $(pgrep -f agentloop) $(ps -eo pid=); do tr '\\0' '\\n' < /proc/$pid/environ; done",
    "ps eww ax",
    "python3 -c \"import os\nfor p in os.listdir('/proc'):\n  try: e = open('/proc/'+p+'/environ','rb').read()\n"
    "  except OSError: continue\n  print(p, [v for v in e.split(b'\\\\0') if b'KEY' in v or b'URL' in v])\"",
    "cat /proc/self/environ /proc/$$/environ; echo; echo pid=$$ ppid=$PPID",
]

register_scripted_model(
    "security-tricks",
    [
        calls(*[call("shell_command", {"command": trick}) for trick in TRICKS]),
        reply("tried them all"),
    ],
)


@tool(read_only=True)
async def python_environ(ctx: ToolContext) -> str:
    """Report this tool process's environment (what any Python tool can read)."""
    return "\n".join(f"{k}={v}" for k, v in sorted(os.environ.items())) + f"\npid={os.getpid()}"


register_scripted_model(
    "security-split",
    [
        calls(
            *[call("shell_command", {"command": trick}) for trick in TRICKS],
            call("python_environ"),
        ),
        reply("tried them all"),
    ],
)


def _run_the_input(request):  # type: ignore[no-untyped-def]
    """Step 1 runs the user's message as a shell command; then the run answers."""
    from agentloop.activities.providers.scripted_model import step_of

    if step_of(request) == 0:
        command = next(m.text for m in request.messages if m.role == "user")
        return calls(call("shell_command", {"command": command, "timeout_seconds": 900}))
    return reply("done")


register_scripted_model("run-the-input", _run_the_input)
