"""OpenAPI documents as they are found: a Swagger 2.0 document converted,
operationIds shared by several operations, methods that are not called,
invalid arguments named compactly, and cut outputs whose note fits the tool
(the calls themselves: tests/server/tools/test_openapi_documents.py)."""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path

import pytest
import yaml

from agentloop.activities.tool_sources.openapi_tools import openapi_tools
from agentloop.shared.base.messages import cut_hint
from agentloop.shared.base.text import cut_marked
from agentloop.tools.registry import InvalidToolArguments
from tests.helpers.paths import PETSTORE_V2, STORE_API


def test_swagger_2_is_converted_with_types_body_and_form_data() -> None:
    tools = {t.name: t for t in openapi_tools("petstore", {"spec": str(PETSTORE_V2)})}
    assert sorted(tools) == ["petstore__addPet", "petstore__findPetsByStatus", "petstore__getInventory",
                             "petstore__getPetById", "petstore__updatePetWithForm", "petstore__uploadFile"]
    by_id = tools["petstore__getPetById"].parameters
    assert by_id["properties"]["petId"] == {"type": "integer", "format": "int64"} and by_id["required"] == ["petId"]
    status = tools["petstore__findPetsByStatus"].parameters["properties"]["status"]
    assert status == {"type": "array", "items": {"type": "string", "enum": ["available", "pending", "sold"]}}
    # in: body is the body, its $ref into definitions inlined; JSON, as consumes says first.
    add = tools["petstore__addPet"]
    body = add.parameters["properties"]["body"]
    assert add.parameters["required"] == ["body"] and body["required"] == ["name", "photoUrls"]
    assert body["properties"]["category"]["properties"]["id"] == {"type": "integer", "format": "int64"}
    assert (add.body_kind, add.content_type) == ("json", "application/json")
    # formData: arguments of their own, sent as a form or (with a file) multipart.
    form = tools["petstore__updatePetWithForm"]
    assert set(form.parameters["properties"]) == {"petId", "name", "status"} and form.body_kind == "form"
    upload = tools["petstore__uploadFile"]
    assert upload.parameters["properties"]["file"]["type"] == "string" and upload.body_kind == "multipart"
    assert tools["petstore__getInventory"].parameters["properties"]["api_key"] == {"type": "string"}
    # The base URL from schemes, host and basePath.
    assert by_id.get("additionalProperties") is False and tools["petstore__getPetById"].base_url == \
        "http://localhost:1/v2"
    with pytest.raises(InvalidToolArguments, match="petId: 'seven' is not of type 'integer'"):
        tools["petstore__getPetById"].validate({"petId": "seven"})


def test_openapi_3_refs_bodies_and_parameters() -> None:
    tools = {t.name: t for t in openapi_tools("store", {"spec": str(STORE_API)})}
    create = tools["store__createOrder"].parameters
    assert set(create["properties"]) == {"X-Request-Id", "body"} and create["required"] == ["body"]
    order = create["properties"]["body"]
    assert order["properties"]["shipTo"]["required"] == ["street", "city", "zip"]  # $ref inlined
    assert order["properties"]["items"]["items"]["properties"]["quantity"] == {"type": "integer", "minimum": 1}
    assert order["properties"]["note"] == {"type": ["string", "null"]}  # nullable
    assert order["properties"]["priority"] == {"type": "integer", "minimum": 0, "exclusiveMaximum": 5}
    listed = tools["store__list_get_orders"].parameters["properties"]
    assert listed["limit"]["maximum"] == 100 and listed["status"]["enum"] == ["placed", "approved", "delivered"]
    assert tools["store__getLabel"].parameters["required"] == ["orderId"]  # the path item's $ref'd parameter
    note = tools["store__addNote"]
    assert note.body_kind == "form" and note.parameters["properties"]["body"]["required"] == ["text"]


def test_shared_operation_ids_are_named_apart_and_said_in_one_line(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="agentloop.activities.tool_sources.openapi_tools"):
        names = [t.name for t in openapi_tools("store", {"spec": str(STORE_API)})]
    # Every operation is a tool (TRACE aside): none dropped, the names deterministic.
    assert names == ["store__list_get_orders", "store__createOrder", "store__getOrder", "store__getLabel",
                     "store__getInvoice", "store__list_get_customers", "store__addNote"]
    shared = [r.getMessage() for r in caplog.records if "more than one operation" in r.getMessage()]
    assert shared == ["API 'store': 1 operationIds name more than one operation (store__list); each of those "
                      "operations is named <api>__<operationId>_<method>_<path> instead, e.g. "
                      "store__list_get_orders"]


def test_methods_not_called_are_named_in_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="agentloop.activities.tool_sources.openapi_tools"):
        openapi_tools("store", {"spec": str(STORE_API)})
    assert "API 'store': 1 operations are left out, as agentloop does not call their methods: TRACE /orders" in \
        [r.getMessage() for r in caplog.records]


def test_invalid_arguments_name_the_fields_with_a_compact_schema_excerpt(tmp_path: Path) -> None:
    # A large schema, as real APIs have: 400 optional properties on the order.
    document = yaml.safe_load(STORE_API.read_text())
    big = copy.deepcopy(document)
    extra = {f"field_{i}": {"type": "string", "description": "x" * 200} for i in range(400)}
    big["components"]["schemas"]["NewOrder"]["properties"].update(extra)
    spec = tmp_path / "big.yaml"
    spec.write_text(yaml.safe_dump(big))
    (create,) = [t for t in openapi_tools("store", {"spec": str(spec)}) if t.name == "store__createOrder"]
    assert len(str(create.parameters)) > 90_000
    with pytest.raises(InvalidToolArguments) as invalid:
        create.validate({"body": {"customerId": "c-9", "items": [{"sku": "A1", "quantity": 0}],
                                  "shipTo": {"street": "1 Main St", "city": "Springfield", "zip": "ABC"}}})
    message = str(invalid.value)
    assert message.startswith("Invalid arguments for tool 'store__createOrder': ")
    assert "body.customerId: 'c-9' is not of type 'integer' (expected: integer (int64))" in message
    assert "body.items.0.quantity: 0 is less than the minimum of 1 (expected: integer)" in message
    assert "body.shipTo.zip: 'ABC' does not match '^[0-9]{5}$' (expected: string)" in message
    assert len(message) < 2000 and "field_399" not in message


