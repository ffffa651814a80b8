"""Context-window management: estimates, layers, pruning, compaction (pure)."""

from __future__ import annotations

import functools
import json

import pytest
from pydantic import ValidationError

from agentloop.shared.base.messages import ImagePart, Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from agentloop.shared.definition.compaction import (
    CompactionSplit,
    compaction_request_messages,
    is_summary_message,
    render_transcript,
    split_for_compaction,
    summary_message,
)
from agentloop.shared.definition.context_providers import ContextLayer, compose_system_prompt
from agentloop.shared.definition.context_window import (
    CHARS_PER_TOKEN,
    IMAGE_TOKENS,
    SUMMARY_HEADER,
    ContextPolicy,
    TokenAnchor,
    estimate_tokens,
    make_anchor,
    messages_chars,
    needs_management,
    prune_target_tokens,
    prune_tool_outputs,
    trigger_tokens,
)


def step(n: int, output: str = "x" * 400, *, name: str = "read") -> list[Message]:
    """One tool step: an assistant call and its result message."""
    call = ToolCallPart(id=f"c{n}", name=name, arguments={"n": n})
    return [
        Message.assistant(f"step {n}", [call]),
        Message(role="tool", content=[ToolResultPart(id=f"c{n}", name=name, content=output)]),
    ]


def conversation(steps: int, output: str = "x" * 400) -> list[Message]:
    messages = [Message.user("Do the task.")]
    for n in range(steps):
        messages += step(n, output)
    return messages


def assert_calls_have_results(messages: list[Message]) -> None:
    calls = [c.id for m in messages for c in m.tool_calls]
    results = [r.id for m in messages for r in m.tool_results]
    assert sorted(calls) == sorted(results)
    # Every result comes after its call.
    seen: set[str] = set()
    for m in messages:
        for part in m.content:
            if isinstance(part, ToolCallPart):
                seen.add(part.id)
            elif isinstance(part, ToolResultPart):
                assert part.id in seen


# --- estimate_tokens -------------------------------------------------------


def test_chars_count_every_part_kind() -> None:
    call = ToolCallPart(id="id1", name="grep", arguments={"q": "é"})
    bad = ToolCallPart(id="id2", name="grep", arguments_error="not json", raw_arguments="{oops")
    message = Message(
        role="assistant",
        content=[TextPart(text="abcd"), ThinkingPart(text="12345678", signature="s" * 500), call, bad],
    )
    expected = 4 + 8 + (3 + 4 + len(json.dumps({"q": "é"}, ensure_ascii=False))) + (3 + 4 + 5)
    assert messages_chars([message]) == expected
    result = Message(role="tool", content=[ToolResultPart(id="id1", name="grep", content="hit")])
    assert messages_chars([result]) == 3 + 4 + 3
    image = Message(role="user", content=[ImagePart(url="https://example.com/a.png")])
    assert estimate_tokens([image]) == IMAGE_TOKENS


def test_estimate_without_anchor_counts_everything_at_four_chars() -> None:
    messages = [Message.user("a" * 100), Message.assistant("b" * 40)]
    assert estimate_tokens(messages) == 35
    assert estimate_tokens(messages, system_prompt="s" * 20, tools_json_chars=40) == 50
    assert estimate_tokens([]) == 0
    assert estimate_tokens([Message.user("abcde")]) == 2  # rounds up


def test_anchor_plus_new_messages() -> None:
    sent = [Message.user("a" * 1000)]
    anchor = TokenAnchor(message_count=1, input_tokens=777)
    later = sent + [Message.assistant("b" * 400), Message.user("c" * 40)]
    # The anchored prefix is the provider's count, system prompt included.
    assert estimate_tokens(later, system_prompt="ignored" * 100, tools_json_chars=999, anchor=anchor) == 777 + 110
    assert estimate_tokens(sent, anchor=anchor) == 777


def test_anchor_from_make_anchor_tracks_edits_in_the_prefix() -> None:
    messages = conversation(3, output="x" * 4000)
    anchor = make_anchor(messages, 5000)
    assert anchor.message_count == len(messages) and anchor.prefix_chars == messages_chars(messages)
    assert estimate_tokens(messages, anchor=anchor) == 5000
    policy = ContextPolicy(protect_recent_tool_results=0)
    pruned, count = prune_tool_outputs(
        messages, policy, target_tokens=0, estimate=functools.partial(estimate_tokens, anchor=anchor)
    )
    assert count == 3
    saved = messages_chars(messages) - messages_chars(pruned)
    assert estimate_tokens(pruned, anchor=anchor) == 5000 - saved // CHARS_PER_TOKEN


