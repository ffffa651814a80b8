"""OpenAPI operations as tools without a server: schemas and configuration
errors (calls to a local API: tests/server/tools/test_openapi_tools.py)."""


from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentloop.activities.tool_sources.openapi_tools import openapi_tools, register_openapi_from_env
from agentloop.shared.base.errors import UserError
from agentloop.tools.registry import ToolRegistry
from tests.helpers.paths import PETS_API as SPEC


def test_schemas_from_parameters_and_body() -> None:
    tools = {t.name: t for t in openapi_tools("pets", {"spec": str(SPEC), "base_url": "http://h"})}
    assert tools["pets__getPet"].parameters["required"] == ["petId"]
    assert tools["pets__getPet"].read_only and not tools["pets__createPet"].read_only
    body = tools["pets__createPet"].parameters["properties"]["body"]
    assert body["required"] == ["name"] and set(body["properties"]) == {"name", "kind"}  # $ref inlined
    assert tools["pets__listPets"].definition().description == "List pets, optionally by kind."


def test_configuration_errors_are_sentences(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="cannot read the OpenAPI document"):
        openapi_tools("x", {"spec": str(tmp_path / "none.yaml")})
    (tmp_path / "apis.json").write_text(json.dumps({"pets": {"spec": str(SPEC), "base_url": "http://h"}}))
    registry = ToolRegistry()
    assert register_openapi_from_env(registry, {"AGENTLOOP_OPENAPI": str(tmp_path / "apis.json")})[0] == \
        "pets__listPets"
    assert "pets__getPet" in registry
