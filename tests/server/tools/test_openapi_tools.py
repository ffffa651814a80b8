"""OpenAPI operations as tools, against a local API (starlette, served by
uvicorn on a free port) described by tests/openapi/pets.yaml."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from agentloop import AgentClient, AgentSpec
from agentloop.activities.tool_sources.openapi_tools import register_openapi_tools
from agentloop.testing import call, calls, reply, script
from agentloop.tools.registry import ToolRegistry
from agentloop.workers.devserver import free_port
from tests.helpers.paths import PETS_API as SPEC

TOKEN = "pets-token-5b1e"
PETS = [{"id": 1, "name": "Rex", "kind": "dog"}, {"id": 2, "name": "Tom", "kind": "cat"}]


def app() -> Starlette:
    keys: list[str] = []

    def authorized(request: Request) -> bool:
        return request.headers.get("authorization") == f"Bearer {TOKEN}"

    async def list_pets(request: Request) -> Any:
        if not authorized(request):
            return PlainTextResponse("missing credential", status_code=401)
        kind = request.query_params.get("kind")
        return JSONResponse([p for p in PETS if kind in (None, p["kind"])])

    async def create_pet(request: Request) -> Any:
        keys.append(request.headers.get("idempotency-key", ""))
        body = await request.json()
        return JSONResponse({"id": 3, **body, "idempotency_key_seen": bool(keys[-1])}, status_code=201)

    async def get_pet(request: Request) -> Any:
        pet_id = int(request.path_params["pet_id"])
        found = [p for p in PETS if p["id"] == pet_id]
        if not found:
            return PlainTextResponse(f"no pet {pet_id}; " + "x" * 5000, status_code=404)
        return JSONResponse(found[0])

    return Starlette(routes=[Route("/pets", list_pets, methods=["GET"]), Route("/pets", create_pet, methods=["POST"]),
                             Route("/pets/{pet_id}", get_pet, methods=["GET"])])


@pytest.fixture
async def api() -> AsyncIterator[str]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app(), host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    await task


async def test_operations_are_tools_called_over_http(api: str, worker: Any, agent_client: AgentClient,
                                                     registry: ToolRegistry, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PETS_TOKEN", TOKEN)
    names = register_openapi_tools(registry, "pets", spec=str(SPEC), base_url=api,
                                   headers={"Authorization": "Bearer ${PETS_TOKEN}"})
    assert names == ["pets__listPets", "pets__createPet", "pets__getPet"]
    model = script(
        calls(call("pets__listPets", {"kind": "cat"}), call("pets__getPet", {"petId": 9}),
              call("pets__createPet", {"body": {"name": "Kit", "kind": "cat"}}), call("pets__getPet", {"petId": "x"})),
        reply("done"),
    )
    spec = AgentSpec(model=model, tools=names, default_permission="allow", tool_output_limit=300)
    async with worker():
        result = await agent_client.run(spec, "pets")
    listed, missing, created, bad = [r for m in result.messages for r in m.tool_results]
    assert json.loads(listed.content) == [PETS[1]] and not listed.is_error
    assert missing.is_error and missing.content.startswith("Error: HTTP 404 Not Found from GET /pets/9: no pet 9; xxx")
    assert len(missing.content) < 600 and "characters" in missing.content  # cut to the output limit, with a note
    assert json.loads(created.content) == {"id": 3, "name": "Kit", "kind": "cat", "idempotency_key_seen": True}
    assert bad.is_error and bad.content.startswith("Invalid arguments for tool 'pets__getPet': petId: 'x' is not of "
                                                   "type 'integer'")


async def test_missing_credential_is_an_error_result_with_the_status(api: str, worker: Any,
                                                                    agent_client: AgentClient,
                                                                    registry: ToolRegistry) -> None:
    register_openapi_tools(registry, "pets", spec=str(SPEC), base_url=api)
    spec = AgentSpec(model=script(calls(call("pets__listPets")), reply("no")), tools=["pets__listPets"],
                     max_consecutive_failed_tool_steps=2)
    async with worker():
        result = await agent_client.run(spec, "pets")
    (listed,) = [r for m in result.messages for r in m.tool_results]
    assert listed.is_error and listed.content == "Error: HTTP 401 Unauthorized from GET /pets: missing credential"


