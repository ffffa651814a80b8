"""The provider contract through the ``agentloop`` command (a subprocess
with its own local worker), for each provider: ``--max-tokens`` is the
output limit sent to the provider and the one a length failure names."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentloop.workers.devserver import DevServer
from tests.helpers.cli import agentloop, clean_env
from tests.helpers.provider_cases import CASES, ProviderCase


@pytest.mark.parametrize("provider", CASES, ids=[case.id for case in CASES])
async def test_agentloop_run_max_tokens_is_the_limit_sent_and_named(
    provider: ProviderCase, tmp_path: Path, workspace: Path, dev_server: DevServer, task_queue: str
) -> None:
    with provider.server() as server:
        server.enqueue(provider.reply(text="On and", finish="length"))
        env = clean_env(
            tmp_path,
            TEMPORAL_ADDRESS=dev_server.address,
            AGENTLOOP_TASK_QUEUE=task_queue,
            **{provider.provider.key_variable: "sk-test-fake", provider.provider.base_url_variable: server.base_url},
        )
        proc = await asyncio.to_thread(
            agentloop, "run", "Ramble", "--model", provider.spec_model(), "--workspace", str(workspace),
            "--max-tokens", "77", "--local-worker", env=env, cwd=tmp_path,
        )
    assert proc.returncode == 1, proc.stderr
    assert server.requests[0].json[provider.limit_field] == 77
    assert "(max_tokens=77, from AgentSpec.max_tokens); raise AgentSpec.max_tokens" in proc.stdout + proc.stderr
