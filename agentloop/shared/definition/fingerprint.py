"""An agent's fingerprint: a stable hash of what defines it.

Two runs with the same fingerprint ran the same definition: model, system
prompt and its layers, tools (names, and the schemas the spec itself holds:
client and activity tools, sub-agents), policy (permissions, guardrails,
hooks, typed output...) and limits (steps, budget, timeouts...). What only
says where or how a run is carried out (its name, workspace, streaming
settings, ``upgrade``) is not part of it.

The fingerprint goes in the run's report, its ``agent.run.created`` event and
the ``AgentVersion`` search attribute (``agentloop list --query
'AgentVersion="…"'``). A restored or forked run compares its spec with the
snapshot's (:func:`definition_change`) and says what changed.

Pure functions of the spec (no I/O, no clock): the client computes them at
start and the workflow may compute them again, with the same answer.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from agentloop.shared.definition.spec import AgentSpec

#: Hex digits of the fingerprint (48 bits: collisions among one team's agent
#: definitions are not a concern; short enough to read and type).
FINGERPRINT_CHARS = 12

#: Spec fields that are not part of the definition (where or how a run is
#: carried out, not what the agent is).
NOT_DEFINITION = frozenset({"name", "workspace", "stream_deltas", "stream_batch_seconds", "upgrade", "lane",
                           "priority"})

#: Spec fields of each part; every other field (but NOT_DEFINITION) is a limit.
PROMPT_FIELDS = ("system_prompt", "system_layers", "context_providers", "agents_md", "workspace_listing",
                 "verify_before_completing", "verification_prompt")
TOOL_SCHEMA_FIELDS = ("client_tools", "activity_tools", "sub_agents", "mcp_servers")
POLICY_FIELDS = ("permissions", "default_permission", "approval_timeout_seconds", "guardrails", "tool_hooks",
                 "tool_choice", "double_texting", "output", "output_retries", "parallel_tool_calls")


class AgentDefinition(BaseModel):
    """A spec's definition, in parts, each hashed (tools listed by name), so
    two definitions can be compared part by part.

    Attributes:
        fingerprint: The hash of all the parts (:data:`FINGERPRINT_CHARS` hex digits).
        model: ``provider:model``.
        prompt: Hash of the system prompt, its layers and context providers.
        tools: Names of every tool the model may be offered by the spec:
            worker tools, MCP servers (``mcp:<server>``), activity, client
            and sub-agent tools.
        tool_schemas: Hash of the tool definitions the spec holds.
        policy: Hash of permissions, guardrails, hooks, tool choice, output.
        limits: Hash of the rest: steps, budget, timeouts, attempts, context.
    """

    fingerprint: str
    model: str
    prompt: str
    tools: list[str] = Field(default_factory=list)
    tool_schemas: str
    policy: str
    limits: str


class DefinitionChange(BaseModel):
    """How a run's definition differs from the one it was restored or forked from.

    Attributes:
        before: The snapshot's fingerprint.
        after: This run's.
        changed: Whether they differ.
        model: ``(before, after)`` when the model changed.
        prompt_changed: The system prompt (or its layers) changed.
        tools_added: Tool names in this run's spec only.
        tools_removed: Tool names in the snapshot's spec only.
        tool_schemas_changed: A tool definition the spec holds changed.
        policy_changed: Permissions, guardrails, hooks, tool choice or output changed.
        limits_changed: Steps, budget, timeouts, attempts or context policy changed.
    """

    before: str
    after: str
    changed: bool
    model: tuple[str, str] | None = None
    prompt_changed: bool = False
    tools_added: list[str] = Field(default_factory=list)
    tools_removed: list[str] = Field(default_factory=list)
    tool_schemas_changed: bool = False
    policy_changed: bool = False
    limits_changed: bool = False

    def describe(self) -> str:
        """One line: ``unchanged (<fp>)``, or what changed."""
        if not self.changed:
            return f"agent definition unchanged ({self.after})"
        parts = []
        if self.model is not None:
            parts.append(f"model {self.model[0]} -> {self.model[1]}")
        if self.prompt_changed:
            parts.append("system prompt changed")
        if self.tools_removed:
            parts.append("tools removed: " + ", ".join(self.tools_removed))
        if self.tools_added:
            parts.append("tools added: " + ", ".join(self.tools_added))
        if self.tool_schemas_changed:
            parts.append("tool definitions changed")
        if self.policy_changed:
            parts.append("policy changed")
        if self.limits_changed:
            parts.append("limits changed")
        return f"agent definition changed ({self.before} -> {self.after}): " + "; ".join(parts)


def _digest(value: Any, chars: int = FINGERPRINT_CHARS) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:chars]


def tool_names(spec: AgentSpec) -> list[str]:
    """Every tool the spec offers the model, by name, sorted."""
    names = set(spec.tools) | {f"mcp:{s}" for s in spec.mcp_servers} | set(spec.sub_agents)
    names |= {t.name for t in spec.client_tools} | {t.name for t in spec.activity_tools}
    return sorted(names)


def agent_definition(spec: AgentSpec) -> AgentDefinition:
    """The spec's definition in parts, with its fingerprint."""
    data = spec.model_dump(mode="json")
    pick = lambda fields: {k: data.get(k) for k in fields}  # noqa: E731
    taken = {"model", "tools", *PROMPT_FIELDS, *TOOL_SCHEMA_FIELDS, *POLICY_FIELDS, *NOT_DEFINITION}
    limits = {k: v for k, v in data.items() if k not in taken}
    parts: dict[str, Any] = {
        "model": spec.model,
        "prompt": _digest(pick(PROMPT_FIELDS)),
        "tools": tool_names(spec),
        "tool_schemas": _digest(pick(TOOL_SCHEMA_FIELDS)),
        "policy": _digest(pick(POLICY_FIELDS)),
        "limits": _digest(limits),
    }
    return AgentDefinition(fingerprint=_digest(parts), **parts)


def agent_fingerprint(spec: AgentSpec) -> str:
    """The spec's fingerprint: :data:`FINGERPRINT_CHARS` hex digits, stable
    across processes and versions of Python."""
    return agent_definition(spec).fingerprint


def definition_change(before: AgentDefinition, after: AgentDefinition) -> DefinitionChange:
    """What changed from ``before`` (a snapshot's spec) to ``after`` (the
    restored or forked run's)."""
    return DefinitionChange(
        before=before.fingerprint,
        after=after.fingerprint,
        changed=before.fingerprint != after.fingerprint,
        model=(before.model, after.model) if before.model != after.model else None,
        prompt_changed=before.prompt != after.prompt,
        tools_added=sorted(set(after.tools) - set(before.tools)),
        tools_removed=sorted(set(before.tools) - set(after.tools)),
        tool_schemas_changed=before.tool_schemas != after.tool_schemas,
        policy_changed=before.policy != after.policy,
        limits_changed=before.limits != after.limits,
    )
