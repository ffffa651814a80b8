"""OpenAPI documents as they are found: a Swagger 2.0 document converted,
operationIds shared by several operations, methods that are not called,
invalid arguments named compactly, and cut outputs whose note fits the tool
(the calls themselves: tests/server/test_openapi_documents.py)."""

from __future__ import annotations

import copy
import logging
from pathlib import Path

import pytest
import yaml

from agentloop.activities.openapi_tools import openapi_tools
from agentloop.shared.messages import cut_hint, truncate_output
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
    with caplog.at_level(logging.WARNING, logger="agentloop.activities.openapi_tools"):
        names = [t.name for t in openapi_tools("store", {"spec": str(STORE_API)})]
    # Every operation is a tool (TRACE aside): none dropped, the names deterministic.
    assert names == ["store__list_get_orders", "store__createOrder", "store__getOrder", "store__getLabel",
                     "store__getInvoice", "store__list_get_customers", "store__addNote"]
    shared = [r.getMessage() for r in caplog.records if "more than one operation" in r.getMessage()]
    assert shared == ["API 'store': 1 operationIds name more than one operation (store__list); each of those "
                      "operations is named <api>__<operationId>_<method>_<path> instead, e.g. "
                      "store__list_get_orders"]


def test_methods_not_called_are_named_in_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="agentloop.activities.openapi_tools"):
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
    assert "narrow the command" in truncate_output(text, 1000, cut_hint("shell_command"))[0]
    for tool in ("store__createOrder", "notes__add", "read_file"):
        cut, truncated = truncate_output(text, 1000, cut_hint(tool))
        assert truncated and "command" not in cut, tool
