"""A scripted model: replies from a script, not from an LLM.

For tests and offline demos. A script is a list of replies, one per step, or
a function of the request. The step is read from the conversation (the
number of assistant messages so far), not from a counter in this process, so
a retried activity or a new worker after a crash replies exactly as before.

Register scripts in the worker under a name and use ``scripted:<name>`` as
the spec's model::

    register_scripted_model("greeter", [reply("Hello!")])
"""

from __future__ import annotations

import asyncio
import difflib
import inspect
import json
import re
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any

from temporalio.exceptions import ApplicationError

from agentloop.activities.providers.streaming import message_deltas
from agentloop.shared.base.errors import MODEL_CONFIGURATION_ERROR_TYPE, SCRIPT_EXHAUSTED_ERROR_TYPE
from agentloop.shared.base.messages import Message, ToolCallPart, ToolResultPart
from agentloop.shared.base.usage import Usage
from agentloop.shared.definition.activity_io import DeltaSink, FinishReason, ModelRequest, ModelResponse

ScriptFunction = Callable[[ModelRequest], ModelResponse | Awaitable[ModelResponse]]
ScriptStep = ModelResponse | ScriptFunction | BaseException


def reply(text: str, *, finish_reason: FinishReason = "stop") -> ModelResponse:
    """A scripted text answer."""
    return ModelResponse(
        message=Message.assistant(text),
        finish_reason=finish_reason,
        raw_finish_reason=finish_reason,
        model="scripted",
    )


def call(name: str, arguments: dict[str, Any] | None = None, *, id: str | None = None) -> ToolCallPart:
    """A scripted tool call (use with :func:`calls`)."""
    return ToolCallPart(id=id or "", name=name, arguments=arguments or {})


def calls(*tool_calls: ToolCallPart, text: str = "") -> ModelResponse:
    """A scripted step asking for tool calls. Calls without an id get one."""
    return ModelResponse(
        message=Message.assistant(text, list(tool_calls)),
        finish_reason="tool_calls",
        raw_finish_reason="tool_calls",
        model="scripted",
    )


def step_of(request: ModelRequest) -> int:
    """The zero-based step a request belongs to: assistant messages so far."""
    return sum(1 for m in request.messages if m.role == "assistant")


def turn_of(request: ModelRequest) -> tuple[str, int]:
    """The message a request answers (the latest user message: a thread's
    turn, or steering) and the zero-based step within its answer (assistant
    messages since that message)."""
    last_user = max((i for i, m in enumerate(request.messages) if m.role == "user"), default=-1)
    text = request.messages[last_user].text if last_user >= 0 else ""
    step = sum(1 for m in request.messages[last_user + 1:] if m.role == "assistant")
    return text, step


def last_tool_results(request: ModelRequest) -> list[ToolResultPart]:
    """The tool results of the previous step, if the request ends with them."""
    if request.messages and request.messages[-1].role == "tool":
        return request.messages[-1].tool_results
    return []


