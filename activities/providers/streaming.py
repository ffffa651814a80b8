"""Building a :class:`ModelResponse` from a streamed answer: text and tool
call deltas accumulated, tool calls left open at the end finalised, and the
step's response built.

Each provider adapter reads its own wire events and tells a
:class:`StepAccumulator` what they mean: text, thinking, a tool call's start,
a piece of its arguments, its end, usage, the finish reason. The accumulator
passes what a person would watch (text, thinking, tool-call progress) on to a
:data:`~agentloop.shared.definition.activity_io.DeltaSink` as it arrives, and builds the whole
answer at the end. Provider-neutral and free of I/O, so it is unit-tested
without a server.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, assert_never

from agentloop.shared.base.messages import ImagePart, Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from agentloop.shared.base.usage import Usage
from agentloop.shared.definition.activity_io import DeltaSink, FinishReason, ModelResponse, StreamDelta

__all__ = [
    "StepAccumulator",
    "message_deltas",
    "parse_tool_arguments",
    "tool_call_part",
]


def parse_tool_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    """Parse a tool call's JSON arguments text.

    Args:
        raw: The arguments as the provider sent them. Empty text means no
            arguments (several compatible servers send it for argument-less calls).

    Returns:
        ``(arguments, None)`` on success, or ``({}, problem)`` when the text is
        not JSON or not a JSON object.
    """
    if not raw.strip():
        return {}, None
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        return {}, f"the arguments are not valid JSON ({exc})"
    if not isinstance(parsed, dict):
        return {}, f"the arguments must be a JSON object, not {_json_kind(parsed)}"
    return parsed, None


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "null"


def tool_call_part(call_id: str, name: str, raw_arguments: str) -> ToolCallPart:
    """The :class:`ToolCallPart` for a call whose arguments arrived as ``raw_arguments``.

    Arguments that are not a JSON object are not dropped or replaced by an
    empty object: the part gets ``arguments={}``, the problem in
    ``arguments_error`` and the text in ``raw_arguments``, and the loop answers
    the call with an error the model can act on.
    """
    arguments, error = parse_tool_arguments(raw_arguments)
    return ToolCallPart(
        id=call_id,
        name=name,
        arguments=arguments,
        arguments_error=error,
        raw_arguments=raw_arguments if error else None,
    )


@dataclass
class _Run:
    """Consecutive text or thinking deltas that form one part."""

    kind: Literal["text", "thinking"]
    pieces: list[str] = field(default_factory=list)
    signature: str = ""

    def part(self) -> TextPart | ThinkingPart:
        text = "".join(self.pieces)
        if self.kind == "text":
            return TextPart(text=text)
        return ThinkingPart(text=text, signature=self.signature or None)


@dataclass
class _Call:
    """A tool call being streamed."""

    id: str
    name: str
    pieces: list[str] = field(default_factory=list)
    ended: bool = False

    def part(self) -> ToolCallPart:
        return tool_call_part(self.id, self.name, "".join(self.pieces))


class StepAccumulator:
    """Collects one streamed answer and passes its deltas on.

    Text and thinking deltas of the same kind in a row form one part, until a
    different kind of delta, a tool call or :meth:`end_part` closes it. Parts
    keep the order they started in; tool calls sit where they started.

    Args:
        on_delta: Receives a :class:`~agentloop.shared.definition.activity_io.StreamDelta` for
            each text, thinking and tool-call event, as it is added. Errors it
            raises propagate to the caller.

    Attributes:
        usage: Usage of the call, once the provider reported it.
        finish_reason: The normalised finish reason, once the provider sent one.
        raw_finish_reason: The provider's own finish reason.
    """

    def __init__(self, on_delta: DeltaSink | None = None) -> None:
        self._on_delta = on_delta
        self._parts: list[_Run | _Call] = []
        self._calls: list[_Call] = []
        self._open: _Run | None = None
        self.usage: Usage | None = None
        self.finish_reason: FinishReason | None = None
        self.raw_finish_reason: str | None = None

    # ---------------------------------------------------------------- text

    def add_text(self, text: str) -> None:
        """Add answer text (empty text is ignored)."""
        if text:
            self._run("text").pieces.append(text)
            self._emit(StreamDelta(kind="text", text=text))

    def add_thinking(self, text: str) -> None:
        """Add reasoning text (empty text is ignored)."""
        if text:
            self._run("thinking").pieces.append(text)
            self._emit(StreamDelta(kind="thinking", text=text))

    def add_thinking_signature(self, signature: str) -> None:
        """Attach (a piece of) the provider's signature to the open thinking
        part, starting an empty one when none is open (a signed block whose
        text the provider withheld). Nothing is passed on: it is opaque."""
        if signature:
            self._run("thinking").signature += signature

    def end_part(self) -> None:
        """Close the open text or thinking part: the next delta starts a new
        one (the provider's content block ended)."""
        self._open = None

    # ---------------------------------------------------------------- tool calls

    def start_tool_call(self, call_id: str, name: str) -> None:
        """A tool call starts; its arguments follow in :meth:`add_tool_arguments`."""
        self._open = None
        call = _Call(id=call_id, name=name)
        self._parts.append(call)
        self._calls.append(call)
        self._emit(StreamDelta(kind="tool_call_start", call_id=call_id, name=name))

    def add_tool_arguments(self, call_id: str | None, fragment: str) -> None:
        """Add a piece of a call's JSON arguments text.

        Args:
            call_id: The call it belongs to. An unknown id (or None) means the
                most recently started call that has not ended.
            fragment: The piece; empty pieces are ignored. Dropped when no
                call was started at all.
        """
        if not fragment:
            return
        call = self._find(call_id, fallback="last")
        if call is None:
            return
        call.pieces.append(fragment)
        self._emit(StreamDelta(kind="tool_call_delta", call_id=call.id, text=fragment))

    def end_tool_call(self, call_id: str | None = None) -> None:
        """A tool call's arguments are complete.

        Args:
            call_id: The call that ended. An unknown id (or None) means the
                first call that has not ended, as providers that send no id
                with the end close calls in order. Ignored when every call
                has ended.
        """
        call = self._find(call_id, fallback="first")
        if call is not None:
            self._end(call)

    # ---------------------------------------------------------------- the end

    def set_usage(self, usage: Usage) -> None:
        """Record the call's usage (replacing any reported before), and pass
        it on as a ``usage`` delta."""
        self.usage = usage
        self._emit(StreamDelta(kind="usage", usage=usage))

    def set_finish_reason(self, finish_reason: FinishReason, raw: str | None) -> None:
        """Record why the provider stopped: normalised and in its own words."""
        self.finish_reason = finish_reason
        self.raw_finish_reason = raw

    def feed(self, delta: StreamDelta) -> None:
        """Add a delta as it would have been produced (replays a recorded stream)."""
        match delta.kind:
            case "text":
                self.add_text(delta.text)
            case "thinking":
                self.add_thinking(delta.text)
            case "tool_call_start":
                self.start_tool_call(delta.call_id or "", delta.name or "")
            case "tool_call_delta":
                self.add_tool_arguments(delta.call_id, delta.text)
            case "tool_call_end":
                self.end_tool_call(delta.call_id)
            case "usage":
                if delta.usage is not None:
                    self.set_usage(delta.usage)
            case _:
                assert_never(delta.kind)

    @property
    def has_tool_calls(self) -> bool:
        """Whether any tool call started."""
        return bool(self._calls)

    def finalize(self, *, model: str = "") -> ModelResponse:
        """The whole answer.

        Calls that never got their end are ended now (their
        ``tool_call_end`` deltas are passed on) and included: a provider may
        finish without closing them. Each call's arguments are parsed with
        :func:`parse_tool_arguments`. The finish reason is ``tool_calls``
        whenever there are calls, whatever the provider said; ``other`` when
        it said nothing. Usage defaults to one request with no token counts.

        Args:
            model: The model name the provider reported.
        """
        for call in self._calls:
            if not call.ended:
                self._end(call)
        self._open = None
        parts: list[TextPart | ThinkingPart | ToolCallPart] = [p.part() for p in self._parts]
        finish_reason: FinishReason = self.finish_reason or "other"
        if self._calls:
            finish_reason = "tool_calls"
        return ModelResponse(
            message=Message(role="assistant", content=list(parts)),
            usage=self.usage if self.usage is not None else Usage(requests=1),
            finish_reason=finish_reason,
            raw_finish_reason=self.raw_finish_reason,
            model=model,
        )

    # ---------------------------------------------------------------- internals

    def _run(self, kind: Literal["text", "thinking"]) -> _Run:
        if self._open is None or self._open.kind != kind:
            self._open = _Run(kind=kind)
            self._parts.append(self._open)
        return self._open

    def _find(self, call_id: str | None, *, fallback: Literal["first", "last"]) -> _Call | None:
        unended = [c for c in self._calls if not c.ended]
        if call_id is not None:
            for call in unended:
                if call.id == call_id:
                    return call
        if not unended:
            return None
        return unended[0] if fallback == "first" else unended[-1]

    def _end(self, call: _Call) -> None:
        call.ended = True
        self._emit(StreamDelta(kind="tool_call_end", call_id=call.id))

    def _emit(self, delta: StreamDelta) -> None:
        if self._on_delta is not None:
            self._on_delta(delta)


def message_deltas(message: Message, *, pieces: int = 3) -> list[StreamDelta]:
    """The deltas a provider could have streamed for ``message``.

    Text and thinking are cut into up to ``pieces`` chunks, and each tool
    call's arguments (as JSON, or its ``raw_arguments`` when they failed to
    parse) too, between the call's start and end. Feeding them to a
    :class:`StepAccumulator` gives back the message's text, thinking and
    calls (signatures aside, as they are not deltas). Images and tool results
    have no deltas.

    Args:
        message: An assistant message.
        pieces: Most chunks per text, at least 1.
    """
    deltas: list[StreamDelta] = []
    for part in message.content:
        match part:
            case TextPart():
                deltas.extend(StreamDelta(kind="text", text=t) for t in _split(part.text, pieces))
            case ThinkingPart():
                deltas.extend(StreamDelta(kind="thinking", text=t) for t in _split(part.text, pieces))
            case ToolCallPart():
                raw = part.raw_arguments if part.arguments_error else json.dumps(part.arguments)
                deltas.append(StreamDelta(kind="tool_call_start", call_id=part.id, name=part.name))
                deltas.extend(
                    StreamDelta(kind="tool_call_delta", call_id=part.id, text=t)
                    for t in _split(raw or "", pieces)
                )
                deltas.append(StreamDelta(kind="tool_call_end", call_id=part.id))
            case ImagePart() | ToolResultPart():
                pass
            case _:
                assert_never(part)
    return deltas


def _split(text: str, pieces: int) -> list[str]:
    if not text:
        return []
    size = -(-len(text) // max(pieces, 1))
    return [text[i : i + size] for i in range(0, len(text), size)]
