"""Context-window management: token estimates, the context policy and
pruning of old tool outputs (compaction is in :mod:`.compaction`).

Everything here is pure and deterministic, so workflow code may call it: no
I/O, clocks or randomness, and inputs are never mutated.

How a run keeps its conversation inside the model's window, before each LLM
step:

1. Estimate the request's input tokens with :func:`estimate_tokens`,
   anchored on the input tokens the provider reported for the previous
   request (:func:`make_anchor`), so only what was added since is guessed.
2. If :func:`needs_management` says the estimate is over
   ``threshold x (window - reserve)``, :func:`prune_tool_outputs` replaces
   the oldest tool outputs with a short placeholder, down to
   :func:`prune_target_tokens`.
3. If that is not enough, :func:`~.compaction.split_for_compaction` picks the
   old middle of the conversation, an LLM call on
   :func:`~.compaction.compaction_request_messages` summarises it, and
   :meth:`~.compaction.CompactionSplit.with_summary` puts the summary in its place.
"""

from __future__ import annotations

import json
import math
import re
import string
from collections.abc import Callable, Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agentloop.shared.base.messages import ImagePart, Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart

#: Characters per token of the estimate; a common rule of thumb for English
#: and code with current tokenizers.
CHARS_PER_TOKEN = 4

#: Tokens counted for one image, whatever its size: a large image costs
#: roughly this much with both OpenAI and Anthropic, and over-estimating is
#: the safe side.

IMAGE_TOKENS = 1000

#: First line of a summary message, which :func:`is_summary_message` looks for.
SUMMARY_HEADER = (
    "[Summary of the earlier conversation, written to save context. "
    "The conversation continues after it.]"
)

DEFAULT_PRUNED_PLACEHOLDER = "[tool output pruned to save context: {chars:,} chars]"

DEFAULT_SUMMARY_PROMPT = """\
The transcript above is the earlier part of a conversation between a user and \
an AI agent that uses tools. It is about to be replaced by your summary: the \
agent will continue the work from your summary and the most recent messages \
only, so anything you leave out is lost.

Write the summary for the agent, in the second person. Include:
1. The user's requests, goals and constraints; quote instructions given after \
the first message exactly.
2. What has been done so far: actions taken, tools used and their important \
results, with the exact file paths, names, identifiers, commands, numbers and \
error messages that may matter later, and how errors were resolved.
3. Decisions made and why, and approaches that were tried and failed.
4. The current state of the work, what remains to do and the very next step.

Be specific and concise; leave out pleasantries and anything no longer \
relevant. Do not call tools. Reply with the summary only."""


class TokenAnchor(BaseModel):
    """The provider's input-token count for a request, to anchor estimates on.

    Make one with :func:`make_anchor` after each LLM call, from the messages
    that call sent and the ``input_tokens`` it reported.

    Attributes:
        message_count: How many messages (from the start of the conversation)
            the request held.
        input_tokens: Input tokens the provider reported for it, system
            prompt and tool definitions included.
        prefix_chars: The estimated size, in characters, of those messages
            when the anchor was made. When set, later edits inside the prefix
            (pruned tool outputs) shift the estimate by the characters they
            added or removed; when None, the prefix is assumed unchanged.
    """

    model_config = ConfigDict(extra="forbid")

    message_count: int = Field(ge=0)
    input_tokens: int = Field(ge=0)
    prefix_chars: int | None = Field(default=None, ge=0)


def part_chars(part: object) -> int:
    """The estimated size of one content part, in characters.

    Text and thinking count their text; a tool call its id, name and JSON
    arguments; a tool result its id, name and content; an image
    :data:`IMAGE_TOKENS` tokens' worth. Thinking signatures are opaque and
    not counted.
    """
    if isinstance(part, (TextPart, ThinkingPart)):
        return len(part.text)
    if isinstance(part, ToolCallPart):
        arguments = part.raw_arguments if part.arguments_error and part.raw_arguments is not None else (
            json.dumps(part.arguments, ensure_ascii=False)
        )
        return len(part.id) + len(part.name) + len(arguments)
    if isinstance(part, ToolResultPart):
        return len(part.id) + len(part.name) + len(part.content)
    if isinstance(part, ImagePart):
        return IMAGE_TOKENS * CHARS_PER_TOKEN
    raise TypeError(f"unknown content part {type(part).__name__}")


def messages_chars(messages: Iterable[Message]) -> int:
    """The estimated size of messages, in characters (see :func:`part_chars`)."""
    return sum(part_chars(part) for message in messages for part in message.content)


