"""What people send a run, checked: the payloads of the ``approve``,
``submit_tool_outputs`` and ``stop`` signals and updates, and the
``transcript`` query's argument.

Payloads arrive raw (any number of arguments, plain JSON), so no payload can
fail a workflow task. What a request brings in is bounded
(``agentloop.shared.definition.approvals``, ``MAX_*``): an update's validator refuses a request
over ``MAX_REQUEST_BYTES`` before reading it, and a field over its limit; a
signal cannot answer, so its oversize text is cut and the cut noted. Messages
quote values through :func:`~agentloop.shared.base.errors.preview`, never whole.

Pure functions of the payload and the run's :class:`LoopState`; a refusal
is a :class:`Refusal` (a ``ValueError``) whose message an operator can act on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from pydantic import ValidationError
from temporalio.exceptions import ApplicationError

from agentloop.shared.base import contracts
from agentloop.shared.base.errors import (
    INVALID_DECISION_ERROR_TYPE,
    INVALID_REQUEST_ERROR_TYPE,
    REQUEST_TOO_LARGE_ERROR_TYPE,
    describe_validation_error,
    preview,
)
from agentloop.shared.definition.approvals import (
    MAX_CALL_ID_CHARS,
    MAX_REQUEST_BYTES,
    ApprovalDecision,
    StopRequest,
    SubmitToolOutputs,
    request_bytes,
)
from agentloop.shared.runs.state import LoopState
from agentloop.shared.runs.transcripts import TranscriptRange, as_range

#: Most bytes of messages one ``transcript`` query answers (one larger
#: message comes alone): an answer rides in a workflow task's completion.
TRANSCRIPT_PAGE_BYTES = 1_000_000

EXAMPLES = {
    "approve": '{"call_id": "call_0_0", "decision": "approve"}',
    "submit_tool_outputs": '{"tool_outputs": [{"call_id": "call_0_0", "output": "..."}]}',
    "stop": '{"reason": "..."}',
}

_TOO_LARGE_HINTS = {
    "approve": "send a shorter result (the model sees it cut to the spec's tool_output_limit anyway)",
    "submit_tool_outputs": "send shorter outputs (the model sees each cut to the spec's tool_output_limit anyway)",
}

_TRANSCRIPT_EXAMPLE = '{"start": 0, "max_bytes": 1000000}'


class Refusal(ValueError):
    """Why a signal or update payload was refused; ``error_type`` names the
    kind for Temporal (an update's failure type)."""

    def __init__(self, message: str, error_type: str = INVALID_DECISION_ERROR_TYPE) -> None:
        super().__init__(message)
        self.error_type = error_type


def as_update_error(check: Callable[[], Any]) -> Any:
    """Run a payload check in an update's validator or handler: a refusal
    becomes a non-retryable ApplicationError of its type, so the update fails
    (and ``temporal workflow update`` says it is not worth retrying), never the
    workflow task."""
    try:
        return check()
    except ValueError as exc:
        raise ApplicationError(
            str(exc), type=getattr(exc, "error_type", INVALID_REQUEST_ERROR_TYPE), non_retryable=True
        ) from None


def one_payload(name: str, args: tuple[Any, ...]) -> Any:
    """A signal's or update's one argument (None when it has none)."""
    if len(args) > 1:
        raise Refusal(
            f"{name} takes one JSON object, not {len(args)} inputs; expected e.g. {EXAMPLES[name]}",
            INVALID_REQUEST_ERROR_TYPE,
        )
    return args[0] if args else None


def update_payload(name: str, args: tuple[Any, ...]) -> Any:
    """An update's one argument, weighed first: a request over
    MAX_REQUEST_BYTES is refused before anything else is read."""
    size = request_bytes(args[0] if len(args) == 1 else list(args))
    if size > MAX_REQUEST_BYTES:
        raise Refusal(
            f"the {name} request is {size:,} bytes; a run takes requests of at most {MAX_REQUEST_BYTES:,} "
            f"bytes: {_TOO_LARGE_HINTS[name]}",
            REQUEST_TOO_LARGE_ERROR_TYPE,
        )
    return one_payload(name, args)


#: The signals a run takes, as ``unknown_signal`` lists them.
KNOWN_SIGNALS = (contracts.APPROVE, contracts.SUBMIT_TOOL_OUTPUTS, contracts.STOP_SIGNAL, contracts.SEND,
                 contracts.STEER)


def unknown_signal(name: str) -> str:
    """What ``rejected_signals`` says of a signal of a name the run does not know."""
    return (f"signal {preview(name)!r} ignored: this run knows no such signal; it takes "
            + ", ".join(KNOWN_SIGNALS) + " (send and steer only in threads)")


def parse(model: Any, payload: Any, name: str) -> Any:
    """Validate a signal or update payload, with a message an operator can act on."""
    if isinstance(payload, model):
        return payload
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        raise Refusal(
            f"malformed {name} payload: {describe_validation_error(exc)}; expected e.g. {EXAMPLES[name]}",
            INVALID_REQUEST_ERROR_TYPE,
        ) from None


def listing(ids: Iterable[str], *, quote: bool = False, most: int = 10) -> str:
    """Call ids for a message: each cut to a preview, at most ``most`` of them."""
    ids = list(ids)
    shown = [repr(preview(i)) if quote else preview(i) for i in ids[:most]]
    if len(ids) > most:
        shown.append(f"and {len(ids) - most} more")
    return ", ".join(shown) or "none"


def check_decision(payload: Any, state: LoopState, run_id: str) -> ApprovalDecision:
    """An ``approve`` payload that decides a call waiting for approval."""
    decision = parse(ApprovalDecision, payload, "approve")
    call_id = decision.call_id
    if call_id not in state.approvals:
        if len(call_id) > MAX_CALL_ID_CHARS:
            raise Refusal(
                f"call_id {preview(call_id)!r} is longer than a call id can be (at most "
                f"{MAX_CALL_ID_CHARS:,} characters); waiting now: {listing(state.approvals)}",
                INVALID_REQUEST_ERROR_TYPE,
            )
        if state.was_answered(call_id):
            raise Refusal(f"call {preview(call_id)} was already decided; nothing is waiting for it")
        hint = ""
        if call_id in state.actions:
            hint = " (it waits for the client's output: use submit_tool_outputs)"
        raise Refusal(
            f"no call {preview(call_id)!r} waits for approval in run {run_id}{hint}; "
            f"waiting now: {listing(state.approvals)}"
        )
    if decision.decision == "deny" and decision.result is not None:
        raise Refusal("a denial takes a reason, not a result; use decision 'skip' to answer with a result")
    return decision


def check_outputs(payload: Any, state: LoopState, run_id: str) -> SubmitToolOutputs:
    """A ``submit_tool_outputs`` payload with an output for every call that
    waits for the client, and for no other."""
    if isinstance(payload, list):  # a bare list of outputs is accepted too
        payload = {"tool_outputs": payload}
    submission = parse(SubmitToolOutputs, payload, "submit_tool_outputs")
    seen: set[str] = set()
    duplicates: set[str] = set()
    for call_id in (o.call_id for o in submission.tool_outputs):
        (duplicates if call_id in seen else seen).add(call_id)
    if duplicates:
        raise Refusal(f"outputs name {listing(sorted(duplicates))} more than once; send one output per call")
    unknown = [o.call_id for o in submission.tool_outputs if o.call_id not in state.actions]
    if unknown:
        done = [i for i in unknown if state.was_answered(i)]
        if done:
            raise Refusal(f"call(s) {listing(done)} already have their output")
        raise Refusal(
            f"no call {listing(unknown, quote=True)} waits for a client output in run "
            f"{run_id}; waiting now: {listing(state.actions)}"
        )
    missing = [i for i in state.actions if i not in seen]
    if missing:
        raise Refusal(
            f"outputs are missing for {listing(missing)}; submit an output for every pending "
            "call in one submission (query 'pending' lists them)"
        )
    return submission


def parse_stop(payload: Any) -> StopRequest:
    """A ``stop`` payload; none at all is a stop without a reason."""
    return parse(StopRequest, {} if payload is None else payload, "stop")


def transcript_range(args: tuple[Any, ...]) -> TranscriptRange:
    """The ``transcript`` query's argument, bounded: a page is at most
    TRANSCRIPT_PAGE_BYTES (one larger message comes alone)."""
    if len(args) > 1:
        raise ValueError(f"transcript takes one argument, not {len(args)}; expected e.g. {_TRANSCRIPT_EXAMPLE}")
    try:
        wanted = as_range(args[0] if args else None)
    except ValidationError as exc:
        raise ValueError(
            f"malformed transcript request: {describe_validation_error(exc)}; expected e.g. {_TRANSCRIPT_EXAMPLE}"
        ) from None
    if wanted.start < 0:
        raise ValueError(
            f"transcript start {wanted.start} is negative: messages are numbered from 0; expected e.g. "
            f"{_TRANSCRIPT_EXAMPLE}")
    return TranscriptRange(start=wanted.start, max_bytes=min(max(1, wanted.max_bytes), TRANSCRIPT_PAGE_BYTES))
