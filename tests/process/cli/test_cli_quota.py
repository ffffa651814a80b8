"""``agentloop quota set`` and ``show`` against the dev server and a worker."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.helpers.cli import agentloop_async


async def test_quota_set_and_show(env: dict[str, str], worker: Callable[..., Any], task_queue: str) -> None:
    tenant = f"cli-{task_queue}"
    missing = await agentloop_async("quota", "show", tenant, env=env)
    assert missing.code == 2 and f"tenant {tenant!r} has no quota" in missing.err
    bad = await agentloop_async("quota", "set", tenant, "--per", "1d", env=env)
    assert bad.code == 2 and "give --usd, --tokens or both" in bad.err
    bad = await agentloop_async("quota", "set", tenant, "--usd", "5", "--per", "soon", env=env)
    assert bad.code == 2 and "--per: window 'soon' is not a positive duration" in bad.err
    async with worker():
        done = await agentloop_async("quota", "set", tenant, "--usd", "50", "--tokens", "1000", "--per", "1d",
                                     "--at-limit", "fail", env=env)
        assert done.code == 0, done.err
        assert "$50.0000 per 86400s (at the limit: fail)" in done.out
        shown = await agentloop_async("quota", "show", tenant, "--json", env=env)
    assert shown.code == 0, shown.err
    view = json.loads(shown.out)
    assert view["limits"] == {"tokens": 1000, "usd": 50.0, "window_seconds": 86400.0, "at_limit": "fail",
                              "chunk_tokens": None, "chunk_usd": None}
    assert view["spent"] == {"tokens": 0, "usd": 0.0} and view["holders"] == {}
