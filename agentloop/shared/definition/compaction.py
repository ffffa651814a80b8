"""Compaction: the old middle of a conversation replaced by an LLM-written
summary. Pure and deterministic, like :mod:`.context_window`."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from agentloop.shared.base.messages import ImagePart, Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from agentloop.shared.base.text import cut
from agentloop.shared.definition.context_window import (
    CHARS_PER_TOKEN,
    SUMMARY_HEADER,
    ContextPolicy,
    usable_tokens,
)


def summary_message(summary_text: str) -> Message:
    """The user message that stands in for the summarised conversation."""
    return Message.user(f"{SUMMARY_HEADER}\n\n{summary_text.strip()}")


def is_summary_message(message: Message) -> bool:
    """True for a message made by :func:`summary_message`."""
    return message.role == "user" and message.text.startswith(SUMMARY_HEADER)


class CompactionSplit(BaseModel):
    """A conversation cut for compaction: ``head + to_summarise + tail``.

    Attributes:
        head: The opening system and user messages, kept verbatim
            (empty when ``keep_first_user_message`` is off).
        to_summarise: The messages the summary replaces.
        tail: The recent messages, kept verbatim; never starts with a tool
            result whose call is not in it.
    """

    model_config = ConfigDict(extra="forbid")

    head: list[Message] = Field(default_factory=list)
    to_summarise: list[Message]
    tail: list[Message] = Field(default_factory=list)

    def with_summary(self, summary_text: str) -> list[Message]:
        """The compacted conversation: head, the summary message, tail."""
        return [*self.head, summary_message(summary_text), *self.tail]


def _head_length(messages: Sequence[Message], policy: ContextPolicy) -> int:
    # The opening system messages and the first user turn: the task as given.
    # A summary message is not part of it, so it is summarised again next
    # time instead of piling up.
    if not policy.keep_first_user_message:
        return 0
    end = 0
    while end < len(messages) and messages[end].role == "system":
        end += 1
    while end < len(messages) and messages[end].role == "user" and not is_summary_message(messages[end]):
        end += 1
    return end


def _orphans_results(tail: Sequence[Message]) -> bool:
    # True when the tail holds a tool result whose call is not in the tail.
    calls = {c.id for m in tail for c in m.tool_calls}
    return any(r.id not in calls for m in tail for r in m.tool_results)


def split_for_compaction(messages: Sequence[Message], policy: ContextPolicy) -> CompactionSplit | None:
    """Cut ``messages`` into what compaction keeps and what it summarises.

    The head (the opening system and user messages, when
    ``policy.keep_first_user_message``) and the last
    ``policy.keep_recent_messages`` messages are kept. The cut then moves
    earlier while the tail holds a tool result whose call would be
    summarised, so the kept conversation never starts with a tool result and
    every tool call keeps its results.

    Returns:
        The split, or None when there is nothing worth summarising: nothing
        between head and tail, or only an earlier summary.
    """
    head_end = _head_length(messages, policy)
    cut = max(head_end, len(messages) - policy.keep_recent_messages)
    while cut > head_end and _orphans_results(messages[cut:]):
        cut -= 1
    middle = list(messages[head_end:cut])
    if all(is_summary_message(m) for m in middle):
        return None
    return CompactionSplit(head=list(messages[:head_end]), to_summarise=middle, tail=list(messages[cut:]))


def render_transcript(messages: Iterable[Message], *, tool_output_chars: int | None = None) -> str:
    """Messages as plain text for a summariser: one bracketed header per
    message or tool call/result, thinking left out, images as ``[image]``,
    tool outputs cut to ``tool_output_chars`` when given."""
    blocks: list[str] = []
    for message in messages:
        lines: list[str] = []
        for part in message.content:
            if isinstance(part, TextPart):
                if part.text:
                    lines.append(part.text)
            elif isinstance(part, ThinkingPart):
                continue
            elif isinstance(part, ImagePart):
                lines.append("[image]")
            elif isinstance(part, ToolCallPart):
                arguments = part.raw_arguments if part.arguments_error and part.raw_arguments is not None else (
                    json.dumps(part.arguments, ensure_ascii=False)
                )
                lines.append(f"[tool call {part.name} ({part.id})] {arguments}")
            elif isinstance(part, ToolResultPart):
                label = "tool error" if part.is_error else "tool result"
                content = part.content if tool_output_chars is None else cut(part.content, tool_output_chars)
                lines.append(f"[{label} {part.name} ({part.id})]\n{content}")
        if lines:
            blocks.append(f"[{message.role}]\n" + "\n".join(lines))
    return "\n\n".join(blocks)


def _fit(text: str, limit: int | None) -> str:
    # Keep the start and, mostly, the end: the newest work matters most.
    if limit is None or len(text) <= limit:
        return text
    keep_start = limit // 3
    keep_end = limit - keep_start
    omitted = len(text) - keep_start - keep_end
    return f"{text[:keep_start]}\n\n[... {omitted:,} chars of transcript omitted ...]\n\n{text[-keep_end:]}"


def compaction_request_messages(
    to_summarise: Sequence[Message],
    policy: ContextPolicy,
    *,
    kept_head: Sequence[Message] = (),
) -> list[Message]:
    """The conversation to send the summariser: one user message holding the
    transcript as text, then ``policy.summary_prompt``.

    The transcript is text, not the original messages, so the request has
    no tool calls for the provider to check and no tools need be offered.
    Tool outputs are cut to ``policy.summary_tool_output_chars``, and when
    the window is known the transcript is cut in the middle to fit 80% of
    the usable window.

    Args:
        to_summarise: :attr:`CompactionSplit.to_summarise`.
        policy: The context policy.
        kept_head: :attr:`CompactionSplit.head`, shown to the summariser as
            context it need not repeat.
    """
    transcript = render_transcript(to_summarise, tool_output_chars=policy.summary_tool_output_chars)
    sections: list[str] = []
    if kept_head:
        head = render_transcript(kept_head, tool_output_chars=policy.summary_tool_output_chars)
        sections.append(
            "The conversation opens with these messages, which are kept as they are "
            "(use them for context; do not repeat them):\n<kept>\n" + head + "\n</kept>"
        )
    usable = usable_tokens(policy)
    limit = None
    if usable is not None:
        overhead = sum(len(s) for s in sections) + len(policy.summary_prompt) + 64
        limit = max(int(usable * CHARS_PER_TOKEN * 0.8) - overhead, 1000)
    sections.append("<transcript>\n" + _fit(transcript, limit) + "\n</transcript>")
    sections.append(policy.summary_prompt)
    return [Message.user("\n\n".join(sections))]
