"""`agentloop chat` without a server: typed lines, the recap, the view of a
thread's events (the command itself: tests/process/cli/test_chat.py)."""


from __future__ import annotations

import io
from datetime import UTC, datetime
from typing import Any

import pytest

from agentloop.cli.runs.chat_lines import ChatCommand, exit_line, parse_line, recap_lines
from agentloop.cli.runs.chat_view import ChatView
from agentloop.shared.base.messages import Message, ToolCallPart, ToolResultPart
from agentloop.shared.definition.activity_io import StreamDelta
from agentloop.shared.definition.approvals import PendingApproval
from agentloop.shared.runs.events import (
    ApprovalRequested,
    ApprovalResolved,
    MessageCompleted,
    MessageDelta,
    StepCreated,
    ToolExecutionCompleted,
    TurnEnded,
    TurnStarted,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(("line", "expected"), [
    ("hello there", ChatCommand("message", "hello there")),
    ("  spaced  \n", ChatCommand("message", "spaced")),
    ("", ChatCommand("empty")),
    ("   ", ChatCommand("empty")),
    ("//etc/hosts is a path", ChatCommand("message", "/etc/hosts is a path")),
    ("/steer use the v2 API", ChatCommand("steer", "use the v2 API")),
    ("/STEER  loud", ChatCommand("steer", "loud")),
    ("/stop", ChatCommand("stop", "")),
    ("/stop enough for now", ChatCommand("stop", "enough for now")),
    ("/fork 2", ChatCommand("fork", step=2)),
    ("/fork 3  try the other way", ChatCommand("fork", "try the other way", step=3)),
    ("/export", ChatCommand("export", "")),
    ("/export out/t.json", ChatCommand("export", "out/t.json")),
    ("/help", ChatCommand("help")),
    ("/quit", ChatCommand("quit")),
    ("/exit", ChatCommand("quit")),
])
def test_parse_line(line: str, expected: ChatCommand) -> None:
    assert parse_line(line) == expected


@pytest.mark.parametrize(("line", "says"), [
    ("/steer", "/steer needs the text to tell the agent, e.g. /steer use the v2 API"),
    ("/fork", "/fork needs the step to fork after, a whole number 1 or more, e.g. /fork 2"),
    ("/fork two", "/fork needs the step to fork after, a whole number 1 or more ('two' is not), e.g. /fork 2"),
    ("/fork 0", "/fork needs the step to fork after, a whole number 1 or more ('0' is not)"),
    ("/frok 2", ("unknown command /frok; /help lists the commands (start a line with // to send a message "
                 "that begins with /)")),
])
def test_bad_commands_get_a_sentence(line: str, says: str) -> None:
    command = parse_line(line)
    assert command.kind == "error"
    assert command.text.startswith(says)


def test_recap_shows_the_last_things_said() -> None:
    messages = [
        Message.user("first question"),
        Message.assistant("", [ToolCallPart(id="c1", name="read_file", arguments={"file_path": "a"})]),
        Message(role="tool", content=[ToolResultPart(id="c1", name="read_file", content="x")]),
        Message.assistant("first answer"),
        Message.user("second " + "long " * 60),
        Message.assistant("Let me look.", [ToolCallPart(id="c2", name="list_dir"), ToolCallPart(id="c3", name="x")]),
        Message.assistant("second answer"),
    ]
    assert recap_lines(messages) == [
        "  you: first question",
        "  agent called read_file",
        "  agent: first answer",
        "  you: " + ("second " + "long " * 60)[:159] + "…",
        "  agent: Let me look. (called list_dir, x)",
        "  agent: second answer",
    ]
    assert recap_lines(messages, limit=2) == ["  ... 4 earlier", "  agent: Let me look. (called list_dir, x)",
                                              "  agent: second answer"]


def test_exit_line_says_how_to_continue() -> None:
    assert exit_line("t 1") == "left thread t 1; it stays: `agentloop chat --thread 't 1'` continues it"
    assert exit_line("t1", busy=True, embedded=True).endswith(
        "(its current turn goes on once `agentloop chat` or `agentloop dev` runs a worker here)")


def event(cls: type, **fields: Any) -> Any:
    return cls(run_id=fields.pop("run_id", "th"), time=NOW, **fields)


def test_view_streams_an_answer_and_sums_up_the_turn() -> None:
    out = io.StringIO()
    view = ChatView("th", out)
    answer = Message.assistant("Hello, world.")
    for e in [
        event(TurnStarted, turn=1),
        event(StepCreated, step=0),
        event(MessageDelta, message_id="m0", delta=StreamDelta(kind="text", text="Hello")),
        event(MessageDelta, message_id="m0", delta=StreamDelta(kind="thinking", text="hmm")),
        event(MessageDelta, message_id="m0", delta=StreamDelta(kind="text", text=", wor")),
        event(MessageCompleted, message_id="m0", message=answer),
        event(TurnEnded, turn=1, status="completed", final_text="Hello, world."),
    ]:
        view.render(e)
    assert out.getvalue() == "agent> Hello, world.\n[turn 1 completed · step 1 · 0 in / 0 out tokens]\n"
    assert (view.busy, view.turn, view.ended_turn) == (False, 1, 1)


def test_view_shows_tools_and_approvals_and_a_sub_agents_events_not() -> None:
    out = io.StringIO()
    view = ChatView("th", out)
    approval = PendingApproval(call_id="c1", tool_name="write_file", arguments={"file_path": "a.txt"}, step=2,
                               asked_at=NOW)
    asking = Message.assistant("I will write it.", [ToolCallPart(id="c1", name="write_file",
                                                                 arguments={"file_path": "a.txt"})])
    for e in [
        event(TurnStarted, turn=2),
        event(StepCreated, step=1),
        event(MessageCompleted, message_id="m1", message=asking, step=1),
        event(ApprovalRequested, approval=approval, step=1),
        event(StepCreated, run_id="child", step=0),
        event(MessageCompleted, run_id="child", message_id="x", message=Message.assistant("not mine")),
    ]:
        view.render(e)
    assert list(view.pending) == ["c1"]
    for e in [
        event(ApprovalResolved, call_id="c1", decision="approve", by="chat", step=1),
        event(ToolExecutionCompleted, result=ToolResultPart(id="c1", name="write_file", content="wrote 3 bytes"),
              step=1),
        event(StepCreated, step=2),
        event(MessageCompleted, message_id="m2", message=Message.assistant("Done."), step=2),
        event(TurnEnded, turn=2, status="failed", reason="max_steps", error="too many steps"),
    ]:
        view.render(e)
    assert out.getvalue().splitlines() == [
        "agent> I will write it.",
        '  → write_file {"file_path": "a.txt"}',
        '  approval needed: write_file {"file_path": "a.txt"}',
        "  c1 approved by chat",
        "  ✓ write_file: wrote 3 bytes",
        "agent> Done.",
        "[turn 2 failed: max_steps (too many steps) · steps 2-3 · 0 in / 0 out tokens]",
    ]
    assert view.pending == {}


def test_view_prompts_only_when_a_person_types() -> None:
    out = io.StringIO()
    view = ChatView("th", out, interactive=True)
    view.show_prompt()
    view.show_prompt()  # once
    view.render(event(MessageCompleted, message_id="m0", message=Message.assistant("late news")))
    assert out.getvalue() == "you> \nagent> late news\n"
    scripted = io.StringIO()
    ChatView("th", scripted).show_prompt()
    assert scripted.getvalue() == ""
