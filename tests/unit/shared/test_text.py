"""The one text cutter: its limit, its mark, its hint and its tail."""

from __future__ import annotations

import pytest

from agentloop.shared.base.text import clip, cut, cut_mark, cut_marked


def test_a_text_within_the_limit_is_kept_whole() -> None:
    assert cut_marked("hello", 5) == ("hello", False)
    assert cut_marked("", 0) == ("", False)
    assert cut("hello", 100, hint="narrow the command", tail=True) == "hello"


def test_one_character_over_the_limit_is_cut_and_marked() -> None:
    # Room is made for the longest mark ("…[101 characters cut]", 21), and
    # the mark then counts exactly what went.
    assert cut_marked("x" * 101, 100) == ("x" * 79 + "…[22 characters cut]", True)


def test_the_mark_counts_what_went_and_says_the_hint() -> None:
    assert cut_mark(1) == "…[1 character cut]"
    assert cut_mark(1234) == "…[1,234 characters cut]"
    assert cut_mark(5, "narrow the command") == "…[5 characters cut: narrow the command]"
    out = cut("a" * 1000, 100, hint="read a smaller range")
    assert out == "a" * 55 + "…[945 characters cut: read a smaller range]"


@pytest.mark.parametrize("limit", [0, 1, 10, 21])
def test_a_limit_too_small_for_the_mark_gives_the_mark_alone(limit: int) -> None:
    assert cut_marked("abcdefghij" * 10, limit) == ("…[100 characters cut]", True)


@pytest.mark.parametrize("limit", [21, 22, 50, 99])
def test_the_result_never_exceeds_a_limit_that_holds_the_mark(limit: int) -> None:
    text = "abcdefghij" * 10
    out = cut(text, limit)
    assert len(out) <= limit and text.startswith(out[: out.index("…[")])


def test_the_tail_keeps_a_third_of_the_room() -> None:
    text = "a" * 100 + "b" * 100
    mark = "…[110 characters cut]"
    assert cut(text, 90 + len(mark), tail=True) == "a" * 60 + mark + "b" * 30


def test_a_start_of_a_longer_text_is_marked_with_the_whole_length() -> None:
    assert cut("x" * 50, 40, length=10_000) == "x" * 16 + "…[9,984 characters cut]"
    assert cut("x" * 50, 60, length=10_000) == "x" * 36 + "…[9,964 characters cut]"
    assert cut("short", 40, length=5) == "short"
    with pytest.raises(ValueError, match="no tail"):
        cut("x" * 50, 40, tail=True, length=100)


def test_clip_ends_a_shortened_preview_with_an_ellipsis_within_the_limit() -> None:
    assert clip("twelve chars", 12) == "twelve chars"
    assert clip("thirteen char", 12) == "thirteen ch…"
    assert len(clip("x" * 500, 160)) == 160
