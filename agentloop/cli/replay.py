"""``agentloop replay``: replay the histories of runs on a live server
against the workflow code installed here, and report any run the code would
no longer replay (non-determinism): the check to run before a deploy or a
ramp (docs/deploying.md#agentloop-replay)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass

from agentloop.shared import contracts
from agentloop.shared.errors import UserError

#: The workflow types this code defines (users' own workflows are theirs to replay).
REPLAYED_TYPES = (contracts.WORKFLOW_NAME, contracts.SCHEDULE_FEED_WORKFLOW_NAME)


@dataclass(frozen=True)
class Replayed:
    """One run's history, replayed."""

    run_id: str
    temporal_run_id: str
    problem: str | None

    @property
    def ok(self) -> bool:
        return self.problem is None


def replay_query(extra: str | None, include_running: bool) -> str:
    """The list filter: agentloop's workflow types, completed (or also
    running), and ``extra``."""
    types = " OR ".join(f'WorkflowType="{t}"' for t in REPLAYED_TYPES)
    parts = [f"({types})"]
    if not include_running:
        parts.append('ExecutionStatus="Completed"')
    if extra:
        parts.append(f"({extra})")
    return " AND ".join(parts)


def describe_failure(error: BaseException) -> str:
    """A replay failure in one line (the SDK's non-determinism message is long)."""
    text = " ".join(str(error).split())
    return text if len(text) <= 400 else text[:397] + "..."


async def replay_runs(temporal: object, query: str, last: int) -> list[Replayed]:
    """Replay the newest ``last`` executions matching ``query`` against this code."""
    from temporalio.worker import Replayer

    from agentloop.workers.plugin import AgentLoopPlugin

    replayer = Replayer(workflows=[], plugins=[AgentLoopPlugin()])
    found = []
    async for execution in temporal.list_workflows(query, limit=last):  # type: ignore[attr-defined]
        found.append(execution)
    results = []
    for execution in found:
        handle = temporal.get_workflow_handle(execution.id, run_id=execution.run_id)  # type: ignore[attr-defined]
        history = await handle.fetch_history()
        outcome = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        problem = describe_failure(outcome.replay_failure) if outcome.replay_failure is not None else None
        results.append(Replayed(execution.id, execution.run_id, problem))
    return results


async def cmd_replay(args: argparse.Namespace) -> int:
    from temporalio.service import RPCError, RPCStatusCode

    from agentloop.cli.embedded import ops_client

    client = await ops_client()
    query = replay_query(args.query, args.running)
    try:
        results = await replay_runs(client.temporal, query, args.last)
    except RPCError as err:
        if err.status == RPCStatusCode.INVALID_ARGUMENT:
            raise UserError(f"the server rejected the query {query!r}: {err.message}; fix --query (Temporal's "
                            "list filter syntax, e.g. 'AgentVersion=\"3f9a0c2b1d4e\"')") from None
        raise
    failed = [r for r in results if not r.ok]
    for r in results:
        if args.json:
            print(json.dumps({"run_id": r.run_id, "temporal_run_id": r.temporal_run_id, "ok": r.ok,
                              "problem": r.problem}))
        elif not r.ok:
            print(f"{r.run_id} ({r.temporal_run_id}): does not replay: {r.problem}")
    summary = (f"replayed {len(results)} run histories against this code: "
               + (f"{len(failed)} would fail (non-determinism); do not deploy it over these runs"
                  if failed else "all replay"))
    if not results:
        summary = f"no runs match {query!r}: nothing to replay"
    print(summary, file=sys.stderr)
    return 1 if failed else 0
