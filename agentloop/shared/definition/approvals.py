"""Human in the loop: permission policy, approval decisions, client-side tool
outputs, and what a waiting run is waiting for.

Everything here is plain data and pure functions: the workflow evaluates the
policy during replay, and operators type the signal payloads as JSON::

    temporal workflow signal --workflow-id RUN --name approve \\
        --input '{"call_id": "call_0_0", "decision": "approve"}'
"""

from __future__ import annotations

import fnmatch
import json
import re
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agentloop.shared.base.messages import ToolCallPart, ToolResultPart
from agentloop.shared.base.text import cut

PermissionAction = Literal["allow", "ask", "deny"]

#: Most characters an operator's result or a client's output may have: well
#: under Temporal's 2 MB payload limit (the run cuts it further, to the
#: spec's ``tool_output_limit``, with a visible note).
MAX_OUTPUT_CHARS = 1_000_000

#: Most characters of a reason: a decision's (it reaches the model with a
#: denial) and a stop request's (kept in the run's error and report).
MAX_REASON_CHARS = 10_000

#: Most characters of a decision's ``by``.
MAX_BY_CHARS = 200

#: Most characters of a call id a request names (providers' ids are a few
#: dozen characters).
MAX_CALL_ID_CHARS = 1_000

#: Most bytes (as JSON) of one ``approve`` or ``submit_tool_outputs`` update:
#: its validator refuses a larger one before looking at it. Temporal carries
#: the request in the run's answer too (accepted or refused), so a request near
#: the 2 MiB payload limit could not be answered at all.
MAX_REQUEST_BYTES = 1_500_000

#: ``auto``: read-only tools are allowed, every other tool asks.
DefaultPermission = Literal["auto", "allow", "ask", "deny"]


class PermissionRule(BaseModel):
    """One line of a spec's permission policy. The first rule that matches a
    call decides; with none, ``AgentSpec.default_permission`` does.

    Attributes:
        tool: Tool name, or a glob over names (``*`` for every tool).
        action: ``allow`` runs the call, ``ask`` waits for an operator's
            decision, ``deny`` answers the model with a denied result.
        arguments: Argument name → regular expression; the rule matches only
            when every named argument is present and its value (text as is,
            anything else as JSON) matches the expression in full. E.g.
            ``{"command": "(ls|git status|git diff)( .*)?"}``.
        reason: Told to the model (deny) or shown to the operator (ask).
    """

    model_config = ConfigDict(extra="forbid")

    tool: str
    action: PermissionAction
    arguments: dict[str, str] = Field(default_factory=dict)
    reason: str | None = None

    @field_validator("arguments")
    @classmethod
    def _check_patterns(cls, value: dict[str, str]) -> dict[str, str]:
        for name, pattern in value.items():
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"argument pattern for {name!r} is not a valid regular expression: {exc}") from None
        return value

    def matches(self, call: ToolCallPart) -> bool:
        """Whether this rule applies to ``call``."""
        if not fnmatch.fnmatchcase(call.name, self.tool):
            return False
        for name, pattern in self.arguments.items():
            if name not in call.arguments:
                return False
            value = call.arguments[name]
            text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
            if re.fullmatch(pattern, text, flags=re.DOTALL) is None:
                return False
        return True


class PermissionCheck(BaseModel):
    """The policy's verdict on one call.

    Attributes:
        action: What to do with the call.
        reason: Why (the rule's reason, or the default that applied).
    """

    action: PermissionAction
    reason: str


def check_permission(
    call: ToolCallPart,
    *,
    rules: list[PermissionRule],
    default: DefaultPermission,
    read_only: bool,
) -> PermissionCheck:
    """Decide whether ``call`` may run (the spec's permission rules).

    Args:
        call: The tool call.
        rules: The spec's rules, first match wins.
        default: What applies when no rule matches.
        read_only: The tool declares it changes nothing.
    """
    for index, rule in enumerate(rules):
        if rule.matches(call):
            return PermissionCheck(
                action=rule.action,
                reason=rule.reason or f"permission rule {index + 1} ({rule.tool}: {rule.action})",
            )
    if default == "auto":
        if read_only:
            return PermissionCheck(action="allow", reason="read-only tool")
        return PermissionCheck(action="ask", reason=f"'{call.name}' can change things; approval required")
    return PermissionCheck(action=default, reason=f"default permission ({default})")


