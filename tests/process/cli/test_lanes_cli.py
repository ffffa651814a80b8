"""``agentloop lanes`` against the dev server: it shows what `temporal
task-queue config set` set, sets what `temporal task-queue config get`
reads, and answers bad input with a sentence."""

from __future__ import annotations

import json

from agentloop.workers.devserver import DevServer
from tests.helpers.cli import agentloop_async, run_temporal


async def test_lanes_lists_and_sets_the_lanes_limits(dev_server: DevServer, env: dict[str, str],
                                                       task_queue: str) -> None:
    openai = f"{task_queue}-llm-openai"
    # Set with the plain Temporal CLI: `agentloop lanes` shows it.
    done = await run_temporal(dev_server, "task-queue", "config", "set", "--task-queue", openai,
                              "--task-queue-type", "activity", "--queue-rps-limit", "20",
                              "--queue-rps-limit-reason", "provider tier 2")
    assert done.returncode == 0, done.stderr
    shown = await agentloop_async("lanes", "--json", "--lane", "eu-proxy", env=env)
    assert shown.code == 0, shown.err
    lanes = {lane["lane"]: lane for lane in map(json.loads, shown.out.splitlines())}
    assert list(lanes) == ["openai", "anthropic", "scripted", "eu-proxy"]
    assert lanes["openai"] == {"lane": "openai", "queue": openai, "rps_limit": 20.0,
                               "fairness_key_rps_limit_default": None, "fairness_key_weights": {}, "backlog": 0,
                               "pollers": 0}
    assert lanes["anthropic"]["rps_limit"] is None
    # Set with `agentloop lanes set`: the plain Temporal CLI reads it.
    done_set = await agentloop_async("lanes", "set", "anthropic", "--rps", "4.5", "--fairness-key-weight", "acme=2",
                                     "--fairness-key-weight", "small=0.5", "--fairness-key-rps-limit-default", "1",
                                     env=env)
    assert done_set.code == 0, done_set.err
    assert done_set.out == f"lane anthropic: set on task queue {task_queue + '-llm-anthropic'!r}\n"
    got = await run_temporal(dev_server, "task-queue", "config", "get", "--task-queue",
                             f"{task_queue}-llm-anthropic", "--task-queue-type", "activity", "-o", "json")
    assert got.returncode == 0, got.stderr
    config = json.loads(got.stdout)
    assert config["queueRateLimit"]["rateLimit"]["requestsPerSecond"] == 4.5
    assert config["fairnessKeysRateLimitDefault"]["rateLimit"]["requestsPerSecond"] == 1
    assert config["fairnessWeightOverrides"] == {"acme": 2, "small": 0.5}
    # The table, and a weight and a limit taken back.
    unset = await agentloop_async("lanes", "set", "anthropic", "--fairness-key-weight", "small=default",
                                  "--fairness-key-rps-limit-default", "default", env=env)
    assert unset.code == 0, unset.err
    table = await agentloop_async("lanes", env=env)
    assert table.code == 0, table.err
    lines = table.out.splitlines()
    assert lines[0].split() == ["LANE", "QUEUE", "RPS", "LIMIT", "PER-KEY", "RPS", "KEY", "WEIGHTS", "BACKLOG",
                                "POLLERS"]
    assert lines[1].split() == ["openai", openai, "20/s", "-", "-", "0", "0"]
    assert lines[2].split() == ["anthropic", f"{task_queue}-llm-anthropic", "4.5/s", "-", "acme=2", "0", "0"]


async def test_lanes_answers_bad_input_with_a_sentence(env: dict[str, str]) -> None:
    unknown = await agentloop_async("lanes", "set", "mistral", "--rps", "3", env=env)
    assert unknown.code == 2 and unknown.err.strip() == (
        "agentloop: there is no lane 'mistral': the lanes are openai, anthropic, scripted; a lane of your own is "
        "named in AGENTLOOP_LANES (as the models workers have it) or with --lane NAME")
    # A lane named with --lane may be set.
    own = await agentloop_async("lanes", "set", "mistral", "--lane", "mistral", "--rps", "3", env=env)
    assert own.code == 0, own.err
    negative = await agentloop_async("lanes", "set", "openai", "--rps", "-3", env=env)
    assert negative.code == 2 and "argument --rps: -3: a rate is 0 or more requests per second" in negative.err
    weight = await agentloop_async("lanes", "set", "openai", "--fairness-key-weight", "acme", env=env)
    assert weight.code == 2 and "'acme': give KEY=WEIGHT with a weight above 0" in weight.err
    nothing = await agentloop_async("lanes", "set", "openai", env=env)
    assert nothing.code == 2 and nothing.err.strip() == (
        "agentloop: nothing to set: give --rps, --fairness-key-rps-limit-default or --fairness-key-weight")
    bad_name = await agentloop_async("lanes", "--lane", "EU", env=env)
    assert bad_name.code == 2 and "lane 'EU' is not a lane name" in bad_name.err
    for output in (unknown, negative, weight, nothing, bad_name):
        assert "Traceback" not in output.err
