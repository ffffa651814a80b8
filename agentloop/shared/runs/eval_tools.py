"""Tool calls during an eval (docs/evals.md): what a case run answers from
its recording, runs live, or refuses.

An eval's case run carries an :class:`EvalPlan` (``AgentRunInput.eval``):
the recorded run's tool calls and approval decisions, and the policies.
:func:`eval_tool_answer` and :func:`eval_approval` are pure: the workflow
decides with them, so a call answered from the recording schedules no
activity and its tool never runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentloop.shared.base.messages import ToolCallPart, ToolResultPart
from agentloop.shared.definition.approvals import ApprovalDecision, ToolGate

#: How a tool call is answered during an eval.
ToolPolicy = Literal["recorded", "live", "live-read-only", "refuse"]
#: What a ``recorded`` call without a matching recording falls back to.
FallbackPolicy = Literal["live", "live-read-only", "refuse"]
TOOL_POLICIES: tuple[str, ...] = ("recorded", "live", "live-read-only", "refuse")


class RecordedCall(BaseModel):
    """A tool call of the recorded run and the result it had."""

    model_config = ConfigDict(extra="forbid")

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    content: str = ""
    is_error: bool = False


class RecordedDecision(BaseModel):
    """An operator's decision on a call of the recorded run."""

    model_config = ConfigDict(extra="forbid")

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    decision: Literal["approve", "deny", "skip"]
    result: str | None = None
    reason: str | None = None


class EvalPlan(BaseModel):
    """``AgentRunInput.eval``: a run that is one case of an eval.

    Attributes:
        eval_id: The eval (its workflow id).
        case_id: The case within it.
        policy: The policy of tools not named in ``tools``.
        fallback: What a ``recorded`` call without a matching recording does.
        tools: Per tool name, its own policy.
        recorded: The recorded run's calls, each answered at most once.
        decisions: The recorded run's approval decisions.
    """

    model_config = ConfigDict(extra="forbid")

    eval_id: str
    case_id: str
    policy: ToolPolicy = "recorded"
    fallback: FallbackPolicy = "refuse"
    tools: dict[str, ToolPolicy] = Field(default_factory=dict)
    recorded: list[RecordedCall] = Field(default_factory=list)
    decisions: list[RecordedDecision] = Field(default_factory=list)

    def policy_of(self, tool: str) -> ToolPolicy:
        return self.tools.get(tool, self.policy)


class EvalTally(BaseModel):
    """What a case run's checks need of its report, in a compact form
    (``AgentRunResult.eval_tally``): a report over ``RESULT_REPORT_LIMIT``
    leaves its steps out of the run's result, this does not.

    Attributes:
        tools: The tools the run called, in order.
        recorded: Calls answered from the recording.
        live: Calls run live.
        refused: Calls refused by a policy.
    """

    tools: list[str] = Field(default_factory=list)
    recorded: int = 0
    live: int = 0
    refused: int = 0


def tally_of(calls: list[Any]) -> EvalTally:
    """The tally of a case run's tool call reports (``ToolCallReport``), in order."""
    answers = [getattr(c, "eval_answer", None) for c in calls]
    return EvalTally(tools=[c.tool_name for c in calls], recorded=answers.count("recorded"),
                     live=answers.count("live"), refused=answers.count("refused"))


def canonical_json(value: Any) -> str:
    """One spelling of a JSON value: sorted keys, no spaces."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


@dataclass(frozen=True)
class FromRecording:
    """Answer with recorded call ``index``."""

    index: int
    result: ToolResultPart


@dataclass(frozen=True)
class RunLive:
    """Run the tool."""


@dataclass(frozen=True)
class Refused:
    """Answer with an error result naming the policy."""

    result: ToolResultPart


EvalToolAnswer = FromRecording | RunLive | Refused


def refusal(call: ToolCallPart, policy: str, why: str) -> Refused:
    return Refused(ToolResultPart(id=call.id, name=call.name, is_error=True,
                                  content=f"Tool '{call.name}' did not run: {why} (eval tool policy '{policy}')."))


def _live(call: ToolCallPart, policy: str, *, read_only: bool) -> EvalToolAnswer:
    if policy == "refuse":
        return refusal(call, policy, "this eval refuses tool calls")
    if policy == "live-read-only" and not read_only:
        return refusal(call, policy, "it is not read-only")
    return RunLive()


def eval_tool_answer(call: ToolCallPart, plan: EvalPlan, *, used: frozenset[int] | set[int],
                     read_only: bool) -> EvalToolAnswer:
    """How an eval answers ``call``: from the first unused recorded call of
    the same tool with the same arguments (canonical JSON) when the tool's
    policy is ``recorded``, else by the policy (or the fallback)."""
    policy = plan.policy_of(call.name)
    if policy != "recorded":
        return _live(call, policy, read_only=read_only)
    wanted = canonical_json(call.arguments)
    for index, recorded in enumerate(plan.recorded):
        if index not in used and recorded.tool == call.name and canonical_json(recorded.arguments) == wanted:
            return FromRecording(index, ToolResultPart(id=call.id, name=call.name, content=recorded.content,
                                                       is_error=recorded.is_error))
    answer = _live(call, plan.fallback, read_only=read_only)
    if isinstance(answer, Refused):
        return refusal(call, f"recorded, then {plan.fallback}", "no recorded call of it has these arguments"
                       if plan.fallback == "refuse" else "it is not read-only and no recorded call matches")
    return answer


def eval_approval(call: ToolCallPart, plan: EvalPlan, *, by: str = "eval") -> ApprovalDecision | None:
    """The recorded decision on a call of the same tool and arguments, as an
    operator's decision; None when the recording holds none (the call then
    goes by its tool policy: ``refuse`` refuses it, the others let it on)."""
    wanted = canonical_json(call.arguments)
    for recorded in plan.decisions:
        if recorded.tool == call.name and canonical_json(recorded.arguments) == wanted:
            return ApprovalDecision(call_id=call.id, decision=recorded.decision, result=recorded.result,
                                    reason=recorded.reason, by=f"{by} (recorded decision)")
    return None


def gates_that_wait(gates: list[ToolGate], *, eval_run: bool) -> list[ToolGate]:
    """The step's gates that wait for a person or the client. In an eval's
    case run no approval waits: the recorded decision or the tool policy
    answers it, so the run never shows ``awaiting_approval``."""
    if not eval_run:
        return gates
    return [g.model_copy(update={"approval": None}) if g.approval is not None else g for g in gates]
