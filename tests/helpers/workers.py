"""Worker subprocesses: ``agentloop worker --import MODULE`` on a test's
task queue, for tests that kill or restart a worker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from agentloop.workers.devserver import DevServer
from tests.helpers.paths import ROOT


def start_worker(
    server: DevServer, task_queue: str, log: Path, module: str = "tests.helpers.fixtures.durable_fixture",
    **extra_env: str,
) -> subprocess.Popen[bytes]:
    """``agentloop worker --import module`` on ``task_queue``, its output
    appended to ``log``; ``extra_env`` is added to its environment. Its
    workspace root is the directory above the log's (the session's
    temporary directory): runs may work in the test's ``tmp_path`` (a
    user's ``agentloop run`` from there) and in its ``workspace``."""
    env = dict(os.environ, TEMPORAL_ADDRESS=server.address, AGENTLOOP_TASK_QUEUE=task_queue,
               **{"AGENTLOOP_WORKSPACE_ROOTS": str(log.parent.parent), **extra_env})
    return subprocess.Popen(
        [sys.executable, "-m", "agentloop.cli", "worker", "--import", module],
        cwd=ROOT,
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )
