"""Whether the agent workflow runs in Temporal's workflow sandbox, read from
the worker's environment once, when :mod:`agentloop.workflows.agent_run` is
imported (the workflow definition takes it as ``sandboxed=``)."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

#: Set to 1 to run the agent workflow inside Temporal's workflow sandbox.
WORKFLOW_SANDBOX_VARIABLE = "AGENTLOOP_WORKFLOW_SANDBOX"


def workflow_sandbox_from_env(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``AgentRunWorkflow`` runs in Temporal's workflow sandbox:
    ``AGENTLOOP_WORKFLOW_SANDBOX=1`` (or true, yes, on); off by default.

    The sandbox re-checks, on every workflow task, that workflow code makes
    no non-deterministic call (clocks, randomness, I/O), and it cost a fifth
    of a worker's CPU under load (docs/performance.md). agentloop's
    workflow code makes none, and its test suite runs with the sandbox on, so
    a mistake fails there; production workers run without it. Read once,
    when ``agentloop.workflows.agent_run`` is imported. A value that is not
    one of 1, 0, true, false, yes, no, on, off turns the sandbox on (the safe
    side) and is logged.
    """
    env = os.environ if environ is None else environ
    value = env.get(WORKFLOW_SANDBOX_VARIABLE, "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return False
    if value not in ("1", "true", "yes", "on"):
        logging.getLogger("agentloop").warning(
            "%s=%r is not 1 or 0 (true/false, yes/no, on/off); the agent workflow runs in the sandbox",
            WORKFLOW_SANDBOX_VARIABLE, value)
    return True
