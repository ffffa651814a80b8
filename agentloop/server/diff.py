"""``GET /v1/diff?a=RUN&b=RUN``: two runs aligned step by step
(:mod:`agentloop.shared.runs.diff`, docs/diff.md), what ``agentloop diff``
prints as ``--json`` and what the console's ``/diff`` page shows.

It reads both runs (scope ``read``) as every read route does: a token with a
tenant or an agent list compares runs it may see only, and a run it may not
see is an unknown run (404; :mod:`agentloop.server.access.visibility`)."""

from __future__ import annotations

from fastapi import APIRouter, Query

from agentloop.server.access.auth import Caller
from agentloop.server.deps import Reader, ServerState, State, ask
from agentloop.server.problems import Problem, problem_responses
from agentloop.shared.base.errors import UserError
from agentloop.shared.runs.diff import RunDiff, diff_runs
from agentloop.shared.runs.snapshots import AgentSnapshot

router = APIRouter(tags=["runs"], responses=problem_responses(401, 403, 422))


async def snapshot_for(state: ServerState, caller: Caller, run_id: str) -> AgentSnapshot:
    """Run ``run_id``'s snapshot, if the caller may read it.

    Raises:
        Problem: 404 unknown run (or one the caller may not see: another
            tenant's, another agent's), 503 no worker answers, 409 it cannot be exported.
    """
    try:
        return await ask(state, run_id, lambda handle: handle.export(), caller)
    except UserError as err:
        raise Problem(409, "Cannot export", str(err)) from None


@router.get("/diff", response_model=RunDiff, responses=problem_responses(404, 409, 503))
async def diff(
    a: str = Query(min_length=1, max_length=400, description="the first run's id"),
    b: str = Query(min_length=1, max_length=400, description="the second run's id"),
    state: ServerState = State, caller: Caller = Reader,
) -> RunDiff:
    """Runs ``a`` and ``b`` aligned step by step: how their agent definitions
    differ, one row per aligned part (same, changed with the changed words,
    only in A, only in B), the output, usage and cost with the deltas."""
    return diff_runs(await snapshot_for(state, caller, a), await snapshot_for(state, caller, b))
