"""Typed results' pure decisions (agentloop.workflows.decisions.output) and schema helpers."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel

from agentloop import AgentSpec
from agentloop.shared.runs.schedules import parse_duration
from agentloop.testing import call, calls, reply
from agentloop.workflows.decisions.next_step import FailRun
from agentloop.workflows.decisions.output import RetryOutput, TypedAnswer, decide_output, output_mode


class Triage(BaseModel):
    decision: Literal["refund", "escalate"]
    reason: str


OUT = AgentSpec(model="scripted:x", output=Triage).output
WORD = AgentSpec(model="scripted:x", output=Literal["refund", "escalate"]).output


def decide(response, output=OUT, tries=0, last_step=False):
    return decide_output(response, output, tries=tries, retries=2, last_step=last_step)


def test_a_matching_answer_is_typed() -> None:
    assert decide(reply('{"decision": "refund", "reason": "x"}')) == TypedAnswer(
        {"decision": "refund", "reason": "x"}, '{"decision":"refund","reason":"x"}')
    assert decide(reply("escalate"), WORD).value == "escalate"  # a bare word for a string answer


def test_a_wrong_answer_names_its_fields() -> None:
    retry = decide(reply('{"decision": "maybe"}'))
    assert isinstance(retry, RetryOutput) and retry.message.role == "user"
    assert "reason: missing (a required field)" in retry.message.text
    assert "decision: 'maybe' is not one of ['refund', 'escalate']" in retry.message.text


def test_tries_run_out_or_the_last_step() -> None:
    assert isinstance(decide(reply("no"), tries=2), FailRun)
    failed = decide(reply("no"), last_step=True)
    assert isinstance(failed, FailRun) and failed.reason == "output_invalid"


def test_final_result_calls_are_answers_and_other_calls_are_not() -> None:
    assert decide(calls(call("list_dir", {"path": "."}))) is None
    assert decide(reply("cut", finish_reason="length")) is None
    retry = decide(calls(call("final_result", {"result": "maybe"}, id="c1")), WORD)
    assert isinstance(retry, RetryOutput) and retry.message.role == "tool"
    assert retry.message.content[0].is_error
    answer = decide(calls(call("final_result", {"result": "refund"}, id="c1"), call("list_dir", id="c2")), WORD)
    assert isinstance(answer, TypedAnswer) and answer.value == "refund"
    assert [p.is_error for p in answer.results.content] == [False, True]


def test_output_modes() -> None:
    assert output_mode("openai:gpt-4.1-mini") == "native"
    assert output_mode("anthropic:claude-sonnet-4-5") == "native"
    assert output_mode("anthropic:claude-3-5-haiku-latest") == "tool"
    assert output_mode("scripted:demo") == "tool"


def test_durations_and_bad_outputs() -> None:
    assert parse_duration("1h30m").total_seconds() == 5400
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration("soon")
    with pytest.raises(ValueError, match="cannot be imported"):
        AgentSpec(model="scripted:x", output="nowhere.models:Triage")
