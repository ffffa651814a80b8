"""What a tenant's spend quota costs a run, and whether 300 runs reserving
at once over-spend it. On one local dev server, one worker.

* overhead: 50-step runs (an LLM step and a tool call each) without a tenant,
  with a tenant whose quota reserves in default chunks (5% of the limit: one
  reservation covers the run), and with a quota whose chunk is one token (a
  reservation before every step: the worst case), interleaved (each case
  first in turn), in the same process; ms per step and the ratio against no quota.
* burst: 300 runs of one tenant started at once against a limit that
  covers half of what they ask for (policy ``fail``); how many completed and
  were refused, the sum of their usage against the limit plus one chunk per
  run in flight, and the ledger's own total (each run counted once).

Usage::

    python -m benchmarks.fleet.quota_overhead [--steps 50] [--repeat 3] [--runs 300]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid

from agentloop import AgentClient, AgentRunFailed, AgentSpec
from agentloop.shared.base.usage import Usage
from agentloop.shared.runs.quotas import QuotaLimits
from agentloop.testing import call, calls, register_scripted_model, reply
from agentloop.tools.registry import ToolRegistry
from agentloop.workers.devserver import DevServer
from agentloop.workers.worker import build_worker, connect

STEP = Usage(input_tokens=60, output_tokens=40)


async def overhead(agents: AgentClient, steps: int, repeat: int) -> dict[str, tuple[float, int, int]]:
    register_scripted_model("bench-quota", [calls(call("ping")) for _ in range(steps - 1)] + [reply("done")])
    spec = AgentSpec(model="scripted:bench-quota", tools=["ping"], max_steps=steps + 1, default_permission="allow",
                     stream_deltas=False)
    tag = uuid.uuid4().hex[:6]
    await agents.quotas.set(f"chunked-{tag}", QuotaLimits(tokens=10**9))
    await agents.quotas.set(f"every-step-{tag}", QuotaLimits(tokens=10**9, chunk_tokens=1))
    cases = {"no quota": None, "quota, default chunks": f"chunked-{tag}", "quota, every step": f"every-step-{tag}"}
    timings: dict[str, list[float]] = {name: [] for name in cases}
    events: dict[str, tuple[int, int]] = {}
    await agents.run(spec, "warm up")
    order = list(cases.items())
    for i in range(repeat):
        for name, tenant in order[i % 3:] + order[:i % 3]:  # each case first in turn
            t = time.perf_counter()
            handle = await agents.start(spec, "go", tenant=tenant)
            result = await handle.result()
            timings[name].append((time.perf_counter() - t) * 1000 / steps)
            assert result.report.step_count == steps
            history = await handle.workflow_handle.fetch_history()
            scheduled = sum(e.HasField("activity_task_scheduled_event_attributes") for e in history.events)
            events[name] = (len(history.events), scheduled)
    return {name: (statistics.median(ms), *events[name]) for name, ms in timings.items()}


async def burst(agents: AgentClient, runs: int) -> None:
    steps = [a.model_copy(update={"usage": STEP})
             for a in (calls(call("ping")), calls(call("ping")), reply("done"))]
    register_scripted_model("bench-burst", steps)
    spec = AgentSpec(model="scripted:bench-burst", tools=["ping"], default_permission="allow", stream_deltas=False)
    tenant = f"burst-{uuid.uuid4().hex[:6]}"
    limit = runs * 300 // 2  # half of what they ask for
    view = await agents.quotas.set(tenant, QuotaLimits(tokens=limit, at_limit="fail"))
    chunk = max(1, round(limit * 0.05))
    t = time.perf_counter()
    handles = await asyncio.gather(*(agents.start(spec, "go", tenant=tenant) for _ in range(runs)))

    async def outcome(handle):  # noqa: ANN001, ANN202
        try:
            return await handle.result()
        except AgentRunFailed as err:
            assert err.reason == "quota_exceeded", err
            return err.result

    results = await asyncio.gather(*(outcome(h) for h in handles))
    seconds = time.perf_counter() - t
    view = await agents.quotas.get(tenant)
    assert view is not None
    used = sum(r.usage.total_tokens for r in results)
    completed = sum(r.status == "completed" for r in results)
    bound = limit + runs * max(chunk, 100)
    print(f"burst: {runs} runs of one tenant, 3 steps of 100 tokens each, limit {limit} tokens, policy fail")
    print(f"  completed {completed}, refused (quota_exceeded) {runs - completed}, in {seconds:.1f} s")
    print(f"  usage recorded by the runs: {used} tokens; limit + one chunk (or step) per run: {bound}; "
          f"over-spent: {'no' if used <= bound else 'YES'}")
    print(f"  ledger's total: {view.total_spent.tokens} tokens (equal to the runs' sum: "
          f"{view.total_spent.tokens == used}); still reserved: {len(view.holders)} runs")


async def main(steps: int, repeat: int, runs: int) -> None:
    registry = ToolRegistry()

    @registry.tool
    def ping() -> str:
        """Pong."""
        return "pong"

    with DevServer() as server:
        await server.wait_ready()
        client = await connect(server.address)
        queue = f"bench-{uuid.uuid4().hex[:8]}"
        agents = AgentClient(client, task_queue=queue)
        async with build_worker(client, task_queue=queue, registry=registry):
            per_step = await overhead(agents, steps, repeat)
            base, base_events, base_acts = per_step["no quota"]
            print(f"overhead: {steps}-step runs (LLM step + tool call), median of {repeat}, interleaved")
            for name, (ms, n_events, n_acts) in per_step.items():
                print(f"  {name:24s} {ms:7.2f} ms per step  ({(ms / base - 1) * 100:+.1f}% against no quota); "
                      f"history {n_events} events ({(n_events / base_events - 1) * 100:+.1f}%), "
                      f"{n_acts} activities ({n_acts - base_acts:+d})")
            if runs:
                await burst(agents, runs)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--runs", type=int, default=300)
    args = parser.parse_args()
    asyncio.run(main(args.steps, args.repeat, args.runs))
