"""The renderers of `agentloop watch`, plain, rich and JSON lines, on events
made in the test (the command itself: tests/process/cli/test_cli_watch.py)."""


from __future__ import annotations

import json
from datetime import UTC, datetime
from io import StringIO
from typing import Any

from rich.console import Console

from agentloop.cli.runs.render import JsonlRenderer, PlainRenderer, RichRenderer
from agentloop.shared.base.messages import Message, ToolCallPart, ToolResultPart
from agentloop.shared.base.usage import Usage
from agentloop.shared.definition.activity_io import StreamDelta
from agentloop.shared.definition.approvals import PendingApproval
from agentloop.shared.runs.events import (
    EVENT_ADAPTER,
    ApprovalRequested,
    ApprovalResolved,
    MessageCompleted,
    MessageCreated,
    MessageDelta,
    MessageReset,
    RunCompleted,
    RunCreated,
    RunFailed,
    RunStatusChanged,
    StepCreated,
    ToolCallCompletedByLLM,
    ToolExecutionCompleted,
    ToolExecutionStarted,
)
from tests.helpers.cli import plain_text

T0 = datetime(2025, 1, 1, tzinfo=UTC)


RUN = "run-render"


def ev(event_type: Any, **fields: Any) -> Any:
    return event_type(run_id=RUN, time=T0, **fields)


def sample_events() -> list[Any]:
    """A run in two steps: a write that waits for approval, then an answer
    whose first LLM attempt broke mid-stream and was retried."""
    write = ToolCallPart(id="call_0_0", name="write_file", arguments={"file_path": "out.txt", "content": "hi"})
    approval = PendingApproval(call_id="call_0_0", tool_name="write_file", arguments=write.arguments, step=1,
                               asked_at=T0, reason="'write_file' can change things; approval required")
    m0, m1 = f"{RUN}:msg:0", f"{RUN}:msg:1"
    answer = "All written: out.txt holds hi."
    events = [
        ev(RunCreated, agent_name="agent", model="scripted:x", input=[Message.user("write it")]),
        ev(RunStatusChanged, status="running"),
        ev(StepCreated),
        ev(MessageCreated, message_id=m0),
        ev(MessageDelta, message_id=m0, delta=StreamDelta(kind="text", text="Writing the file.")),
        ev(MessageCompleted, message_id=m0, message=Message.assistant("Writing the file.", [write]),
           usage=Usage(input_tokens=12, output_tokens=7, requests=1)),
        ev(ToolCallCompletedByLLM, call=write),
        ev(ApprovalRequested, approval=approval),
        ev(RunStatusChanged, status="awaiting_approval", previous="running"),
        ev(ToolExecutionStarted, call=write),
        ev(ApprovalResolved, call_id="call_0_0", decision="approve", by="alice"),
        ev(RunStatusChanged, status="running", previous="awaiting_approval"),
        ev(ToolExecutionCompleted,
           result=ToolResultPart(id="call_0_0", name="write_file", content="Wrote 2 bytes to out.txt")),
        ev(StepCreated, step=1),
        ev(MessageCreated, step=1, message_id=m1),
        ev(MessageDelta, step=1, message_id=m1, delta=StreamDelta(kind="text", text="All wri")),
        ev(MessageReset, step=1, message_id=m1, attempt=2),
        ev(MessageDelta, step=1, message_id=m1, attempt=2,
           delta=StreamDelta(kind="text", text="All written: ")),
        ev(MessageDelta, step=1, message_id=m1, attempt=2,
           delta=StreamDelta(kind="text", text="out.txt holds hi.")),
        ev(MessageCompleted, step=1, message_id=m1, message=Message.assistant(answer),
           usage=Usage(input_tokens=30, output_tokens=9, requests=1)),
        ev(RunStatusChanged, step=1, status="completed", previous="running"),
        ev(RunCompleted, step=1, final_text=answer, usage=Usage(input_tokens=42, output_tokens=16, requests=2)),
    ]
    for seq, event in enumerate(events):
        event.seq = seq
    return events


