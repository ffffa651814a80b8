"""What maps to what between an agentloop run and MCP: pure functions, no
I/O. A registered agent is a tool (:func:`tool_entry`); a run is a task
whose id is the run id (:func:`task_view`); an approval or a client tool is
an ``input_required`` elicitation (:func:`input_requests`), and its answer a
decision (:func:`read_responses`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from agentloop.shared.definition.approvals import PendingWork
from agentloop.shared.definition.spec import AgentSpec

#: The Tasks extension's identifier (SEP-2663, protocol 2026-07-28).
TASKS = "io.modelcontextprotocol/tasks"
#: How often a client should poll ``tasks/get``, in milliseconds.
POLL_INTERVAL_MS = 500
#: An ``inputRequests`` key: an approval, or a client tool's output, of one call.
APPROVAL_PREFIX, ACTION_PREFIX = "approve:", "output:"
#: The most characters of a tool's arguments an elicitation's message quotes.
ARGUMENTS_SHOWN = 2000

DECISION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {"type": "string", "enum": ["approve", "deny", "skip"],
                     "description": "approve runs the call; deny tells the model it was denied; skip answers "
                                    "with `result` without running it"},
        "reason": {"type": "string", "description": "why (a denial's reason reaches the model)"},
        "result": {"type": "string", "description": "approve or skip: answer the model with this instead"},
    },
    "required": ["decision"],
}
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"output": {"type": "string", "description": "the call's output, as the model reads it"}},
    "required": ["output"],
}


def tool_entry(name: str, spec: AgentSpec) -> dict[str, Any]:
    """The ``tools/list`` entry of registered agent ``name``: its input is
    the message; a typed agent's output schema is its ``output``'s."""
    entry: dict[str, Any] = {
        "name": name,
        "description": _description(name, spec),
        "inputSchema": {
            "type": "object",
            "properties": {"message": {"type": "string", "minLength": 1,
                                       "description": "the instruction for the agent (the run's input)"}},
            "required": ["message"],
        },
    }
    if spec.output is not None:
        entry["outputSchema"] = _structured_schema(spec)
    return entry


def _description(name: str, spec: AgentSpec) -> str:
    first = spec.system_prompt.strip().splitlines()[0][:300] if spec.system_prompt.strip() else ""
    return (f"Run the agentloop agent {name!r} (a durable run; answered inline, or as a task the client polls "
            "when it supports io.modelcontextprotocol/tasks)" + (f": {first}" if first else "."))


def _structured_schema(spec: AgentSpec) -> dict[str, Any]:
    assert spec.output is not None
    if spec.output.wrapped:
        return {"type": "object", "properties": {"result": spec.output.json_schema}, "required": ["result"]}
    return spec.output.json_schema


@dataclass(frozen=True)
class Message:
    """A tool call's arguments, read: the run's input."""

    text: str


@dataclass(frozen=True)
class BadArguments:
    """Arguments that are not a tool's: the sentence says what is expected."""

    detail: str


def read_arguments(arguments: dict[str, Any] | None) -> Message | BadArguments:
    """A call's ``{"message": ...}``, or why it is not one."""
    arguments = arguments or {}
    unknown = sorted(set(arguments) - {"message"})
    if unknown:
        return BadArguments(f"unknown argument(s) {', '.join(unknown)}: an agent tool takes only `message`")
    message = arguments.get("message")
    if not isinstance(message, str) or not message.strip():
        return BadArguments("`message` is required: a non-empty string, the instruction for the agent")
    return Message(message)


def call_result(status: str, final_text: str, output: Any, error: str | None) -> dict[str, Any]:
    """The ``CallToolResult`` of a run that ended ``status``: the final text,
    and a typed agent's answer as ``structuredContent`` (an object as it is,
    another value as ``{"result": ...}``, as the tool's ``outputSchema``
    says); ``isError`` unless it completed."""
    if status != "completed":
        text = f"the run ended {status}" + (f": {error}" if error else "") + (f"\n\n{final_text}" if final_text else "")
        return {"content": [{"type": "text", "text": text}], "isError": True}
    result: dict[str, Any] = {"content": [{"type": "text", "text": final_text}], "isError": False}
    if output is not None:
        result["structuredContent"] = output if isinstance(output, dict) else {"result": output}
    return result


def input_requests(tool: str, pending: PendingWork) -> dict[str, Any]:
    """The elicitations of a run waiting for approvals or client outputs,
    keyed ``approve:<call id>`` and ``output:<call id>``."""
    requests: dict[str, Any] = {}
    for approval in pending.approvals:
        message = (f"Agent tool {tool!r} wants to call {approval.tool_name!r} with arguments "
                   f"{_shown(approval.arguments)}" + (f" ({approval.reason})" if approval.reason else "")
                   + ": approve, deny or skip?")
        requests[APPROVAL_PREFIX + approval.call_id] = _elicitation(message, DECISION_SCHEMA, approval.tool_name,
                                                                    approval.arguments)
    for action in pending.actions:
        message = (f"Agent tool {tool!r} asks the client to run {action.tool_name!r} with arguments "
                   f"{_shown(action.arguments)}: give its output")
        requests[ACTION_PREFIX + action.call_id] = _elicitation(message, OUTPUT_SCHEMA, action.tool_name,
                                                                action.arguments)
    return requests


