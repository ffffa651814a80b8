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


async def test_a_path_parameter_cannot_leave_the_operations_path(tmp_path: Path) -> None:
    """``.`` and ``..`` as a path parameter would make the URL another path of
    the API (``/repos/../admin``, normalised to ``/admin``), called with the
    worker's credentials: refused before any request (the base URL answers
    nothing, so a request would be a connection error instead)."""
    from agentloop.tools.registry import InvalidToolArguments
    from agentloop.tools.tool_context import ToolContext

    document = {"openapi": "3.0.0", "info": {"title": "t", "version": "1"}, "paths": {"/repos/{owner}/{repo}/issues": {
        "delete": {"operationId": "dropIssues", "parameters": [
            {"name": n, "in": "path", "required": True, "schema": {"type": "string"}} for n in ("owner", "repo")],
            "responses": {"204": {"description": "gone"}}}}}}
    (tmp_path / "api.json").write_text(json.dumps(document))
    [tool] = openapi_tools("gh", {"spec": str(tmp_path / "api.json"), "base_url": "http://127.0.0.1:9"})
    for owner, repo in ((".", "r"), ("o", ".."), ("..", "..")):
        with pytest.raises(InvalidToolArguments, match="would leave the operation's path"):
            await tool.run({"owner": owner, "repo": repo}, ToolContext(workspace=tmp_path))
