"""deploy/register-search-attributes.sh, the script compose.yaml's
``search-attributes`` service and the Kubernetes Job run, run for real with
the ``temporal`` CLI against the session's server: in a namespace created for
the test it registers every attribute the worker requires, then a second run
changes nothing and succeeds (compose runs it on every ``up``)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from pathlib import Path

from agentloop.shared.runs.search_attributes import SEARCH_ATTRIBUTES
from agentloop.workers.devserver import DevServer, find_temporal_binary
from agentloop.workers.worker import connect, missing_search_attributes
from tests.helpers.cli import run_temporal
from tests.helpers.paths import ROOT

SCRIPT = ROOT / "deploy" / "register-search-attributes.sh"


def run_script(server: DevServer, namespace: str) -> subprocess.CompletedProcess[str]:
    """The script as the admin-tools container runs it: ``sh``, the CLI on
    PATH, the server and namespace in the environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TEMPORAL_")}
    env.update(PATH=f"{Path(find_temporal_binary()).parent}{os.pathsep}{env.get('PATH', '')}",
               TEMPORAL_ADDRESS=server.address, TEMPORAL_NAMESPACE=namespace)
    return subprocess.run(["sh", str(SCRIPT)], check=False, env=env, capture_output=True, text=True, timeout=240)


async def test_the_script_registers_every_attribute_once(dev_server: DevServer) -> None:
    await dev_server.wait_ready()
    namespace = f"deploy-{uuid.uuid4().hex[:8]}"
    created = await run_temporal(dev_server, "operator", "namespace", "create", "--namespace", namespace)
    assert created.returncode == 0, created.stderr
    client = await connect(dev_server.address, namespace)
    assert sorted(await missing_search_attributes(client) or []) == sorted(SEARCH_ATTRIBUTES)

    first = await asyncio.to_thread(run_script, dev_server, namespace)
    assert first.returncode == 0, first.stdout + first.stderr
    assert f"registered in namespace {namespace}" in first.stdout
    assert first.stdout.count("Search attributes have been added") == len(SEARCH_ATTRIBUTES)
    assert await missing_search_attributes(client) == []

    again = await asyncio.to_thread(run_script, dev_server, namespace)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "have been added" not in again.stdout and again.stderr == ""
    assert f"registered in namespace {namespace}" in again.stdout