def test_anchor_longer_than_conversation_is_ignored() -> None:
    # After compaction the conversation is shorter than the anchored request.
    anchor = TokenAnchor(message_count=50, input_tokens=100_000)
    messages = [Message.user("a" * 400)]
    assert estimate_tokens(messages, anchor=anchor) == 100


def test_anchor_estimate_never_negative() -> None:
    messages = [Message.user("a")]
    anchor = TokenAnchor(message_count=1, input_tokens=0, prefix_chars=10_000)
    assert estimate_tokens(messages, anchor=anchor) == 0


# --- layers ------------------------------------------------------------------


def test_compose_orders_stable_first_then_priority_then_name() -> None:
    layers = [
        ContextLayer(name="task", content="TASK", priority=1, stable=False),
        ContextLayer(name="b-role", content="ROLE-B", priority=10),
        ContextLayer(name="a-role", content="ROLE-A", priority=10),
        ContextLayer(name="base", content="BASE", priority=0),
        ContextLayer(name="empty", content="  \n", priority=-5),
        ContextLayer(name="late", content="\nLATE\n", priority=50, stable=False),
    ]
    assert compose_system_prompt(layers) == "BASE\n\nROLE-A\n\nROLE-B\n\nTASK\n\nLATE"
    assert compose_system_prompt([]) == ""
    assert compose_system_prompt(reversed(layers)) == compose_system_prompt(layers)


def test_layer_rejects_unknown_fields() -> None:
    with pytest.raises(ValidationError):
        ContextLayer(name="x", content="y", tags=["a"])


# --- policy ------------------------------------------------------------------


def test_needs_management_threshold() -> None:
    policy = ContextPolicy(context_window_tokens=100_000, reserve_output_tokens=10_000, threshold=0.8)
    assert trigger_tokens(policy) == 72_000
    assert not needs_management(72_000, policy)
    assert needs_management(72_001, policy)
    assert prune_target_tokens(policy) == 63_000
    unknown = ContextPolicy()
    assert not needs_management(10**9, unknown)
    assert trigger_tokens(unknown) is None and prune_target_tokens(unknown) is None


def test_policy_validation() -> None:
    with pytest.raises(ValidationError, match="prune_target"):
        ContextPolicy(threshold=0.5, prune_target=0.6)
    with pytest.raises(ValidationError, match="reserve_output_tokens"):
        ContextPolicy(context_window_tokens=4096, reserve_output_tokens=4000)
    with pytest.raises(ValidationError, match="pruned_placeholder"):
        ContextPolicy(pruned_placeholder="[pruned {size}]")
    with pytest.raises(ValidationError):
        ContextPolicy(thresold=0.5)
    assert ContextPolicy(pruned_placeholder="[gone]").pruned_placeholder == "[gone]"


# --- pruning -----------------------------------------------------------------


def test_prune_oldest_first_until_under_target_and_keeps_structure() -> None:
    messages = conversation(6, output="y" * 4000)
    before = [m.model_copy(deep=True) for m in messages]
    policy = ContextPolicy(protect_recent_tool_results=2)
    total = estimate_tokens(messages)
    # Asking for ~2.5 outputs' worth less prunes the three oldest.
    pruned, count = prune_tool_outputs(messages, policy, target_tokens=total - 2500, estimate=estimate_tokens)
    assert count == 3
    assert messages == before  # the input is not modified
    assert len(pruned) == len(messages)
    assert [m.role for m in pruned] == [m.role for m in messages]
    results = [r for m in pruned for r in m.tool_results]
    assert [r.content for r in results[:3]] == ["[tool output pruned to save context: 4,000 chars]"] * 3
    assert [r.content for r in results[3:]] == ["y" * 4000] * 3
    assert [(r.id, r.name) for r in results] == [(f"c{n}", "read") for n in range(6)]
    assert_calls_have_results(pruned)
    assert estimate_tokens(pruned) <= total - 2500
    # Unchanged messages are shared, not copied.
    assert pruned[-1] is messages[-1]


def test_prune_never_touches_protected_recent_results() -> None:
    messages = conversation(4, output="z" * 2000)
    policy = ContextPolicy(protect_recent_tool_results=3)
    pruned, count = prune_tool_outputs(messages, policy, target_tokens=0, estimate=estimate_tokens)
    assert count == 1
    contents = [r.content for m in pruned for r in m.tool_results]
    assert contents[0].startswith("[tool output pruned")
    assert contents[1:] == ["z" * 2000] * 3