def test_a_missing_required_property_is_shown_with_its_object() -> None:
    (create,) = [t for t in openapi_tools("store", {"spec": str(STORE_API)}) if t.name == "store__createOrder"]
    with pytest.raises(InvalidToolArguments) as invalid:
        create.validate({"body": {"customerId": 1, "items": [{"sku": "A1", "quantity": 1}]}})
    assert ("body: 'shipTo' is a required property (expected: object {customerId*: integer (int64), items*: array "
            "of object, shipTo*: object {street*: string, city*: string, zip*: string}, note: string|null, "
            "priority: integer})") in str(invalid.value)


def test_a_cut_output_mentions_shell_commands_only_for_the_shell() -> None:
    text = "y" * 50_000
    assert "narrow the command" in cut_marked(text, 1000, hint=cut_hint("shell_command"), tail=True)[0]
    for tool in ("store__createOrder", "notes__add", "read_file"):
        cut, truncated = cut_marked(text, 1000, hint=cut_hint(tool), tail=True)
        assert truncated and "command" not in cut, tool


QUIRKS_V2 = {
    "swagger": "2.0", "host": "localhost:1", "basePath": "/", "schemes": ["http"],
    "paths": {"/things/{n}": {"post": {
        "operationId": "addThing", "consumes": ["application/x-www-form-urlencoded"],
        "parameters": [
            {"in": "path", "name": "n", "type": "int"},
            {"in": "query", "name": "ratio", "type": "float"},
            {"in": "query", "name": "dry", "type": "bool"},
            {"in": "query", "name": "when", "format": "date-time"},
            {"in": "query", "name": "size", "format": "int64"},
            {"in": "query", "name": "shape", "type": "polygon"},
            {"in": "query", "name": "note", "type": "string", "nullable": True},
            {"in": "formData", "name": "count", "type": "int"},
        ]}}},
}
QUIRKS_V3 = {
    "openapi": "3.0.3", "servers": [{"url": "http://localhost:1"}],
    "paths": {"/upload": {"post": {
        "operationId": "upload",
        "requestBody": {"content": {"application/json": {"schema": {
            "type": "object", "required": ["name"],
            "properties": {"name": {"type": "string"}, "data": {"type": "file"},
                           "tags": {"type": "list", "items": {"type": "str"}},
                           "owner": {"type": "string", "required": True},
                           "blob": {"type": "bytes"}}}}}}}}},
}


def test_real_world_type_quirks_are_normalised_and_unknown_types_named_at_registration(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "v2.json").write_text(json.dumps(QUIRKS_V2))
    (tmp_path / "v3.yaml").write_text(yaml.safe_dump(QUIRKS_V3))
    with caplog.at_level(logging.WARNING, logger="agentloop.activities.tool_sources.openapi_tools"):
        [thing] = openapi_tools("q", {"spec": str(tmp_path / "v2.json")})
        [upload] = openapi_tools("q", {"spec": str(tmp_path / "v3.yaml")})
    props = thing.parameters["properties"]
    assert props["n"] == {"type": "integer"} and props["ratio"] == {"type": "number"}
    assert props["dry"] == {"type": "boolean"} and props["count"] == {"type": "integer"}
    assert props["when"] == {"type": "string", "format": "date-time"}  # format without type
    assert props["size"] == {"type": "integer", "format": "int64"}
    assert props["note"] == {"type": ["string", "null"]}  # nullable on Swagger 2.0
    assert props["shape"] == {}  # unknown type: left out, the API judges
    body = upload.parameters["properties"]["body"]
    assert body["properties"]["data"]["type"] == "string" and body["properties"]["tags"] == \
        {"type": "array", "items": {"type": "string"}}
    assert body["required"] == ["name", "owner"] and "required" not in body["properties"]["owner"]
    assert body["properties"]["blob"] == {}
    warnings = [r.getMessage() for r in caplog.records]
    assert any("q__addThing: parameter 'shape' has the type 'polygon'" in w for w in warnings), warnings
    assert any("q__upload: the request body has the type 'bytes'" in w for w in warnings), warnings
    # Arguments are checked against the normalised schema; a wrong type is the model's to fix.
    thing.validate({"n": 3, "ratio": 0.5, "dry": True, "shape": "square", "count": 2})
    with pytest.raises(InvalidToolArguments, match="n: 'three' is not of type 'integer'"):
        thing.validate({"n": "three"})


def test_a_schema_no_validator_can_apply_is_named_at_registration_and_not_applied(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    document = copy.deepcopy(QUIRKS_V3)
    document["paths"]["/upload"]["post"]["requestBody"]["content"]["application/json"]["schema"] = \
        {"type": "object", "minProperties": "two"}
    (tmp_path / "bad.json").write_text(json.dumps(document))
    with caplog.at_level(logging.WARNING, logger="agentloop.activities.tool_sources.openapi_tools"):
        [upload] = openapi_tools("q", {"spec": str(tmp_path / "bad.json")})
    assert any("q__upload: its parameters' schema is not valid JSON schema at properties.body.minProperties" in
               r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]
    assert upload.validate({"body": {"a": 1}}) == {"body": {"a": 1}}