def _tokens(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN) if chars > 0 else 0


def make_anchor(messages: Sequence[Message], input_tokens: int) -> TokenAnchor:
    """An anchor for a request that sent ``messages`` and used ``input_tokens``.

    Call it with exactly the list the LLM call sent (before the reply is
    appended) and the call's ``Usage.input_tokens``; estimate later with the
    same list grown or pruned in place, never reordered.
    """
    return TokenAnchor(
        message_count=len(messages),
        input_tokens=input_tokens,
        prefix_chars=messages_chars(messages),
    )


def estimate_tokens(
    messages: Sequence[Message],
    *,
    system_prompt: str = "",
    tools_json_chars: int = 0,
    anchor: TokenAnchor | None = None,
) -> int:
    """Estimated input tokens of a request sending ``messages``.

    With an anchor, the provider's count for the first ``anchor.message_count``
    messages (which already covers the system prompt and tools) plus
    :data:`CHARS_PER_TOKEN` characters a token for the messages after them,
    corrected by any change in the prefix's size when ``anchor.prefix_chars``
    is set. Without one, or when the conversation is now shorter than the
    anchor (it was compacted: the anchor no longer applies), everything is
    estimated from characters.

    Args:
        messages: The conversation that would be sent.
        system_prompt: The system prompt; counted only without an anchor.
        tools_json_chars: Size of the tool definitions as JSON (e.g.
            ``sum(len(t.model_dump_json()) for t in tools)``); counted only
            without an anchor.
        anchor: The last provider-reported count, or None.
    """
    if anchor is not None and anchor.message_count <= len(messages):
        prefix = messages[: anchor.message_count]
        added = messages_chars(messages[anchor.message_count :])
        if anchor.prefix_chars is not None:
            added += messages_chars(prefix) - anchor.prefix_chars
        # Rounding errs high both ways: added characters round up, removed
        # ones down.
        tokens = anchor.input_tokens + (_tokens(added) if added >= 0 else -(-added // CHARS_PER_TOKEN))
        return max(tokens, 0)
    return _tokens(len(system_prompt) + tools_json_chars + messages_chars(messages))


class ContextPolicy(BaseModel):
    """How a run keeps its conversation inside the model's context window.

    Attributes:
        context_window_tokens: The model's context window, in tokens. None
            (the default) means unknown: the conversation is not managed and
            a long run fails when the provider rejects the request.
        threshold: Manage the context once the estimated input exceeds this
            fraction of the usable window (the window less
            ``reserve_output_tokens``).
        prune_target: Prune old tool outputs down to this fraction of the
            usable window. Lower than ``threshold`` so pruning happens in few,
            larger batches: each one changes the conversation's prefix and
            so costs a miss of the provider's prompt cache.
        reserve_output_tokens: Tokens kept free for the model's reply.
        protect_recent_tool_results: The most recent tool results that are
            never pruned, however large.
        keep_recent_messages: The most recent messages that compaction never
            summarises (a few more are kept when needed so a tool call and
            its results stay together).
        keep_first_user_message: Compaction keeps the conversation's opening
            system and user messages (the task as given) verbatim ahead of
            the summary. Turn off when the opening message is itself too
            large to keep.
        pruned_placeholder: What a pruned tool output is replaced with; a
            ``str.format`` template whose ``{chars}`` is the original size.
        summary_prompt: The instruction that follows the transcript in the
            summariser's request.
        summary_tool_output_chars: Most characters of each tool output that
            the summariser sees; longer outputs are cut with a note.
    """

    model_config = ConfigDict(extra="forbid")

    context_window_tokens: int | None = Field(default=None, ge=1024)
    threshold: float = Field(default=0.85, gt=0, le=1)
    prune_target: float = Field(default=0.7, gt=0, le=1)
    reserve_output_tokens: int = Field(default=4096, ge=0)
    protect_recent_tool_results: int = Field(default=3, ge=0)
    keep_recent_messages: int = Field(default=6, ge=0)
    keep_first_user_message: bool = True
    pruned_placeholder: str = DEFAULT_PRUNED_PLACEHOLDER
    summary_prompt: str = Field(default=DEFAULT_SUMMARY_PROMPT, min_length=1)
    summary_tool_output_chars: int = Field(default=2000, ge=0)

    @field_validator("pruned_placeholder")
    @classmethod
    def _check_placeholder(cls, value: str) -> str:
        try:
            value.format(chars=12345)
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(
                f"pruned_placeholder {value!r} is not a str.format template with only "
                f"{{chars}} (the original size), e.g. {DEFAULT_PRUNED_PLACEHOLDER!r}: {exc}"
            ) from None
        return value

    @model_validator(mode="after")
    def _check_sizes(self) -> ContextPolicy:
        if self.prune_target > self.threshold:
            raise ValueError(
                f"prune_target ({self.prune_target}) must not exceed threshold ({self.threshold}): "
                "pruning would stop above the point that triggers it"
            )
        window = self.context_window_tokens
        if window is not None and window - self.reserve_output_tokens < 1024:
            raise ValueError(
                f"reserve_output_tokens ({self.reserve_output_tokens}) leaves less than 1024 tokens "
                f"of context_window_tokens ({window}) for the conversation; lower it or check the "
                "window size"
            )
        return self


def usable_tokens(policy: ContextPolicy) -> int | None:
    """The window less the output reserve, or None when the window is unknown."""
    if policy.context_window_tokens is None:
        return None
    return policy.context_window_tokens - policy.reserve_output_tokens


def trigger_tokens(policy: ContextPolicy) -> int | None:
    """The estimate above which the context is managed, or None (never)."""
    usable = usable_tokens(policy)
    return None if usable is None else round(policy.threshold * usable)


def prune_target_tokens(policy: ContextPolicy) -> int | None:
    """The estimate pruning aims for, or None when the window is unknown."""
    usable = usable_tokens(policy)
    return None if usable is None else round(policy.prune_target * usable)


def needs_management(estimate: int, policy: ContextPolicy) -> bool:
    """True when ``estimate`` exceeds ``threshold x (window - reserve)``;
    always False when the window is unknown."""
    trigger = trigger_tokens(policy)
    return trigger is not None and estimate > trigger


def _placeholder_pattern(template: str) -> re.Pattern[str]:
    # Matches what the template renders to, whatever the size in it.
    pattern = "".join(
        re.escape(literal) + (".*?" if field is not None else "")
        for literal, field, _, _ in string.Formatter().parse(template)
    )
    return re.compile(pattern, re.DOTALL)


def prune_tool_outputs(
    messages: Sequence[Message],
    policy: ContextPolicy,
    *,
    target_tokens: int,
    estimate: Callable[[Sequence[Message]], int],
) -> tuple[list[Message], int]:
    """Replace the oldest tool outputs with a placeholder until the estimate
    is at most ``target_tokens``.

    Tool results are pruned oldest first; the last
    ``policy.protect_recent_tool_results`` are never touched, nor are results
    already pruned (so pruning twice is harmless) or no longer than their
    placeholder.
    Each pruned result keeps its id, name and error flag, and its message
    keeps its place, so every tool call still has its result and providers
    accept the transcript. The model sees the placeholder and can run the
    tool again if it needs the output.

    Args:
        messages: The conversation; not modified.
        policy: Supplies the protected count and the placeholder.
        target_tokens: Stop once the estimate is at most this.
        estimate: Estimates a conversation's tokens, e.g.
            ``functools.partial(estimate_tokens, system_prompt=..., anchor=...)``.
            Called once, on ``messages``; each pruning then counts as
            :data:`CHARS_PER_TOKEN` characters a token saved, as
            :func:`estimate_tokens` counts them.

    Returns:
        The pruned conversation (a new list; unchanged messages are shared)
        and how many tool results were pruned.
    """
    result = list(messages)
    current = estimate(result)
    if current <= target_tokens:
        return result, 0
    positions = [
        (i, j)
        for i, message in enumerate(result)
        for j, part in enumerate(message.content)
        if isinstance(part, ToolResultPart)
    ]
    prunable = positions[: max(0, len(positions) - policy.protect_recent_tool_results)]
    already_pruned = _placeholder_pattern(policy.pruned_placeholder)
    copied: set[int] = set()
    pruned = 0
    saved_chars = 0
    for i, j in prunable:
        if current - saved_chars // CHARS_PER_TOKEN <= target_tokens:
            break
        part = result[i].content[j]
        assert isinstance(part, ToolResultPart)
        placeholder = policy.pruned_placeholder.format(chars=len(part.content))
        if len(part.content) <= len(placeholder) or already_pruned.fullmatch(part.content):
            continue
        if i not in copied:
            result[i] = result[i].model_copy(update={"content": list(result[i].content)})
            copied.add(i)
        result[i].content[j] = part.model_copy(update={"content": placeholder})
        saved_chars += len(part.content) - len(placeholder)
        pruned += 1
    return result, pruned