# Signals and updates ----------------------------------------------------------

Decision = Literal["approve", "deny", "skip"]


class ApprovalDecision(BaseModel):
    """An operator's decision on one pending call (signal and update ``approve``).

    Attributes:
        call_id: The pending call's id (query ``pending`` lists them).
        decision: ``approve`` runs the call; ``deny`` answers the model that
            the call was denied; ``skip`` does not run it and answers with
            ``result`` (or a note that it was skipped).
        reason: Why; a denial's reason reaches the model.
        result: With ``approve``: do not run the tool, answer the model with
            this text instead (an override). With ``skip``: the answer.
        by: Who decided (free text, kept in the report).
    """

    model_config = ConfigDict(extra="forbid")

    call_id: str = Field(min_length=1)
    decision: Decision = "approve"
    reason: str | None = Field(default=None, max_length=MAX_REASON_CHARS)
    result: str | None = Field(default=None, max_length=MAX_OUTPUT_CHARS)
    by: str | None = Field(default=None, max_length=MAX_BY_CHARS)


class ToolOutput(BaseModel):
    """The output of one call the client ran.

    Attributes:
        call_id: The pending call's id.
        output: What the model sees as the call's result.
        is_error: The call failed (the model sees an error result).
    """

    model_config = ConfigDict(extra="forbid")

    call_id: str = Field(min_length=1)
    output: str = Field(max_length=MAX_OUTPUT_CHARS)
    is_error: bool = False

    @model_validator(mode="before")
    @classmethod
    def _accept_openai_names(cls, data: Any) -> Any:
        # OpenAI's Assistants API spells it tool_call_id; accept both.
        if isinstance(data, dict) and "tool_call_id" in data and "call_id" not in data:
            data = {**data, "call_id": data["tool_call_id"]}
            del data["tool_call_id"]
        return data


class SubmitToolOutputs(BaseModel):
    """Outputs for every pending action (signal and update ``submit_tool_outputs``).

    Attributes:
        tool_outputs: One output per pending call id.
    """

    model_config = ConfigDict(extra="forbid")

    tool_outputs: list[ToolOutput] = Field(min_length=1)


class StopRequest(BaseModel):
    """Signal ``stop``: end the run after the current step.

    Attributes:
        reason: Why, kept in the run's error field and report. The run cuts
            one longer than ``MAX_REASON_CHARS`` (with a note saying so).
    """

    model_config = ConfigDict(extra="forbid")

    reason: str | None = None


# Bounds on what signals and updates bring in ---------------------------------------

#: The free-text fields of each request and their limits: ``approve``'s
#: decision, each output of ``submit_tool_outputs``, ``stop``'s request.
#: Call ids are not cut (a cut id names no call); they are only ever quoted
#: through :func:`agentloop.shared.base.errors.preview`.
TEXT_LIMITS: dict[str, dict[str, int]] = {
    "approve": {"reason": MAX_REASON_CHARS, "result": MAX_OUTPUT_CHARS, "by": MAX_BY_CHARS},
    "submit_tool_outputs": {"output": MAX_OUTPUT_CHARS},
    "stop": {"reason": MAX_REASON_CHARS},
}