def _shown(arguments: Any) -> str:
    import json

    text = json.dumps(arguments, ensure_ascii=False, default=str)
    return text if len(text) <= ARGUMENTS_SHOWN else text[:ARGUMENTS_SHOWN] + "..."


def _elicitation(message: str, schema: dict[str, Any], tool_name: str, arguments: Any) -> dict[str, Any]:
    return {"method": "elicitation/create",
            "params": {"mode": "form", "message": message, "requestedSchema": schema,
                       "_meta": {"io.agentloop/call": {"tool": tool_name, "arguments": arguments}}}}


TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]


def task_view(run_id: str, status: TaskStatus, created: str, updated: str, *, message: str | None = None,
              requests: dict[str, Any] | None = None, result: dict[str, Any] | None = None,
              error: dict[str, Any] | None = None) -> dict[str, Any]:
    """A ``DetailedTask``: the task whose id is the run id."""
    task: dict[str, Any] = {"taskId": run_id, "status": status, "createdAt": created, "lastUpdatedAt": updated,
                            "ttlMs": None, "pollIntervalMs": POLL_INTERVAL_MS}
    if message:
        task["statusMessage"] = message
    if status == "input_required":
        task["inputRequests"] = requests or {}
    if status == "completed":
        task["result"] = result or {"content": [], "isError": False}
    if status == "failed":
        task["error"] = error or {"code": -32603, "message": message or "the run failed"}
    return task


def live_status(run_status: str) -> TaskStatus:
    """The task status of a run that goes on."""
    return "input_required" if run_status in ("awaiting_approval", "requires_action") else "working"


@dataclass(frozen=True)
class Decide:
    """Decide one waiting call (the ``approve`` update)."""

    call_id: str
    decision: Literal["approve", "deny", "skip"]
    reason: str | None = None
    result: str | None = None


@dataclass(frozen=True)
class Submit:
    """Submit the outputs of every call the run waits for (the ``submit_tool_outputs`` update)."""

    outputs: dict[str, str]


@dataclass(frozen=True)
class Refused:
    """Responses that cannot be applied, and why."""

    detail: str


Answer = Decide | Submit | Refused


def read_responses(responses: dict[str, Any], pending: PendingWork) -> list[Answer]:
    """What ``tasks/update``'s ``inputResponses`` ask, against what the run
    waits for now. Keys not outstanding are ignored (the spec's rule for
    answered or unknown keys); an elicitation the user cancelled leaves its
    call waiting; a declined approval is a denial."""
    approvals = {APPROVAL_PREFIX + p.call_id: p.call_id for p in pending.approvals}
    actions = {ACTION_PREFIX + a.call_id: a.call_id for a in pending.actions}
    answers: list[Answer] = []
    outputs: dict[str, str] = {}
    for key, response in responses.items():
        if key not in approvals and key not in actions:
            continue
        if not isinstance(response, dict):
            answers.append(Refused(f"the response to {key!r} is not an elicitation result object"))
            continue
        action, content = response.get("action"), response.get("content") or {}
        if action == "cancel":
            continue
        if key in approvals:
            answers.append(_decision(approvals[key], action, content))
        elif action != "accept" or not isinstance(content.get("output"), str):
            answers.append(Refused(f"the response to {key!r} must accept with content {{\"output\": \"...\"}}"))
        else:
            outputs[actions[key]] = content["output"]
    if outputs:
        missing = sorted(set(actions.values()) - set(outputs))
        answers.append(Refused(f"the run waits for the outputs of every call at once; missing: "
                               f"{', '.join(ACTION_PREFIX + m for m in missing)}") if missing else Submit(outputs))
    return answers


def _decision(call_id: str, action: Any, content: Any) -> Answer:
    if action == "decline":
        return Decide(call_id, "deny", reason="declined over MCP")
    if action != "accept" or not isinstance(content, dict):
        return Refused(f"the response to {APPROVAL_PREFIX + call_id!r} must be accept, decline or cancel")
    decision = content.get("decision")
    if decision not in ("approve", "deny", "skip"):
        return Refused(f"the response to {APPROVAL_PREFIX + call_id!r} needs content.decision: approve, deny or "
                       f"skip (got {str(decision)[:40]!r})")
    reason, result = content.get("reason"), content.get("result")
    if not isinstance(reason, str | None) or not isinstance(result, str | None):
        return Refused(f"the response to {APPROVAL_PREFIX + call_id!r}: reason and result are strings")
    return Decide(call_id, decision, reason=reason, result=result)


#: The progress message of a retried attempt's reset begins with this: a
#: client drops the text it was shown since the step's progress message.
RESET_PREFIX = "the answer starts again"


def progress_text(event: Any) -> str | None:
    """The progress message of one run event, or None for events that say
    nothing to an MCP client: a step begins, a tool is called, streamed
    text, a retried attempt drops the text streamed before it."""
    kind = getattr(event, "type", "")
    if kind == "agent.run.step.created":
        return f"step {event.step + 1}"
    if kind == "agent.tool.execution.started":
        return f"calling tool {event.call.name}"
    if kind == "agent.tool.approval.requested":
        return f"waiting for approval of {event.approval.tool_name}"
    if kind == "thread.message.delta" and event.delta.kind == "text" and event.delta.text:
        return str(event.delta.text)
    if kind == "thread.message.reset":  # the text streamed so far is dropped; the new attempt's follows
        return f"{RESET_PREFIX} (attempt {event.attempt})"
    return None