def test_prune_protects_counting_parts_not_messages() -> None:
    # One tool message with three results: protecting 2 leaves the first prunable.
    calls = [ToolCallPart(id=f"p{i}", name="t") for i in range(3)]
    messages = [
        Message.user("go"),
        Message.assistant("", calls),
        Message(role="tool", content=[ToolResultPart(id=f"p{i}", name="t", content="q" * 500) for i in range(3)]),
    ]
    pruned, count = prune_tool_outputs(
        messages, ContextPolicy(protect_recent_tool_results=2), target_tokens=0, estimate=estimate_tokens
    )
    assert count == 1
    assert [r.content[:6] for r in pruned[2].tool_results] == ["[tool ", "qqqqqq", "qqqqqq"]


def test_prune_does_nothing_under_target_and_is_idempotent() -> None:
    messages = conversation(5, output="w" * 1000)
    policy = ContextPolicy(protect_recent_tool_results=1)
    same, count = prune_tool_outputs(messages, policy, target_tokens=10**6, estimate=estimate_tokens)
    assert count == 0 and same == messages
    once, first = prune_tool_outputs(messages, policy, target_tokens=0, estimate=estimate_tokens)
    twice, second = prune_tool_outputs(once, policy, target_tokens=0, estimate=estimate_tokens)
    assert first == 4 and second == 0 and twice == once


def test_prune_skips_short_outputs_and_keeps_error_flag() -> None:
    messages = [
        Message.user("go"),
        Message.assistant("", [ToolCallPart(id="a", name="t"), ToolCallPart(id="b", name="t")]),
        Message(
            role="tool",
            content=[
                ToolResultPart(id="a", name="t", content="short", is_error=True),
                ToolResultPart(id="b", name="t", content="e" * 900, is_error=True),
            ],
        ),
        *step(9),
    ]
    pruned, count = prune_tool_outputs(
        messages, ContextPolicy(protect_recent_tool_results=1), target_tokens=0, estimate=estimate_tokens
    )
    assert count == 1
    a, b = pruned[2].tool_results
    assert a.content == "short" and a.is_error
    assert b.content == "[tool output pruned to save context: 900 chars]" and b.is_error


def test_prune_uses_custom_placeholder() -> None:
    messages = conversation(2, output="v" * 12345)
    policy = ContextPolicy(protect_recent_tool_results=1, pruned_placeholder="<dropped {chars} chars>")
    pruned, _ = prune_tool_outputs(messages, policy, target_tokens=0, estimate=estimate_tokens)
    assert pruned[2].tool_results[0].content == "<dropped 12345 chars>"
    # Even a placeholder shorter than its own re-rendering is left alone.
    again, count = prune_tool_outputs(pruned, policy, target_tokens=0, estimate=estimate_tokens)
    assert count == 0 and again == pruned


# --- compaction split --------------------------------------------------------


def test_split_keeps_head_and_recent_messages() -> None:
    messages = [Message.system("rules"), Message.user("task"), *conversation(10)[1:]]
    split = split_for_compaction(messages, ContextPolicy(keep_recent_messages=4))
    assert split is not None
    assert [m.text for m in split.head] == ["rules", "task"]
    assert len(split.tail) == 4
    assert split.head + split.to_summarise + split.tail == messages
    assert split.tail[0].role == "assistant"


def test_split_never_orphans_tool_results() -> None:
    messages = conversation(10)
    # An odd count would start the tail at a tool message: the cut moves back.
    for keep in range(0, 12):
        split = split_for_compaction(messages, ContextPolicy(keep_recent_messages=keep))
        assert split is not None
        assert len(split.tail) >= keep
        assert not split.tail or split.tail[0].role != "tool"
        assert_calls_have_results(split.tail)
        assert_calls_have_results(split.to_summarise)
        compacted = split.with_summary("S")
        assert_calls_have_results(compacted)
    assert len(split_for_compaction(messages, ContextPolicy(keep_recent_messages=3)).tail) == 4


def test_split_moves_back_over_results_far_from_their_call() -> None:
    # A call whose result comes later, after another message (e.g. client tools).
    messages = [
        Message.user("task"),
        Message.assistant("x"),
        Message.user("y"),
        Message.assistant("a", [ToolCallPart(id="far", name="t")]),
        Message.user("meanwhile"),
        Message(role="tool", content=[ToolResultPart(id="far", name="t", content="r")]),
        Message.assistant("b"),
        Message.user("more"),
        Message.assistant("c"),
    ]
    split = split_for_compaction(messages, ContextPolicy(keep_recent_messages=4))
    assert split is not None
    assert split.tail[0] is messages[3]
    assert [m.text for m in split.to_summarise] == ["x", "y"]
    # Nothing left between head and tail: nothing to summarise.
    assert split_for_compaction(messages[:1] + messages[3:], ContextPolicy(keep_recent_messages=4)) is None


