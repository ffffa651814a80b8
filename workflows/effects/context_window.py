"""Loading a run's context from its worker (``AgentSpec.context_providers``,
``agents_md``, ``workspace_listing``): a ``load_context`` activity on the
tools queue at the run's start, and one before each step for providers of
``when="step"``. Only runs whose spec asks for any of it reach this code.

Keeping the conversation inside the model's context window: prune old tool
outputs, then summarise older history with the model.

The decisions (the estimate, what to prune, where to split) are pure
functions of :mod:`agentloop.shared.definition.context_window`; this module runs them against the
run's state and makes the one I/O call there is, the summary (a
``call_model`` activity whose input names messages by index, so they do not
enter history again).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    # Pydantic models and pure helpers (see agent_run.py).
    from agentloop.shared.base import contracts
    from agentloop.shared.base.messages import Message, TextPart
    from agentloop.shared.definition.activity_io import CallModelInput, CompactionRef, ModelRequest, TranscriptRef
    from agentloop.shared.definition.compaction import split_for_compaction
    from agentloop.shared.definition.context_providers import (
        ContextLayer,
        LoadContextInput,
        LoadContextResult,
        ProviderWhen,
        compose_system_prompt,
        missing_providers_message,
        with_listing,
    )
    from agentloop.shared.definition.context_window import (
        estimate_tokens,
        needs_management,
        prune_target_tokens,
        prune_tool_outputs,
    )
    from agentloop.shared.definition.pricing import price_for
    from agentloop.shared.definition.spec import AgentSpec
    from agentloop.shared.runs.events import ContextManaged
    from agentloop.shared.runs.state import LoopState
    from agentloop.shared.runs.transcripts import ModelContext
    from agentloop.workflows.decisions.next_step import FailRun
    from agentloop.workflows.effects import activity_calls as calls
    from agentloop.workflows.effects.recorder import RunRecorder

#: How long loading the context may take (providers included).
LOAD_CONTEXT_TIMEOUT = timedelta(seconds=60)


def wants_context(spec: AgentSpec) -> bool:
    """Whether a run of ``spec`` loads context from its worker."""
    return bool(spec.context_providers or spec.agents_md is True or spec.workspace_listing)


def system_prompt_with(spec: AgentSpec, layers: list[ContextLayer]) -> str:
    """The spec's system prompt and layers, with ``layers`` added."""
    base = ContextLayer(name="system", content=spec.system_prompt, priority=0, stable=True)
    return compose_system_prompt([base, *spec.system_layers, *layers])


