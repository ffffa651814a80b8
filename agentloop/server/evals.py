"""``/v1/evals``: the evals and each eval's report (docs/evals.md), read
with the same token scopes as runs (``read`` or ``act``)."""

from __future__ import annotations

from fastapi import APIRouter, Path
from pydantic import BaseModel
from temporalio.service import RPCError, RPCStatusCode

from agentloop.client.evals import EvalSummary, eval_report, list_evals
from agentloop.server.access.auth import Caller
from agentloop.server.deps import Reader, ServerState, State
from agentloop.server.problems import Problem, problem_responses
from agentloop.shared.evals.report import EvalProgress, EvalReport

router = APIRouter(tags=["evals"], responses=problem_responses(401, 403, 422))


class EvalList(BaseModel):
    """Evals, newest first."""

    evals: list[EvalSummary]


class EvalPage(BaseModel):
    """An eval: its report once it has completed, else the cases done so far
    while it runs (``status`` is Temporal's: ``running``, ``completed``, ``failed``...)."""

    eval_id: str
    status: str
    report: EvalReport | None = None
    progress: EvalProgress | None = None


def _no_eval(eval_id: str) -> Problem:
    return Problem(404, "No such eval", f"no eval has the id {eval_id[:80]!r}")


@router.get("/evals", response_model=EvalList)
async def evals_list(state: ServerState = State, caller: Caller = Reader) -> EvalList:
    """Evals, newest first (none for a token with a tenant: evals belong to no tenant)."""
    if caller.tenant is not None:
        return EvalList(evals=[])
    try:
        return EvalList(evals=await list_evals(state.client))
    except RPCError as err:
        raise Problem(503, "Temporal is unavailable", f"the evals cannot be listed: {err.message}") from None


@router.get("/evals/{eval_id}", response_model=EvalPage, responses=problem_responses(404, 503))
async def eval_page(eval_id: str = Path(max_length=200), state: ServerState = State,
                    caller: Caller = Reader) -> EvalPage:
    """An eval's cases with pass or fail and reasons, their runs, the totals."""
    if caller.tenant is not None:  # evals belong to no tenant: one is unknown to a tenant's token
        raise _no_eval(eval_id)
    try:
        status, answer = await eval_report(state.client, eval_id)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise _no_eval(eval_id) from None
        raise Problem(503, "Temporal is unavailable", f"the eval cannot be read: {err.message}") from None
    if isinstance(answer, EvalReport):
        return EvalPage(eval_id=eval_id, status=status, report=answer)
    return EvalPage(eval_id=eval_id, status=status, progress=answer)
