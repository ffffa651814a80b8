"""The unit tier runs without a Temporal server: a unit test that asks for
one (directly or through temporal_client, agent_client, worker, env,
spawn_worker) fails here instead of starting it. Such a test belongs in
tests/server/ or tests/process/."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def dev_server() -> None:
    pytest.fail("a unit test asked for the Temporal dev server; move it to tests/server/ or tests/process/")