def request_bytes(value: Any) -> int:
    """About how many bytes ``value`` (a decoded JSON payload) takes as JSON:
    what a validator weighs before reading it."""
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass")) + 2
    if isinstance(value, (bytes, bytearray)):
        return len(value)
    if isinstance(value, dict):
        return 2 + sum(request_bytes(k) + request_bytes(v) + 2 for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return 2 + sum(request_bytes(v) + 1 for v in value)
    return len(str(value))


def cut_note(name: str, field: str, length: int, limit: int) -> str:
    """What ``rejected_signals`` says about a field a signal brought in cut."""
    return f"{name} signal: {field} cut to {limit:,} characters (it had {length:,}; the limit is {limit:,})"


def _text_fields(name: str, payload: Any) -> list[tuple[dict[str, Any], str, int]]:
    """The (object, field, limit) of each free-text field of a request."""
    limits = TEXT_LIMITS[name]
    objects: list[Any] = [payload]
    if name == "submit_tool_outputs":
        outputs = payload.get("tool_outputs") if isinstance(payload, dict) else payload
        objects = list(outputs) if isinstance(outputs, list) else []
    return [
        (obj, field, limit)
        for obj in objects
        if isinstance(obj, dict)
        for field, limit in limits.items()
        if isinstance(obj.get(field), str)
    ]


def oversize_fields(name: str, payload: Any) -> list[tuple[str, int, int]]:
    """The free-text fields of a request over their limits: (field, length, limit)."""
    return [
        (field, len(obj[field]), limit)
        for obj, field, limit in _text_fields(name, payload)
        if len(obj[field]) > limit
    ]


def cut_oversize_fields(name: str, payload: Any) -> tuple[Any, list[str]]:
    """A copy of a signal's payload with every free-text field over its limit
    cut (:func:`~agentloop.shared.base.text.cut`), and a note per cut field. Signals cannot answer:
    the run takes what fits and says what it cut."""
    if not oversize_fields(name, payload):
        return payload, []
    payload = _copy_objects(payload)
    notes = []
    for obj, field, limit in _text_fields(name, payload):
        if len(obj[field]) > limit:
            notes.append(cut_note(name, field, len(obj[field]), limit))
            obj[field] = cut(obj[field], limit)
    return payload, notes


def _copy_objects(value: Any) -> Any:
    """Copy the dicts and lists of a payload (strings are shared)."""
    if isinstance(value, dict):
        return {k: _copy_objects(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_objects(v) for v in value]
    return value


# What a waiting run waits for ----------------------------------------------------

ActionReason = Literal["client_tool", "max_tool_call_continuations"]


class PendingApproval(BaseModel):
    """A call waiting for an operator's decision.

    Attributes:
        call_id: The call's id, to name in the decision.
        tool_name: The tool.
        arguments: The model's arguments.
        step: The step (1-based, as shown) that asked for it.
        asked_at: When the run started waiting.
        reason: Why approval is needed.
        expires_at: When it is denied for lack of a decision, if ever.
    """

    call_id: str
    tool_name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    step: int
    asked_at: datetime
    reason: str = ""
    expires_at: datetime | None = None


class PendingAction(BaseModel):
    """A call the client must run and answer (``requires_action``).

    Attributes:
        call_id: The call's id, to name in the output.
        tool_name: The tool.
        arguments: The model's arguments.
        step: The step (1-based) that asked for it.
        asked_at: When the run started waiting.
        reason: ``client_tool`` (a tool the client declared) or
            ``max_tool_call_continuations`` (the loop's limit was reached: run
            the calls and submit their outputs to continue).
    """

    call_id: str
    tool_name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    step: int
    asked_at: datetime
    reason: ActionReason


class PendingWork(BaseModel):
    """Query ``pending``: what the run waits for.

    Attributes:
        approvals: Calls waiting for a decision.
        actions: Calls waiting for client outputs.
    """

    approvals: list[PendingApproval] = Field(default_factory=list)
    actions: list[PendingAction] = Field(default_factory=list)


class DecisionAccepted(BaseModel):
    """What the ``approve`` and ``submit_tool_outputs`` updates return.

    Attributes:
        call_ids: The calls decided or answered.
        still_pending: Approvals and actions still waiting afterwards.
    """

    call_ids: list[str]
    still_pending: list[str] = Field(default_factory=list)


class ToolGate(BaseModel):
    """What happens to one tool call of a step before (or instead of) it runs.

    Attributes:
        call: The call.
        permission: The policy's verdict, when the policy applied.
        result: The answer decided without running (unknown tool, bad
            arguments, denied by policy).
        approval: Set while the call waits for an operator.
        action: Set while the call waits for the client's output.
    """

    call: ToolCallPart
    permission: PermissionCheck | None = None
    result: ToolResultPart | None = None
    approval: PendingApproval | None = None
    action: PendingAction | None = None