def test_split_returns_none_when_nothing_to_summarise() -> None:
    policy = ContextPolicy(keep_recent_messages=6)
    assert split_for_compaction([], policy) is None
    assert split_for_compaction(conversation(2), policy) is None  # 5 messages, all kept
    # Only an earlier summary between head and tail.
    messages = [Message.user("task"), summary_message("before"), *step(1), *step(2), *step(3)]
    assert split_for_compaction(messages, policy) is None


def test_split_without_head_and_summary_is_summarised_again() -> None:
    messages = [Message.user("task"), summary_message("old"), *conversation(6)[1:]]
    split = split_for_compaction(messages, ContextPolicy(keep_recent_messages=2))
    assert split is not None
    assert [m.text for m in split.head] == ["task"]
    assert is_summary_message(split.to_summarise[0])
    off = split_for_compaction(messages, ContextPolicy(keep_recent_messages=2, keep_first_user_message=False))
    assert off is not None and off.head == [] and off.to_summarise[0].text == "task"


def test_with_summary_rebuilds_conversation() -> None:
    messages = conversation(8)
    split = split_for_compaction(messages, ContextPolicy(keep_recent_messages=4))
    assert split is not None
    compacted = split.with_summary("  We read files 0-5.  ")
    assert compacted[0] is messages[0]
    assert compacted[1].role == "user" and is_summary_message(compacted[1])
    assert compacted[1].text == f"{SUMMARY_HEADER}\n\nWe read files 0-5."
    assert compacted[2:] == messages[-4:]
    assert estimate_tokens(compacted) < estimate_tokens(messages)
    # The split round-trips through JSON (pydantic data converter).
    assert CompactionSplit.model_validate_json(split.model_dump_json()) == split


def test_summary_message_detection() -> None:
    assert is_summary_message(summary_message("x"))
    assert not is_summary_message(Message.user("hello"))
    assert not is_summary_message(Message.assistant(SUMMARY_HEADER))


# --- summariser request ------------------------------------------------------


def test_render_transcript() -> None:
    messages = [
        Message.user("task"),
        Message(role="assistant", content=[ThinkingPart(text="secret"), TextPart(text="on it"),
                                           ToolCallPart(id="c1", name="read", arguments={"path": "a.txt"})]),
        Message(role="tool", content=[ToolResultPart(id="c1", name="read", content="A" * 50, is_error=True)]),
        Message(role="user", content=[ImagePart(url="https://x/y.png")]),
    ]
    text = render_transcript(messages, tool_output_chars=30)
    assert "secret" not in text
    assert '[tool call read (c1)] {"path": "a.txt"}' in text
    assert "[tool error read (c1)]\n" + "A" * 10 + "…[40 characters cut]\n" in text
    assert "[user]\n[image]" in text
    assert text.startswith("[user]\ntask\n\n[assistant]\non it\n")


def test_compaction_request_holds_transcript_and_prompt() -> None:
    messages = conversation(6, output="o" * 5000)
    policy = ContextPolicy(keep_recent_messages=2, summary_tool_output_chars=100)
    split = split_for_compaction(messages, policy)
    assert split is not None
    request = compaction_request_messages(split.to_summarise, policy, kept_head=split.head)
    assert len(request) == 1 and request[0].role == "user"
    text = request[0].text
    assert text.endswith(policy.summary_prompt)
    assert "<kept>\n[user]\nDo the task.\n</kept>" in text
    assert "[tool call read (c0)]" in text and "[tool call read (c4)]" in text
    assert "[tool call read (c5)]" not in text  # kept in the tail
    assert "…[4,923 characters cut]" in text
    assert not request[0].tool_calls and not request[0].tool_results


def test_compaction_request_fits_the_window() -> None:
    policy = ContextPolicy(
        context_window_tokens=8192, reserve_output_tokens=1024, keep_recent_messages=0,
        summary_tool_output_chars=10_000,
    )
    messages = conversation(40, output="m" * 5000)
    split = split_for_compaction(messages, policy)
    assert split is not None
    request = compaction_request_messages(split.to_summarise, policy)
    assert estimate_tokens(request) < 8192 - 1024
    text = request[0].text
    assert "chars of transcript omitted" in text
    assert "[tool call read (c0)]" in text and "[tool call read (c39)]" in text
