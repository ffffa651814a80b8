"""The one way text is cut short: to at most ``limit`` characters, the cut
marked where it happened with how much went and, when the caller has one,
what to do about it.

The mark reads ``…[1,234 characters cut]``, or ``…[1,234 characters cut:
narrow the command]`` with a hint. It counts what is missing (the reader
learns how much there was, and it reads the same after a head or between a
head and a tail); it opens with ``…``, so it stands out from the text around
it; and it is short, so a small limit still keeps most of its text.

A one-line preview too short for the mark ends in ``…`` alone (:func:`clip`).

Pure and deterministic: workflows cut with it too.
"""

from __future__ import annotations

__all__ = ["ELLIPSIS", "clip", "cut", "cut_mark", "cut_marked"]


def cut_mark(count: int, hint: str | None = None) -> str:
    """The mark left where ``count`` characters were cut."""
    unit = "character" if count == 1 else "characters"
    return f"…[{count:,} {unit} cut{': ' + hint if hint else ''}]"


def cut_marked(
    text: str, limit: int, *, hint: str | None = None, tail: bool = False, length: int | None = None
) -> tuple[str, bool]:
    """``text`` cut to at most ``limit`` characters, the mark counted in, and
    whether it was cut.

    Args:
        text: The whole text.
        limit: Most characters of the result. A limit too small for the mark
            gives the mark alone (a cut is always shown).
        hint: What the mark suggests doing (e.g. "narrow the command").
        tail: Keep the end too: two thirds of the room go to the head, one
            third to the tail (a command's output ends with how it ended).
        length: The whole text's length when ``text`` is only its start (a
            file read up to a bound), so that the mark counts all that went.
            Not with ``tail``.
    """
    if tail and length is not None:
        raise ValueError("cut: a text given only by its start has no tail to keep")
    total = len(text) if length is None else max(length, len(text))
    if total <= limit:
        return text, False
    keep = max(0, limit - len(cut_mark(total, hint)))
    mark = cut_mark(total - keep, hint)
    if not tail:
        return text[:keep] + mark, True
    head = keep * 2 // 3
    # text[-0:] would be the whole text, hence the explicit start index.
    return text[:head] + mark + text[len(text) - (keep - head):], True


def cut(text: str, limit: int, *, hint: str | None = None, tail: bool = False, length: int | None = None) -> str:
    """``text`` cut to at most ``limit`` characters (see :func:`cut_marked`)."""
    return cut_marked(text, limit, hint=hint, tail=tail, length=length)[0]


#: What ends a text :func:`clip` shortened (the CLI's and reports' one-line previews).
ELLIPSIS = "…"


def clip(text: str, limit: int) -> str:
    """``text`` when it fits in ``limit`` characters, else its first
    ``limit - 1`` and :data:`ELLIPSIS`: a one-line preview, where
    :func:`cut`'s mark saying how much was cut would not fit."""
    return text if len(text) <= limit else text[: limit - 1] + ELLIPSIS
