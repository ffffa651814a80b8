"""Calls of a Swagger 2.0 and an OpenAPI 3 document's operations, against a
local API (starlette, served by uvicorn on a free port): JSON bodies, forms,
a file upload, repeated query parameters, headers, and binary responses (an
image the model sees, a PDF described); and httpbin's own document, with its
``type: int`` parameters, against the real httpbin served locally."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentloop import AgentClient, AgentSpec
from agentloop.activities.tool_sources.openapi_tools import register_openapi_tools
from agentloop.testing import call, calls, reply, script
from agentloop.tools.registry import ToolRegistry
from agentloop.workers.devserver import free_port
from tests.helpers.paths import PETSTORE_V2, STORE_API
from tests.helpers.servers.httpbin import serve_httpbin
from tests.helpers.tools import PNG, PNG_B64

PDF = b"%PDF-1.4\n" + bytes(range(256)) * 8


def app() -> Starlette:
    async def seen(request: Request) -> dict[str, Any]:
        """What the API received: method, path, query (repeated keys kept), content type, body."""
        body = await request.body()
        content_type = request.headers.get("content-type", "").split(";")[0]
        received: Any = body.decode(errors="replace")
        if content_type == "application/json":
            received = json.loads(body)
        elif content_type == "application/x-www-form-urlencoded":
            received = dict(await request.form())
        elif content_type == "multipart/form-data":
            form = await request.form()
            received = {k: (await v.read()).decode() if hasattr(v, "read") else v for k, v in form.items()}
        return {"method": request.method, "path": request.url.path, "query": sorted(request.query_params.multi_items()),
                "content_type": content_type, "body": received,
                "headers": {k: v for k, v in request.headers.items() if k in ("x-request-id", "api_key")}}

    async def echo(request: Request) -> Response:
        return JSONResponse(await seen(request))

    async def label(request: Request) -> Response:
        return Response(PNG, media_type="image/png")

    async def invoice(request: Request) -> Response:
        return Response(PDF, media_type="application/pdf")

    return Starlette(routes=[
        Route("/v2/orders/{order_id}/label", label), Route("/v2/orders/{order_id}/invoice", invoice),
        Route("/v2/{rest:path}", echo, methods=["GET", "POST", "PUT", "DELETE"]),
    ])


@pytest.fixture
async def api() -> AsyncIterator[str]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app(), host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.05)
    yield f"http://127.0.0.1:{port}/v2"
    server.should_exit = True
    await task


def results(result: Any) -> list[Any]:
    return [r for m in result.messages for r in m.tool_results]


async def test_swagger_2_operations_send_bodies_forms_files_and_typed_parameters(
        api: str, worker: Any, agent_client: AgentClient, registry: ToolRegistry) -> None:
    names = register_openapi_tools(registry, "petstore", spec=str(PETSTORE_V2), base_url=api)
    pet = {"name": "doggie", "photoUrls": ["http://img/1"], "category": {"id": 1, "name": "dogs"}}
    model = script(calls(
        call("petstore__addPet", {"body": pet}),
        call("petstore__findPetsByStatus", {"status": ["available", "sold"]}),
        call("petstore__updatePetWithForm", {"petId": 7, "name": "Rex", "status": "sold"}),
        call("petstore__uploadFile", {"petId": 7, "additionalMetadata": "front", "file": "PNG-bytes"}),
        call("petstore__getInventory", {"api_key": "k-1"}),
    ), reply("done"))
    spec = AgentSpec(model=model, tools=names, default_permission="allow")
    async with worker():
        result = await agent_client.run(spec, "pets")
    added, found, updated, uploaded, inventory = [json.loads(r.content) for r in results(result)]
    assert added["content_type"] == "application/json" and added["body"] == pet and added["path"] == "/v2/pet"
    assert found["query"] == [["status", "available"], ["status", "sold"]]  # collectionFormat: multi
    assert updated == {**updated, "path": "/v2/pet/7", "content_type": "application/x-www-form-urlencoded",
                       "body": {"name": "Rex", "status": "sold"}}
    assert uploaded["content_type"] == "multipart/form-data"
    assert uploaded["body"] == {"additionalMetadata": "front", "file": "PNG-bytes"}
    assert inventory["headers"] == {"api_key": "k-1"}


async def test_openapi_3_operations_and_binary_responses(
        api: str, worker: Any, agent_client: AgentClient, registry: ToolRegistry) -> None:
    names = register_openapi_tools(registry, "store", spec=str(STORE_API), base_url=api)
    order = {"customerId": 3, "items": [{"sku": "A1", "quantity": 2}],
             "shipTo": {"street": "1 Main St", "city": "Springfield", "zip": "12345"}}
    model = script(calls(
        call("store__createOrder", {"X-Request-Id": "r-1", "body": order}),
        call("store__list_get_orders", {"status": "placed", "tag": ["a", "b"], "limit": 5}),
        call("store__list_get_customers", {}),
        call("store__addNote", {"customerId": 3, "body": {"text": "vip", "pinned": True}}),
        call("store__getLabel", {"orderId": 9}),
        call("store__getInvoice", {"orderId": 9}),
    ), reply("done"))
    spec = AgentSpec(model=model, tools=names, default_permission="allow")
    async with worker():
        result = await agent_client.run(spec, "store")
    created, orders, customers, note, label, invoice = results(result)
    assert json.loads(created.content)["body"] == order and json.loads(created.content)["headers"] == \
        {"x-request-id": "r-1"}
    assert json.loads(orders.content)["query"] == [["limit", "5"], ["status", "placed"], ["tag", "a"], ["tag", "b"]]
    assert json.loads(customers.content)["path"] == "/v2/customers"
    assert json.loads(note.content)["body"] == {"text": "vip", "pinned": "true"}
    # An image the model can see: described, and attached as an image part.
    assert label.content == f"(binary response: image/png, {len(PNG):,} bytes; the image is attached)"
    assert [(i.media_type, i.data) for i in label.images] == [("image/png", PNG_B64)]
    # Other binary content: a short description, not garbled text.
    assert invoice.content == f"(binary response: application/pdf, {len(PDF):,} bytes)" and not invoice.images


@pytest.fixture
def httpbin_url(tmp_path: Path) -> Iterator[str]:
    with serve_httpbin(tmp_path / "httpbin-requests.jsonl") as url:
        yield url


async def test_httpbins_own_document_int_parameters_and_a_form_post_reach_the_real_httpbin(
        httpbin_url: str, tmp_path: Path, worker: Any, agent_client: AgentClient, registry: ToolRegistry,
        caplog: pytest.LogCaptureFixture) -> None:
    """httpbin's Swagger 2.0 document, as flasgger serves it, says ``type:
    int``: the tools take integers, and the calls reach httpbin."""
    spec_file = tmp_path / "httpbin.json"
    spec_file.write_text(httpx.get(httpbin_url + "/spec.json").text)
    with caplog.at_level(logging.WARNING, logger="agentloop.activities.tool_sources.openapi_tools"):
        names = register_openapi_tools(registry, "hb", spec=str(spec_file), base_url=httpbin_url)
    assert not [r for r in caplog.records if "JSON schema" in r.getMessage()]  # int is known: nothing dropped
    redirect = registry.get("hb__post__redirect-to")
    assert redirect is not None
    assert redirect.parameters["properties"]["status_code"] == {"type": "integer"}
    assert redirect.body_kind == "form"
    model = script(calls(
        # A form POST: httpbin answers with the status the form asked for.
        call("hb__post__redirect-to", {"url": "/anything/landed", "status_code": 307}),
        call("hb__get__redirect-to", {"url": "/get", "status_code": 302}),
        call("hb__get__bytes__n_", {"n": 16}),
        call("hb__get__bytes__n_", {"n": "sixteen"}),
    ), reply("done"))
    spec = AgentSpec(model=model, tools=[n for n in names if n.startswith(("hb__post__redirect", "hb__get__"))],
                     default_permission="allow")
    async with worker():
        result = await agent_client.run(spec, "httpbin")
    posted, got, data, wrong = results(result)
    # httpbin answers a redirect (it reads the query, not the form its document declares).
    assert posted.is_error and posted.content.startswith("Error: HTTP 302 FOUND from POST /redirect-to")
    received = [json.loads(line) for line in (tmp_path / "httpbin-requests.jsonl").read_text().splitlines()]
    form = next(r for r in received if r["method"] == "POST")
    assert form == {"method": "POST", "path": "/redirect-to", "content_type": "application/x-www-form-urlencoded",
                    "body": "url=%2Fanything%2Flanded&status_code=307"}
    assert got.is_error and got.content.startswith("Error: HTTP 302 FOUND from GET /redirect-to")
    assert data.content == "(binary response: application/octet-stream, 16 bytes)"
    assert wrong.is_error and "n: 'sixteen' is not of type 'integer'" in wrong.content
    assert [r["path"] for r in received if r["path"] != "/spec.json" and r["path"] != "/get"] == \
        ["/redirect-to", "/redirect-to", "/bytes/16"]  # the wrong call never left the worker
    for r in results(result):
        assert "UnknownType" not in r.content and "validator" not in r.content
