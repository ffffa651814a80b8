"""``GET /v1/diff?a=RUN&b=RUN``: two runs aligned step by step
(:mod:`agentloop.shared.runs.diff`, docs/diff.md), what ``agentloop diff``
prints as ``--json`` and what the console's ``/diff`` page shows.

It reads both runs (scope ``read``); a token limited to some agents
(``...:agents=a|b``) may compare runs of those agents only, and is refused
(403) when either run is another agent's."""

from __future__ import annotations

from fastapi import APIRouter, Query

from agentloop.server.access.auth import Caller
from agentloop.server.deps import Reader, ServerState, State, ask
from agentloop.server.problems import Problem, problem_responses
from agentloop.shared.base.errors import UserError
from agentloop.shared.runs.diff import RunDiff, diff_runs
from agentloop.shared.runs.snapshots import AgentSnapshot

router = APIRouter(tags=["runs"], responses=problem_responses(401, 403, 422))


def allowed_names(state: ServerState, caller: Caller) -> set[str] | None:
    """The agent names the caller may read runs of (None: any): the agents its
    token names, by the name they are registered under and their spec's name."""
    if caller.agents is None:
        return None
    agents = state.settings.agents
    return set(caller.agents) | {agents[name].name for name in caller.agents if name in agents}


async def snapshot_for(state: ServerState, caller: Caller, run_id: str) -> AgentSnapshot:
    """Run ``run_id``'s snapshot, if the caller may read it.

    Raises:
        Problem: 404 unknown run, 503 no worker answers, 409 it cannot be
            exported, 403 the run is an agent the caller's token does not name.
    """
    try:
        snapshot = await ask(state, run_id, lambda handle: handle.export())
    except UserError as err:
        raise Problem(409, "Cannot export", str(err)) from None
    allowed = allowed_names(state, caller)
    if allowed is not None and snapshot.spec.name not in allowed:
        raise Problem(403, "Agent not allowed", f"token {caller.name!r} may read runs of "
                      f"{', '.join(sorted(caller.agents or ()))} only; run {run_id[:200]!r} is another agent's")
    return snapshot


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
