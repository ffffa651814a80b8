"""An answer given as text is JSON or a sentence saying why not (never a traceback)."""

from __future__ import annotations

from agentloop.shared.definition.output import decode_text


def test_a_fenced_answer_is_read_as_json() -> None:
    assert decode_text('```json\n{"a": 1}\n```') == ({"a": 1}, None)


def test_a_broken_answer_names_the_place() -> None:
    assert decode_text("{x") == (None, "the answer is not JSON (Expecting property name enclosed in double quotes "
                                       "at character 1)")


def test_an_integer_past_the_digit_limit_is_a_sentence() -> None:
    value, reason = decode_text("1" * 5000)
    assert value is None and reason is not None
    assert reason.startswith("the answer is not JSON (Exceeds the limit"), reason
