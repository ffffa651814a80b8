"""The garbage collector's thresholds in a worker process of the agentloop
command (``AGENTLOOP_GC_THRESHOLD``; README "Performance")."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from agentloop.shared.base.errors import UserError
from agentloop.workers.config import PROVIDER_KEY_VARIABLES, TemporalConfig, gc_threshold_from_env
from agentloop.workers.worker import run_worker, tune_collector


@pytest.fixture
def thresholds() -> Iterator[None]:
    saved = gc.get_threshold()
    yield
    gc.set_threshold(*saved)


def test_the_thresholds_come_from_the_environment_and_default_to_pythons() -> None:
    assert gc_threshold_from_env({}) is None
    assert gc_threshold_from_env({"AGENTLOOP_GC_THRESHOLD": "python"}) is None
    assert gc_threshold_from_env({"AGENTLOOP_GC_THRESHOLD": " Python "}) is None
    assert gc_threshold_from_env({"AGENTLOOP_GC_THRESHOLD": "2000"}) == (2000,)
    assert gc_threshold_from_env({"AGENTLOOP_GC_THRESHOLD": "700, 10,100"}) == (700, 10, 100)


@pytest.mark.parametrize("value", ["fast", "1,2,3,4", "-5", "700,,100", "1.5"])
def test_a_malformed_value_is_a_sentence(value: str) -> None:
    with pytest.raises(UserError) as caught:
        gc_threshold_from_env({"AGENTLOOP_GC_THRESHOLD": value})
    message = str(caught.value)
    assert "AGENTLOOP_GC_THRESHOLD" in message and "'python'" in message and "700,10,100" in message


def test_tune_collector_sets_them_or_keeps_pythons(thresholds: None) -> None:
    gc.set_threshold(700, 10, 10)
    assert tune_collector({}) is None
    assert gc.get_threshold() == (700, 10, 10)
    assert tune_collector({"AGENTLOOP_GC_THRESHOLD": "700,10,100"}) == (700, 10, 100)
    assert gc.get_threshold() == (700, 10, 100)
    assert tune_collector({"AGENTLOOP_GC_THRESHOLD": "3000,5"}) == (3000, 5)
    assert gc.get_threshold() == (3000, 5, 100)


async def test_agentloop_worker_refuses_a_malformed_value_before_it_connects(
        thresholds: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTLOOP_GC_THRESHOLD", "Lots")
    # Nothing listens there: the worker must stop at the setting, not at the connection.
    config = TemporalConfig(address="127.0.0.1:1", namespace="default", task_queue="gc-check", imports=[],
                            role="all", source="the test")
    with pytest.raises(UserError, match="AGENTLOOP_GC_THRESHOLD='Lots'"):
        await run_worker(config)


async def test_agentloop_worker_sets_the_thresholds_it_is_given(
        thresholds: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTLOOP_GC_THRESHOLD", "1234,11,111")
    for key in PROVIDER_KEY_VARIABLES:  # a tools worker refuses them; role tools leaves this process dumpable
        monkeypatch.delenv(key, raising=False)
    config = TemporalConfig(address="127.0.0.1:1", namespace="default", task_queue="gc-check", imports=[],
                            role="tools", source="the test")
    with pytest.raises(Exception):  # noqa: B017 (nothing listens: any connection error ends it)
        await run_worker(config)
    assert gc.get_threshold() == (1234, 11, 111)
