"""Guardrails (AgentSpec.guardrails), the pure decisions (runs with guardrails:
tests/server/loop/test_guardrails.py)."""


from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentloop import AgentSpec, GuardrailResult, guardrail, llm_judge
from agentloop.shared.base.errors import UserError
from agentloop.shared.base.messages import Message, ToolResultPart
from agentloop.shared.definition.guardrails import (
    Verdict,
    first_tripwire,
    judge_request_text,
    messages_to_check,
    parse_judge_reply,
)
from agentloop.tools.registry import ToolRegistry


def test_input_guardrails_check_what_is_new_since_the_model_spoke() -> None:
    first = [Message.user("hi")]
    assert messages_to_check(first) == first
    result = Message(role="tool", content=[ToolResultPart(id="c", name="t", content="out")])
    convo = [Message.user("hi"), Message.assistant("calling"), result]
    assert messages_to_check(convo) == [result]
    assert messages_to_check([Message.user("hi"), Message.assistant("done")]) == []


def test_judge_reply_parsing() -> None:
    verdict = parse_judge_reply('Sure. {"pass": false, "tripwire": true, "reason": "rude", "severity": "high"}')
    assert (verdict.passed, verdict.tripwire, verdict.reason, verdict.severity) == (False, True, "rude", "high")
    assert parse_judge_reply('{"passed": true}').passed
    assert parse_judge_reply('{"pass": false, "severity": "whatever"}').severity == "medium"
    for bad in ("no json here", '{"pass": tru', '{"reason": "x"}'):
        with pytest.raises(ValueError):
            parse_judge_reply(bad)
    assert "the agent's response" in judge_request_text("output", [Message.assistant("hello")])


def test_tripwire_implies_failure_and_the_first_one_wins() -> None:
    assert GuardrailResult(tripwire=True).passed is False
    verdicts = [Verdict("a", "input", GuardrailResult.fail("meh")), Verdict("b", "input", GuardrailResult.trip("no")),
                Verdict("c", "input", GuardrailResult.trip("also no"))]
    assert first_tripwire(verdicts).name == "b"
    assert first_tripwire(verdicts[:1]) is None


def test_registration_and_spec_refuse_bad_input() -> None:
    registry = ToolRegistry()
    with pytest.raises(UserError, match="stage must be 'input' or 'output'"):
        guardrail(lambda ctx: GuardrailResult.ok(), stage="before", name="x", registry=registry)
    with pytest.raises(UserError, match="not allowed"):
        guardrail(lambda ctx: GuardrailResult.ok(), stage="input", name="bad name", registry=registry)
    with pytest.raises(UserError, match="LLM judge 'j'.*provider:model"):
        llm_judge("j", stage="output", model="gpt-4", prompt="x", registry=registry)
    guardrail(lambda ctx: GuardrailResult.ok(), stage="input", name="dup", registry=registry)
    with pytest.raises(UserError, match="already registered"):
        guardrail(lambda ctx: GuardrailResult.fail("x"), stage="input", name="dup", registry=registry)
    with pytest.raises(ValidationError, match="guardrails names dup more than once"):
        AgentSpec(model="scripted:demo", guardrails=["dup", "dup"])


def test_the_cli_shows_guardrail_events() -> None:
    import io
    from datetime import UTC, datetime

    from agentloop.cli.runs.render import PlainRenderer
    from agentloop.shared.runs.events import GuardrailTriggered

    out = io.StringIO()
    PlainRenderer(out, io.StringIO()).render(GuardrailTriggered(
        run_id="r", step=1, time=datetime.now(UTC), name="polite", stage="output", tripwire=True,
        reason="rude", severity="high"))
    assert out.getvalue() == "[step 2] guardrail polite (output) tripped [high]: rude\n"


def test_a_long_guardrail_reason_is_cut_with_the_one_mark() -> None:
    from agentloop.shared.definition.guardrails import MAX_GUARDRAIL_REASON_CHARS

    result = GuardrailResult(passed=False, reason="w" * 100_000)
    assert len(result.reason) <= MAX_GUARDRAIL_REASON_CHARS and result.reason.endswith("characters cut]")
    # Validating it again keeps it as it is.
    assert GuardrailResult.model_validate(result.model_dump()).reason == result.reason
