"""Loading a run's context from its worker (``AgentSpec.context_providers``,
``agents_md``, ``workspace_listing``): a ``load_context`` activity on the
tools queue at the run's start, and one before each step for providers of
``when="step"``. Only runs whose spec asks for any of it reach this code.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    # Pydantic models and pure helpers (see agent_run.py).
    from agentloop.shared import contracts
    from agentloop.shared.context import ContextLayer, compose_system_prompt
    from agentloop.shared.context import LoadContextInput, LoadContextResult, missing_providers_message, with_listing
    from agentloop.shared.messages import Message, TextPart
    from agentloop.shared.spec import AgentSpec
    from agentloop.workflows import activity_calls as calls
    from agentloop.workflows.loop_logic import FailRun
    from agentloop.shared.state import LoopState

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

    async def _load(self, when: str, *, listing: bool) -> LoadContextResult | FailRun:
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
