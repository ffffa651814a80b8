"""Following an eval (``agentloop eval run``, ``agentloop eval show``,
``agentloop watch EVAL_ID``): each case as it ends, then the report."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from agentloop.cli.common import CommandFailed, say

if TYPE_CHECKING:
    from agentloop.client.agent_client import AgentClient
    from agentloop.shared.evals.report import EvalReport

#: How often a followed eval is asked for its progress (seconds).
POLL_SECONDS = 0.5


async def follow_eval(client: AgentClient, eval_id: str, *, json: bool = False, junit: str | None = None,
                      min_pass_rate: float | None = None) -> int:
    """Print each case as it ends (on stderr), then the report (a table, or
    JSON); write JUnit XML to ``junit``; the exit status (1 under
    ``min_pass_rate``)."""
    from temporalio.client import WorkflowFailureError
    from temporalio.service import RPCError, RPCStatusCode

    from agentloop.client.evals import eval_handle, eval_progress

    handle = eval_handle(client, eval_id)
    try:
        await handle.describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise CommandFailed(f"no eval {eval_id}: `agentloop eval list` shows the evals") from None
        raise
    result = asyncio.ensure_future(handle.result())
    shown = 0
    try:
        while not result.done():
            await asyncio.wait([result], timeout=POLL_SECONDS)
            if json or result.done():
                continue
            progress = await eval_progress(client, eval_id)
            for outcome in (progress.done if progress else [])[shown:]:
                mark = "pass" if outcome.passed else "FAIL: " + "; ".join(outcome.reasons)
                say(f"  case {outcome.case_id}: {mark}")
                shown += 1
        report = result.result()
    except WorkflowFailureError as err:
        raise CommandFailed(f"eval {eval_id} failed: {err.cause}") from None
    finally:
        result.cancel()
    return print_report(report, json=json, junit=junit, min_pass_rate=min_pass_rate)


def print_report(report: EvalReport, *, json: bool, junit: str | None, min_pass_rate: float | None) -> int:
    from agentloop.shared.evals.output import junit_xml, report_table

    if junit:
        Path(junit).write_text(junit_xml(report), encoding="utf-8")
    print(report.model_dump_json(indent=1) if json else report_table(report))
    if min_pass_rate is not None and report.totals.pass_rate < min_pass_rate:
        say(f"agentloop: pass rate {report.totals.pass_rate:.0%} is under --min-pass-rate {min_pass_rate:.0%}")
        return 1
    return 0
