"""How two agent definitions differ, part by part and field by field
(``agentloop diff``, docs/diff.md).

The fingerprint (:mod:`agentloop.shared.definition.fingerprint`) hashes each
part of a definition, so it can say *that* the prompt changed; this module
has both specs, so it also says *what*: each field that differs, in the part
the fingerprint counts it in (model, prompt, tools, tool schemas, policy,
limits), with both values written short. Fields that only say where or how a
run is carried out (``NOT_DEFINITION``: name, workspace...) are left out, as
the fingerprint leaves them out.

Pure functions: no I/O, no clock.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field

from agentloop.shared.base.text import clip
from agentloop.shared.definition.fingerprint import (
    NOT_DEFINITION,
    POLICY_FIELDS,
    PROMPT_FIELDS,
    TOOL_SCHEMA_FIELDS,
    DefinitionChange,
    agent_definition,
    definition_change,
)
from agentloop.shared.definition.spec import AgentSpec

#: The part of a definition a spec field belongs to (as the fingerprint counts it).
DefinitionPart = Literal["model", "prompt", "tools", "tool_schemas", "policy", "limits"]

#: The longest a value is written in a field change (the whole is in the specs).
VALUE_CHARS = 400


class FieldChange(BaseModel):
    """One spec field that differs between two definitions.

    Attributes:
        part: The part of the definition it belongs to.
        field: The spec field (``system_prompt``, ``tools``, ``max_steps``...).
        a: Its value in the first spec, as short JSON text.
        b: Its value in the second.
    """

    part: DefinitionPart
    field: str
    a: str
    b: str


class DefinitionDiff(BaseModel):
    """How two agent definitions differ.

    Attributes:
        a: The first definition's fingerprint.
        b: The second's.
        same: The fingerprints are equal.
        summary: The fingerprint's comparison, in parts (hashes compared).
        fields: Each definition field that differs, with both values.
    """

    a: str
    b: str
    same: bool
    summary: DefinitionChange
    fields: list[FieldChange] = Field(default_factory=list)

    def describe(self) -> str:
        """One line: unchanged, or what changed (as ``agentloop fork`` says it)."""
        return self.summary.describe()


def part_of(field: str) -> DefinitionPart:
    """The part of the definition that spec ``field`` belongs to."""
    if field == "model":
        return "model"
    if field == "tools":
        return "tools"
    if field in PROMPT_FIELDS:
        return "prompt"
    if field in TOOL_SCHEMA_FIELDS:
        return "tool_schemas"
    if field in POLICY_FIELDS:
        return "policy"
    return "limits"


def short_json(value: Any, limit: int = VALUE_CHARS) -> str:
    """``value`` as canonical JSON (sorted keys), at most ``limit`` characters."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return clip(text, limit)


def definition_diff(a: AgentSpec, b: AgentSpec) -> DefinitionDiff:
    """How spec ``b`` differs from spec ``a``: the fingerprints, their parts,
    and each field that differs (in the spec's field order)."""
    first, second = agent_definition(a), agent_definition(b)
    data_a, data_b = a.model_dump(mode="json"), b.model_dump(mode="json")
    fields = [
        FieldChange(part=part_of(name), field=name, a=short_json(data_a.get(name)), b=short_json(data_b.get(name)))
        for name in AgentSpec.model_fields
        if name not in NOT_DEFINITION and data_a.get(name) != data_b.get(name)
    ]
    return DefinitionDiff(a=first.fingerprint, b=second.fingerprint, same=first.fingerprint == second.fingerprint,
                          summary=definition_change(first, second), fields=fields)