def first_turn_with_listing(messages: list[Message], listing: str) -> list[Message]:
    """``messages`` with the listing added to the last user turn's text."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role == "user":
            others = [p for p in message.content if not isinstance(p, TextPart)]
            turn = Message(role="user", content=[TextPart(text=with_listing(message.text, listing)), *others])
            return [*messages[:index], turn, *messages[index + 1:]]
    return [*messages, Message.user(with_listing("", listing).strip())]


class RunContext:
    """The context a run loads from its worker.

    Args:
        state: The run's state (the first turn takes the listing).
        run_id: The run id.
        spec: The run's spec.
        task_queue: The tools queue (None: the run's own).
    """

    def __init__(self, state: LoopState, run_id: str, spec: AgentSpec, task_queue: str | None) -> None:
        self.state = state
        self.run_id = run_id
        self.spec = spec
        self.task_queue = task_queue
        self.run_layers: list[ContextLayer] = []
        self.step_providers = False

    async def at_start(self, *, fresh: bool) -> FailRun | None:
        """The run's start: run-level providers, AGENTS.md, and (in a fresh
        run) the listing into the first user turn."""
        spec = self.spec
        loaded = await self._load("run", listing=spec.workspace_listing and fresh and self.state.step == 0)
        if isinstance(loaded, FailRun):
            return loaded
        self.run_layers = loaded.layers
        if loaded.listing is not None:
            self.state.replace_messages(first_turn_with_listing(self.state.messages, loaded.listing))
        self.step_providers = bool(spec.context_providers)
        return None

    async def before_step(self) -> FailRun | str | None:
        """The system prompt for the next step with the step-level layers,
        or None when the spec has no providers."""
        if not self.step_providers:
            return None
        loaded = await self._load("step", listing=False)
        if isinstance(loaded, FailRun):
            return loaded
        if not loaded.layers:
            self.step_providers = False  # none of the spec's providers runs per step
        return system_prompt_with(self.spec, [*self.run_layers, *loaded.layers])

    async def _load(self, when: ProviderWhen, *, listing: bool) -> LoadContextResult | FailRun:
        spec = self.spec
        input = LoadContextInput(run_id=self.run_id, step=self.state.step, agent_name=spec.name, model=spec.model,
                                 workspace=spec.workspace, providers=spec.context_providers, when=when,
                                 agents_md=spec.agents_md is True and when == "run", listing=listing)
        try:
            loaded = await workflow.execute_activity(
                contracts.LOAD_CONTEXT, input, result_type=LoadContextResult, summary=f"load context ({when})",
                start_to_close_timeout=LOAD_CONTEXT_TIMEOUT, task_queue=self.task_queue,
                retry_policy=RetryPolicy(maximum_attempts=spec.tool_max_attempts))
        except ActivityError as err:
            calls.reraise_cancel(err)
            after = calls.attempts_note(err, spec.tool_max_attempts)
            return FailRun("error", f"loading the run's context failed{after}: {calls.failure_detail(err)}")
        if loaded.missing:
            return FailRun("error", missing_providers_message(loaded.missing, loaded.available))
        return loaded


#: The system prompt of the summariser call that compacts older history.
SUMMARISER_PROMPT = "You summarise conversations between a user and an AI agent, faithfully and briefly."

NOTHING_TO_SUMMARISE = (
    "the provider refused the request as longer than the model's context window, and "
    "there is no older history left to summarise; use a model with a larger window, "
    "lower tool_output_limit, or start with a shorter input"
)


class ContextKeeper:
    """Prunes and compacts one run's conversation.

    Args:
        state: The run's state (messages, anchor, input count).
        recorder: For ``agent.context.compacted`` events.
        spec: The agent (context policy, model, limits).
        model_queue: The queue of its model calls (its lane's; None: the run's own).
    """

    def __init__(self, state: LoopState, recorder: RunRecorder, spec: AgentSpec,
                 model_queue: str | None = None) -> None:
        self.state = state
        self.model_queue = model_queue
        self.recorder = recorder
        self.spec = spec
        self.context = ModelContext()
        self._tools_chars = 0

    def use(self, context: ModelContext) -> None:
        """The system prompt and tools every request of the run carries."""
        self.context = context
        self._tools_chars = sum(len(t.model_dump_json()) for t in context.tools)

    def estimate(self, messages: Sequence[Message]) -> int:
        return estimate_tokens(messages, system_prompt=self.context.system_prompt,
                               tools_json_chars=self._tools_chars, anchor=self.state.anchor)

    async def manage(self, *, trigger: str) -> FailRun | None:
        """Prune old tool outputs, then summarise older history, when the
        estimate passes the policy's threshold, or always when the provider
        said the request was too long (``trigger="context_length_error"``)."""
        policy = self.spec.context
        forced = trigger == "context_length_error"
        if policy.context_window_tokens is None and not forced:
            return None
        before = self.estimate(self.state.messages)
        if not forced and not needs_management(before, policy):
            return None
        target = prune_target_tokens(policy)
        if target is not None:
            pruned, count = prune_tool_outputs(self.state.messages, policy, target_tokens=target,
                                               estimate=self.estimate)
            if count:
                self.state.replace_messages(pruned)
                after = self.estimate(self.state.messages)
                self.recorder.emit(ContextManaged, kind="prune", tokens_before=before, tokens_after=after,
                                   messages_affected=count, trigger=trigger)
                if not forced and not needs_management(after, policy):
                    return None
                before = after
        return await self._summarise(before, trigger=trigger, forced=forced)

    async def _summarise(self, before: int, *, trigger: str, forced: bool) -> FailRun | None:
        split = split_for_compaction(self.state.messages, self.spec.context)
        if split is None:
            return FailRun("error", NOTHING_TO_SUMMARISE) if forced else None
        start = len(split.head)
        summary = await self._ask_for_summary(start, start + len(split.to_summarise))
        if isinstance(summary, FailRun):
            return summary
        compacted = split.with_summary(summary)
        self.state.input_count = min(self.state.input_count, start)
        self.state.replace_messages(compacted)
        self.state.anchor = None
        self.recorder.emit(ContextManaged, kind="summary", tokens_before=before,
                           tokens_after=self.estimate(compacted), messages_affected=len(split.to_summarise),
                           trigger=trigger)
        return None

    async def _ask_for_summary(self, start: int, end: int) -> str | FailRun:
        """The model's summary of messages[start:end], by reference: the worker
        builds the summariser's request from the transcript it caches."""
        spec, state = self.spec, self.state
        request = ModelRequest(model=spec.model_name, system_prompt=SUMMARISER_PROMPT, messages=[],
                               max_tokens=spec.context.reserve_output_tokens)
        transcript = TranscriptRef(message_count=len(state.messages), transcript_hash=state.transcript_hashes()[-1],
                                   context_hash=self.context.context_hash)
        compaction = CompactionRef(head=start, end=end, policy=spec.context.model_dump(mode="json"))
        input = CallModelInput(run_id=self.recorder.run_id, step=state.step, model=spec.model, request=request,
                               stream_deltas=False, transcript=transcript, compaction=compaction,
                               price=price_for(spec.model, spec.budget))
        try:
            result = await calls.call_model(input, calls.model_call_options(spec, self.model_queue), "compact context")
        except ActivityError as err:
            calls.reraise_cancel(err)
            after = calls.attempts_note(err, spec.llm_max_attempts)
            return FailRun("error", f"summarising older history to fit the context window failed{after}: "
                                    f"{calls.failure_detail(err)}")
        state.add_usage(result.response.usage + result.failed_attempts_usage, result.attempt)
        text = result.response.message.text.strip()
        if not text:
            return FailRun("error", "summarising older history returned no text; the context could not be compacted")
        return text