def _estimate_usage(request: ModelRequest, response: ModelResponse) -> Usage:
    # A rough count (4 characters a token) so reports and budgets have numbers.
    prompt = len(request.system_prompt) + sum(
        len(m.model_dump_json()) for m in request.messages
    )
    completion = len(response.message.model_dump_json())
    return Usage(input_tokens=prompt // 4 + 1, output_tokens=completion // 4 + 1, requests=1)


def _with_call_ids(response: ModelResponse, step: int) -> ModelResponse:
    """``response`` with an id on each tool call that has none. Ids must be
    unique per run and stable across retries: they are derived from the
    step. A response whose calls all have ids is returned as it is."""
    content = response.message.content
    if all(part.id for part in content if isinstance(part, ToolCallPart)):
        return response
    tool_index = 0
    parts = []
    for part in content:
        if isinstance(part, ToolCallPart):
            if not part.id:
                part = part.model_copy(update={"id": f"call_{step}_{tool_index}"})
            tool_index += 1
        parts.append(part)
    return response.model_copy(update={"message": Message(role="assistant", content=parts)})


class ScriptedChatModel:
    """A :class:`~agentloop.shared.definition.activity_io.ChatModel` that plays a script.

    Args:
        script: One entry per step (a :class:`ModelResponse`, a function of the
            request, or an exception to raise), or a single function that
            answers every step.
        delta_seconds: With ``on_delta``, the pause before each streamed
            chunk, as a provider streaming slowly would pause (0: the whole
            answer at once, which publishes no deltas; see
            :mod:`agentloop.activities.stream_publisher`).
        paced: The kinds of delta paused before (``"text"``,
            ``"tool_call_delta"``, ...); None: every delta.
    """

    def __init__(self, script: Sequence[ScriptStep] | ScriptFunction, *, delta_seconds: float = 0.0,
                 paced: Collection[str] | None = None) -> None:
        self.script = script
        self.delta_seconds = delta_seconds
        self.paced = paced

    async def complete(self, request: ModelRequest, on_delta: DeltaSink | None = None) -> ModelResponse:
        """Play the script's entry for the request's step.

        With ``on_delta``, the answer is also passed on as a provider would
        stream it (text in a few chunks, tool calls as start, arguments, end),
        after it is complete: what is returned is the same either way.
        """
        step = step_of(request)
        if callable(self.script) and not isinstance(self.script, Sequence):
            entry: ScriptStep = self.script
        else:
            if step >= len(self.script):
                raise ApplicationError(
                    f"the scripted model has {len(self.script)} steps and was asked for step "
                    f"{step + 1}; add steps to the script",
                    type=SCRIPT_EXHAUSTED_ERROR_TYPE,
                    non_retryable=True,
                )
            entry = self.script[step]
        if isinstance(entry, BaseException):
            raise entry
        if isinstance(entry, ModelResponse):
            response = entry
        else:
            produced = entry(request)
            response = await produced if inspect.isawaitable(produced) else produced
        response = _with_call_ids(response, step)
        if response.usage == Usage():
            response = response.model_copy(update={"usage": _estimate_usage(request, response)})
        if on_delta is not None:
            for delta in message_deltas(response.message):
                if self.delta_seconds and (self.paced is None or delta.kind in self.paced):
                    await asyncio.sleep(self.delta_seconds)
                on_delta(delta)
        return response


_scripted_models: dict[str, ScriptedChatModel] = {}


def register_scripted_model(
    name: str, script: Sequence[ScriptStep] | ScriptFunction, *, delta_seconds: float = 0.0,
    paced: Collection[str] | None = None,
) -> None:
    """Make ``scripted:<name>`` play ``script`` in this worker process
    (``delta_seconds``, ``paced``: see :class:`ScriptedChatModel`)."""
    _scripted_models[name] = ScriptedChatModel(script, delta_seconds=delta_seconds, paced=paced)


def scripted_model_problem(model: str) -> str | None:
    """Why this process cannot play ``model`` (``scripted:<name>`` with no
    such script registered here), for a check before a run starts; None
    when it can, or when ``model`` is not a scripted one."""
    provider, _, name = model.partition(":")
    if provider != "scripted" or name in _scripted_models:
        return None
    close = difflib.get_close_matches(name, list(_scripted_models), n=1)
    return (f"no scripted model named {name!r}" + (f" (did you mean scripted:{close[0]}?)" if close else "")
            + f"; registered here: {', '.join(sorted(_scripted_models)) or 'none'}; register one with "
            "agentloop.testing.register_scripted_model() in a module given with --import")


def get_scripted_model(name: str) -> ScriptedChatModel:
    """The scripted model registered as ``name``.

    Raises:
        ApplicationError: Non-retryable, when no such script is registered.
    """
    model = _scripted_models.get(name)
    if model is None:
        raise ApplicationError(
            f"no scripted model named {name!r} is registered in this worker "
            f"(registered: {', '.join(sorted(_scripted_models)) or 'none'}); register one with "
            "agentloop.testing.register_scripted_model() in a module the worker imports "
            "(agentloop worker --import MODULE)",
            type=MODEL_CONFIGURATION_ERROR_TYPE,
            non_retryable=True,
        )
    return model


def _demo(request: ModelRequest) -> ModelResponse:
    """The offline demo: look around the workspace, read a file (one the
    message names, else a README), report. Each message (a thread's turn,
    steering) gets its own answer. An agent with sub-agents hands the
    instruction to each of them, then reports what they said."""
    instruction, step = turn_of(request)
    team = [t.name for t in request.tools if t.parameters.get("required") == ["task"]]
    if team:
        return _demo_lead(request, team, instruction)
    if step == 0:
        return calls(call("list_dir", {"path": ".", "depth": 1}), text="Let me look at the workspace.")
    results = last_tool_results(request)
    if step == 1:
        listing = results[0].content if results else ""
        files = [
            line.strip() for line in listing.splitlines()
            if line.strip() and not line.strip().endswith("/") and not line.startswith("[")
            and re.match(r"^\s*[\w.\-]+$", line)
        ]
        # A file the message names first; then a README, which says most
        # about a workspace; dotfiles the least.
        named = instruction.lower()
        files.sort(key=lambda f: (f.lower() not in named, not f.lower().startswith("readme"), f.startswith("."), f))
        if files:
            return calls(call("read_file", {"file_path": files[0], "limit": 5}),
                         text=f"I will read {files[0]}.")
        return reply(f"The workspace is empty. You asked: {instruction!r}. (scripted demo model)")
    read = next((c for m in reversed(request.messages) for c in m.tool_calls if c.name == "read_file"), None)
    name = read.arguments.get("file_path", "one file") if read else "one file"
    preview = results[0].content if results else ""
    first = re.sub(r"^\s*\d+\t", "", preview.splitlines()[0]) if preview else ""
    return reply(
        f"You asked: {instruction!r}. I listed the workspace and read {name}; its first "
        f"line is: {json.dumps(first)}. (scripted demo model: no LLM was called)"
    )


def _demo_lead(request: ModelRequest, team: list[str], instruction: str) -> ModelResponse:
    """The demo with sub-agents: delegate to all, in parallel, then report."""
    results = last_tool_results(request)
    if not results:
        return calls(*(call(name, {"task": instruction}) for name in team), text="I will ask my team.")
    said = "; ".join(f"{r.name}{' (failed)' if r.is_error else ''}: {r.content}" for r in results)
    return reply(f"My team reported. {said} (scripted demo model: no LLM was called)")


#: The demo's pause before each chunk of text it streams: longer than the
#: default ``stream_batch_seconds``, so its answers stream (a real model's
#: pace) and their deltas publish; tool calls come at once.
DEMO_DELTA_SECONDS = 0.15

register_scripted_model("demo", _demo, delta_seconds=DEMO_DELTA_SECONDS, paced=("text",))