def test_plain_renderer_lines() -> None:
    out, err = StringIO(), StringIO()
    renderer = PlainRenderer(out, err)
    for event in sample_events():
        renderer.render(event)
    assert out.getvalue().splitlines() == [
        "[step 1] assistant: Writing the file.",
        '[step 1] tool call write_file {"file_path": "out.txt", "content": "hi"}',
        '[step 1] approval needed: write_file {"file_path": "out.txt", "content": "hi"} (call call_0_0)',
        "  why: 'write_file' can change things; approval required",
        f"  approve: agentloop approve {RUN} call_0_0",
        f"  deny:    agentloop approve {RUN} call_0_0 --deny --reason '...'",
        "[step 1] call_0_0 approved by alice",
        "[step 1] tool result write_file (ok): Wrote 2 bytes to out.txt",
        "[step 2] the LLM call failed; retrying (attempt 2)",
        "",
        "All written: out.txt holds hi.",  # once, whole, at the end
    ]
    assert err.getvalue() == "\n[2 steps, 1 tool call, 42 in / 16 out tokens]\n"
    assert renderer.pending == {}


def test_plain_renderer_endings() -> None:
    stopped = RunCompleted(run_id=RUN, time=T0, status="stopped", reason="stopped", final_text="partial")
    failed = RunFailed(run_id=RUN, time=T0, reason="max_steps", error="the run took 3 steps")
    for event, stop_reason, expected_err, expected_out in [
        (stopped, "stopped: enough", f"\nrun {RUN} stopped on request (stopped: enough)\n", "\npartial\n"),
        (failed, None, f"\nrun {RUN} failed (max_steps): the run took 3 steps\n", ""),
    ]:
        out, err = StringIO(), StringIO()
        PlainRenderer(out, err).render(event, stop_reason=stop_reason)
        assert err.getvalue().startswith(expected_err) and out.getvalue() == expected_out


def test_jsonl_renderer_writes_exactly_the_events() -> None:
    out, err = StringIO(), StringIO()
    renderer = JsonlRenderer(out, err)
    events = sample_events()
    for event in events:
        renderer.render(event)
    assert [json.loads(line) for line in out.getvalue().splitlines()] == [e.model_dump(mode="json") for e in events]
    assert err.getvalue() == "\n[2 steps, 1 tool call, 42 in / 16 out tokens]\n"


def test_rich_renderer_streams_text_and_highlights_approvals() -> None:
    buffer = StringIO()
    renderer = RichRenderer(Console(file=buffer, force_terminal=True, width=100))
    events = sample_events()
    for event in events[:9]:  # up to the wait for approval
        renderer.render(event)
    waiting = plain_text(buffer.getvalue())
    assert "\x1b[" in buffer.getvalue()  # styled
    assert ' approval needed  write_file {"file_path": "out.txt", "content": "hi"}  (call call_0_0)\n' in waiting
    assert f"approve: agentloop approve {RUN} call_0_0\n" in waiting
    assert "status: running → awaiting_approval" in waiting
    assert "→ write_file" in waiting and "12 in / 7 out tokens" in waiting
    for event in events[9:]:
        renderer.render(event)
    shown = plain_text(buffer.getvalue())
    assert "call_0_0 approved by alice" in shown and "✓ write_file  Wrote 2 bytes to out.txt" in shown
    # The broken attempt's text stays above the note; the answer shows once, below it.
    before, after = shown.split("(retrying step 2, attempt 2)")
    assert before.rstrip().endswith("All wri")
    assert after.count("All written: out.txt holds hi.") == 1
    assert "✓ completed · 2 steps, 1 tool call, 42 in / 16 out tokens" in after


def test_rich_renderer_shows_what_was_not_streamed() -> None:
    buffer = StringIO()
    renderer = RichRenderer(Console(file=buffer, force_terminal=True, width=100))
    # Watching from past the answer's deltas: the message and the final text still show, once.
    for event in sample_events()[19:]:
        renderer.render(event)
    shown = plain_text(buffer.getvalue())
    assert shown.count("All written: out.txt holds hi.") == 1
    assert "✓ completed · 42 in / 16 out tokens" in shown


def test_renderers_show_a_compaction() -> None:
    compacted = EVENT_ADAPTER.validate_python({
        "type": "agent.context.compacted", "run_id": RUN, "time": T0.isoformat(), "step": 4, "kind": "prune",
        "tokens_before": 150000, "tokens_after": 90000, "messages_affected": 7,
    })
    out = StringIO()
    PlainRenderer(out, StringIO()).render(compacted)
    assert out.getvalue() == ("[step 5] context compacted: pruned old tool outputs (7), "
                              "about 150000 → 90000 input tokens\n")
    buffer = StringIO()
    RichRenderer(Console(file=buffer, force_terminal=True, width=100)).render(compacted)
    assert "context compacted: pruned old tool outputs (7)" in plain_text(buffer.getvalue())
