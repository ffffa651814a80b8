"""A tool that cannot describe itself to the model: caught at registration
when its parameters have no JSON schema, and otherwise (a ``definition()``
that raises on the worker) a run naming it fails at once with a sentence
that names the tool, instead of a lookup retried forever (on a real Temporal
dev server)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType

from agentloop import AgentClient, AgentRunFailed, AgentSpec
from agentloop.shared.base.errors import UserError
from agentloop.shared.definition.activity_io import ToolDefinition
from agentloop.testing import reply, script
from agentloop.tools.registry import Tool, ToolRegistry
from tests.helpers.runs import task_failures


def test_a_parameter_without_a_json_schema_is_refused_at_registration() -> None:
    registry = ToolRegistry()

    def schedule(when: str, callback: Callable[[], None]) -> str:
        """Call back later."""
        return when

    with pytest.raises(UserError) as refused:
        registry.tool(schedule)
    message = str(refused.value)
    assert message.startswith("tool 'schedule': its arguments have no JSON schema to show the model "
                              "(PydanticInvalidForJsonSchema: "), message
    assert message.endswith("give each parameter a JSON type (str, int, float, bool, a list, a dict, "
                            "a pydantic model)"), message
    assert registry.get("schedule") is None


class SchemaFromElsewhere(Tool):
    """A tool whose definition is built on the worker from something that is
    broken there (a schema file, a registry of types)."""

    def definition(self) -> ToolDefinition:
        raise KeyError("#/components/schemas/Order")


def note(text: str) -> str:
    """Keep a note."""
    return text


async def test_a_tool_whose_definition_raises_fails_the_run_with_a_sentence(
        worker: Any, agent_client: AgentClient) -> None:
    registry = ToolRegistry()
    registry.register(SchemaFromElsewhere(note))
    spec = AgentSpec(model=script(reply("never")), tools=["note"])
    async with worker(registry=registry):
        handle = await agent_client.start(spec, "go")
        with pytest.raises(AgentRunFailed) as failed:
            await handle.result()
    assert failed.value.reason == "error"
    assert failed.value.result.error == (
        "the tool 'note' cannot give its definition on this worker: KeyError: '#/components/schemas/Order'; "
        "fix the tool (its parameters, its schema) on the worker, then start the run again")
    history = await handle.workflow_handle.fetch_history()
    assert task_failures(history) == []
    # Looked up once beside the run, once on the tools queue: neither retried.
    lookups = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED]
    assert [e.activity_task_started_event_attributes.attempt for e in lookups] == [1]
    assert not [e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
                and e.activity_task_scheduled_event_attributes.activity_type.name == "call_model"]
