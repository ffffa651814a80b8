"""OpenAPI operations as tools (docs/tools.md).

One tool per operation of an OpenAPI 3 document (or a Swagger 2.0 one,
converted: parameter types, ``in: body``, ``formData``, ``consumes``), named
``<api>__<operationId>``, with a JSON schema made of the operation's path,
query and header parameters and, as ``body``, its request body (sent as
JSON, a form, or text, as the operation consumes). Operations that share an
operationId are named apart by method and path; operations whose method is
not called (e.g. TRACE) are named in a warning. A call is an HTTP request
made in the ``execute_tool`` activity; a non-2xx answer is an error result
with the status and the body (cut to the output limit); a binary answer is
a short description, and an image the model can see is attached. The document, the base URL and the credentials are the
worker's: ``${VAR}`` in a header is read from its environment at call time::

    from agentloop.activities.openapi_tools import register_openapi_tools

    register_openapi_tools(registry, "pets", spec="pets.yaml", base_url="http://localhost:8080",
                           headers={"Authorization": "Bearer ${PETS_TOKEN}"})

or a file named by ``AGENTLOOP_OPENAPI``: ``{pets: {spec: ..., base_url: ..., headers: ...}}``.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentloop.activities.mcp_tools import expand
from agentloop.shared.base.errors import ToolError, UserError
from agentloop.tools.registry import InvalidToolArguments, Tool, ToolContext, ToolRegistry

#: The environment variable naming the worker's OpenAPI file (JSON or YAML).
OPENAPI_ENV = "AGENTLOOP_OPENAPI"

#: The methods whose operations become tools.
_METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
#: The fields of a path item that are not operations.
_PATH_ITEM_FIELDS = {"summary", "description", "servers", "parameters", "$ref"}
#: A Swagger 2.0 parameter's fields that are JSON schema.
_SWAGGER_SCHEMA_FIELDS = ("type", "format", "items", "enum", "default", "minimum", "maximum", "exclusiveMinimum",
                          "exclusiveMaximum", "minLength", "maxLength", "pattern", "minItems", "maxItems",
                          "uniqueItems", "multipleOf", "nullable", "x-nullable")
#: How a Swagger 2.0 array parameter's values are joined (``multi``: the parameter repeated).
_COLLECTION_SEPARATORS = {"csv": ",", "ssv": " ", "tsv": "\t", "pipes": "|"}
#: Largest image of a response the model is shown (as an image part).
MAX_RESPONSE_IMAGE_BYTES = 768 * 1024
_BAD = re.compile(r"[^a-zA-Z0-9_-]")
log = logging.getLogger(__name__)


class OpenApiSource(BaseModel):
    """An API the worker calls.

    Attributes:
        spec: Path of the OpenAPI 3 (or Swagger 2.0) document (JSON or YAML).
        base_url: Where requests go; the document's first server when None.
        headers: Sent with every request; ``${VAR}`` from the worker's environment.
        timeout_seconds: Most time one request may take.
    """

    model_config = ConfigDict(extra="forbid")

    spec: str
    base_url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_seconds: float = Field(default=60.0, gt=0)


def _load(path: Path) -> Any:
    import yaml

    try:
        text = path.read_text()
    except OSError as exc:
        raise UserError(f"cannot read the OpenAPI document {path}: {exc.strerror}") from None
    try:
        return yaml.safe_load(text) if path.suffix in (".yaml", ".yml") else json.loads(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise UserError(f"the OpenAPI document {path} is not valid: {str(exc).splitlines()[0]}") from None


def _resolve(node: Any, document: dict[str, Any], depth: int = 0) -> Any:
    """``node`` with local ``$ref``s inlined (cycles cut after a few levels)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            if depth > 8:
                return {}
            target: Any = document
            for part in ref[2:].split("/"):
                target = target.get(part.replace("~1", "/").replace("~0", "~"), {}) if isinstance(target, dict) else {}
            return _resolve(target, document, depth + 1)
        return {k: _resolve(v, document, depth) for k, v in node.items()}
    if isinstance(node, list):
        return [_resolve(v, document, depth) for v in node]
    return node


#: Type names found in real documents, as JSON schema names them (``file``: its content, as a string).
_TYPE_ALIASES = {"int": "integer", "long": "integer", "float": "number", "double": "number", "bool": "boolean",
                 "str": "string", "file": "string", "dict": "object", "map": "object", "list": "array"}
_JSON_TYPES = {"string", "number", "integer", "boolean", "array", "object", "null"}
#: A ``format`` given without a ``type``: the type it implies.
_FORMAT_TYPES = {"int32": "integer", "int64": "integer", "float": "number", "double": "number"}


def _normalised_type(node: dict[str, Any], out: dict[str, Any], dropped: list[str]) -> None:
    """``out``'s ``type`` as JSON schema names it: aliases (``int``,
    ``bool``, ``float``, ``file``...) renamed, a type implied by a lone
    ``format``, unknown names left out (and added to ``dropped``)."""
    kind = out.get("type")
    if kind is None and isinstance(out.get("format"), str) and not any(k in out for k in ("oneOf", "anyOf",
                                                                                           "allOf", "$ref")):
        out["type"] = _FORMAT_TYPES.get(out["format"], "string")
        return
    kinds = kind if isinstance(kind, list) else [kind] if kind is not None else []
    known = []
    for name in kinds:
        name = _TYPE_ALIASES.get(name.lower(), name.lower()) if isinstance(name, str) else name
        if name in _JSON_TYPES:
            known.append(name)
        else:
            dropped.append(repr(name))
    if kind is None:
        return
    if not known:
        out.pop("type")
    else:
        out["type"] = known if isinstance(kind, list) else known[0]
    if node.get("type") == "file":
        out.setdefault("description", "The file's content.")


def _json_schema(node: Any, dropped: list[str] | None = None) -> Any:
    """An OpenAPI (3.0, or Swagger 2.0) schema as JSON schema: ``nullable``
    (or ``x-nullable``) as a ``null`` type, boolean ``exclusiveMinimum``/
    ``Maximum`` as numbers, ``type: file`` as a string, ``int``/``bool``/
    ``float`` as JSON schema's names, a type from a lone ``format``,
    ``required: true`` on a property as its object's ``required``,
    annotations the model needs not left out. A type JSON schema does not
    know is left out, and added to ``dropped``."""
    dropped = [] if dropped is None else dropped
    if isinstance(node, list):
        return [_json_schema(v, dropped) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: (_json_schema(v, dropped) if k != "properties" or not isinstance(v, dict) else
               {name: _json_schema(sub, dropped) for name, sub in v.items()})
           for k, v in node.items()
           if not k.startswith("x-") and k not in ("nullable", "discriminator", "xml", "externalDocs", "example",
                                                   "collectionFormat", "readOnly", "writeOnly")}
    for bound, limit in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if isinstance(out.get(bound), bool):
            if out.pop(bound) and limit in out:
                out[bound] = out.pop(limit)
    _normalised_type(node, out, dropped)
    if isinstance(out.get("required"), bool):  # ``required: true`` on a property: its object says it
        out.pop("required")
    if isinstance(out.get("properties"), dict):
        lifted = [name for name, sub in (node.get("properties") or {}).items()
                  if isinstance(sub, dict) and sub.get("required") is True]
        listed = out.get("required") if isinstance(out.get("required"), list) else []
        if lifted:
            out["required"] = listed + [name for name in lifted if name not in listed]
    if (node.get("nullable") is True or node.get("x-nullable") is True) and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def _parameter_schema(parameter: dict[str, Any], swagger: bool, operation: str = "") -> dict[str, Any]:
    """A parameter's JSON schema; a type JSON schema does not know is left
    out, with a warning naming the operation and the parameter."""
    if swagger and parameter.get("in") != "body":
        schema = {k: parameter[k] for k in _SWAGGER_SCHEMA_FIELDS if k in parameter}
    else:
        schema = dict(parameter.get("schema") or {})
    dropped: list[str] = []
    schema = _json_schema(schema, dropped)
    if not schema and not dropped:
        schema = {"type": "string"}
    if dropped:
        _warn_dropped(operation, f"parameter {parameter.get('name', 'body')!r}", dropped)
    if parameter.get("description"):
        schema["description"] = parameter["description"]
    return schema


def _warn_dropped(operation: str, where: str, dropped: list[str]) -> None:
    log.warning("%s: %s has the type %s, which JSON schema does not know; it is left out of the schema the model "
                "sees, and the API checks that value", operation, where, ", ".join(sorted(set(dropped))))


def _checkable(operation: str, schema: dict[str, Any]) -> bool:
    """Whether ``schema`` is one a validator can apply; if not, a warning
    at registration, and the operation's arguments go to the API unchecked."""
    import jsonschema

    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        where = ".".join(str(p) for p in exc.absolute_path) or "(schema)"
        log.warning("%s: its parameters' schema is not valid JSON schema at %s (%s); the model's arguments go to "
                    "the API unchecked", operation, where, exc.message[:200])
        return False
    return True


def _is_json(content_type: str) -> bool:
    media = content_type.split(";")[0].strip().lower()
    return media in ("application/json", "*/*", "") or media.endswith("+json")


class OpenApiOperation(Tool):
    """One operation of an API, as a tool: its path, query, header (and
    Swagger 2.0 ``formData``) parameters as arguments; its request body as
    ``body``, sent as JSON, a form or raw text as the operation consumes."""

    def __init__(self, api: str, source: OpenApiSource, base_url: str, method: str, path: str,
                 operation: dict[str, Any], shared: list[dict[str, Any]], document: dict[str, Any],
                 name: str | None = None) -> None:
        swagger = str(document.get("swagger", "")).startswith("2")
        self.name = name or operation_name(api, method, path, operation)
        self.fn = self._request
        self.description = (operation.get("summary") or operation.get("description") or f"{method.upper()} {path}")
        self.read_only = method in ("get", "head", "options")
        self.isolated = False
        self._context_param = None
        self.source, self.base_url, self.method, self.path = source, base_url.rstrip("/"), method, path
        params = {(p.get("in"), p.get("name")): p
                  for p in _resolve(list(shared) + list(operation.get("parameters", [])), document)
                  if isinstance(p, dict)}
        self.params = [p for p in params.values() if p.get("in") in ("path", "query", "header", "formData")]
        properties: dict[str, Any] = {}
        required: list[str] = []
        for p in self.params:
            properties[p["name"]] = _parameter_schema(p, swagger, self.name)
            if p.get("required") is True or p.get("in") == "path":
                required.append(p["name"])
        #: How the body is sent: "json", "form", "multipart" or "raw" (with :attr:`content_type`), or None.
        self.body_kind: str | None = None
        self.content_type = "application/json"
        consumes = operation.get("consumes") or document.get("consumes") or []
        if swagger:
            body = next((p for p in params.values() if p.get("in") == "body"), None)
            if body is not None:
                properties["body"] = _parameter_schema(body, swagger, self.name)
                if body.get("required"):
                    required.append("body")
                self.content_type = next((c for c in consumes if _is_json(c)), consumes[0] if consumes else
                                         "application/json")
                self.body_kind = "json" if _is_json(self.content_type) else "raw"
            elif any(p.get("in") == "formData" for p in self.params):
                files = any(p.get("type") == "file" for p in self.params)
                self.body_kind = "multipart" if files or "multipart/form-data" in consumes else "form"
        else:
            self._request_body(_resolve(operation.get("requestBody"), document) or {}, properties, required)
        self._schema = {"type": "object", "properties": properties, "required": required,
                        "additionalProperties": False}
        self._checkable = _checkable(self.name, self._schema)

    def _request_body(self, body: dict[str, Any], properties: dict[str, Any], required: list[str]) -> None:
        content = body.get("content") or {}
        if not isinstance(content, dict) or not content:
            return
        media = next((c for c in content if _is_json(c)), None)
        kind = "json"
        if media is None:
            media = next((c for c in content if c in ("application/x-www-form-urlencoded", "multipart/form-data")),
                         next(iter(content)))
            kind = {"application/x-www-form-urlencoded": "form", "multipart/form-data": "multipart"}.get(media, "raw")
        dropped: list[str] = []
        schema = _json_schema((content.get(media) or {}).get("schema"), dropped)
        if dropped:
            _warn_dropped(self.name, "the request body", dropped)
        if schema is None:
            schema = {"type": "string"} if kind == "raw" else {"type": "object"}
        properties["body"] = schema
        if body.get("required"):
            required.append("body")
        self.body_kind, self.content_type = kind, media

    @property
    def parameters(self) -> dict[str, Any]:
        return json.loads(json.dumps(self._schema))

    def validate(self, arguments: dict[str, Any]) -> Any:
        """Check the model's arguments against the operation's schema.

        Raises:
            InvalidToolArguments: Naming each failing field and what it
                expects, with a short excerpt of its schema (never the
                whole schema, which can be huge).
        """
        import jsonschema

        if not self._checkable:
            return arguments
        try:
            errors = sorted(jsonschema.Draft202012Validator(self._schema).iter_errors(arguments),
                            key=lambda e: [str(p) for p in e.absolute_path])
        except (jsonschema.exceptions.UnknownType, jsonschema.exceptions.SchemaError,
                jsonschema.exceptions.UndefinedTypeCheck) as exc:  # the document's fault, not the model's
            log.warning("%s: its schema cannot check arguments (%s: %s); the API checks them",
                        self.name, type(exc).__name__, str(exc).splitlines()[0][:200])
            return arguments
        if errors:
            raise InvalidToolArguments(invalid_arguments_message(self.name, errors))
        return arguments

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        self.validate(arguments)
        return await self._request(arguments, ctx)

    def _encoded(self, p: dict[str, Any], value: Any) -> Any:
        """A parameter's value as it goes in the URL, a header or a form: an
        array as the parameter's style (OpenAPI 3) or ``collectionFormat``
        (Swagger 2.0) says, a list where the parameter is repeated."""
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, dict):
            return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        if not isinstance(value, list):
            return value
        items = [self._encoded({}, v) for v in value]
        if "schema" in p:  # OpenAPI 3: style and explode
            if p.get("in") == "query" and p.get("explode", p.get("style", "form") == "form"):
                return items
            separator = {"spaceDelimited": " ", "pipeDelimited": "|"}.get(p.get("style", ""), ",")
        else:
            style = p.get("collectionFormat", "csv")
            if style == "multi":
                return items
            separator = _COLLECTION_SEPARATORS.get(style, ",")
        return separator.join(str(v) for v in items)

    def _body(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The request's body, as ``httpx2.AsyncClient.request`` keywords."""
        if self.body_kind in ("form", "multipart") and "body" not in self._schema["properties"]:
            fields = {p["name"]: arguments[p["name"]] for p in self.params
                      if p["in"] == "formData" and p["name"] in arguments}
        elif "body" in arguments and self.body_kind is not None:
            fields = arguments["body"]
        else:
            return {}
        if self.body_kind == "json":
            return {"json": fields}
        if self.body_kind == "raw":
            text = fields if isinstance(fields, str) else json.dumps(fields, ensure_ascii=False)
            return {"content": text.encode(), "headers": {"Content-Type": self.content_type}}
        if not isinstance(fields, dict):
            fields = {"value": fields}
        declared = {p["name"]: p for p in self.params if p["in"] == "formData"}
        encoded = {k: self._encoded(declared.get(k, {}), v) for k, v in fields.items()}
        if self.body_kind == "form":
            return {"data": encoded}
        files = {name for name, p in declared.items() if p.get("type") == "file"}
        parts: list[tuple[str, Any]] = []
        for key, value in encoded.items():
            for one in value if isinstance(value, list) else [value]:
                parts.append((key, (key, str(one).encode()) if key in files else (None, str(one).encode())))
        return {"files": parts}

    async def _request(self, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        import httpx2

        path, query, headers = self.path, {}, {k: expand(v) for k, v in self.source.headers.items()}
        for p in self.params:
            if p["name"] not in arguments:
                continue
            value = self._encoded(p, arguments[p["name"]])
            if p["in"] == "path":
                path = path.replace("{" + p["name"] + "}", _quote(str(value)))
            elif p["in"] == "query":
                query[p["name"]] = value
            elif p["in"] == "header":
                headers[p["name"]] = str(value)
        if ctx.idempotency_key:
            headers.setdefault("Idempotency-Key", ctx.idempotency_key)
        body = self._body(arguments)
        headers.update(body.pop("headers", {}))
        async with httpx2.AsyncClient(timeout=self.source.timeout_seconds) as http:
            try:
                response = await http.request(self.method.upper(), self.base_url + path, params=query,
                                              headers=headers, **body)
            except httpx2.TransportError as exc:
                raise ToolError(f"{self.method.upper()} {self.base_url + path} failed: {type(exc).__name__}: {exc}")
        if not 200 <= response.status_code < 300:
            raise ToolError(f"HTTP {response.status_code} {response.reason_phrase} from {self.method.upper()} "
                            f"{path}: {_response_text(response)}")
        return _response_value(response)


def _is_text(content_type: str) -> bool:
    media = content_type.split(";")[0].strip().lower()
    return (media.startswith("text/") or _is_json(media) or media.endswith(("+xml", "/xml", "+yaml", "/yaml"))
            or media in ("application/javascript", "application/x-www-form-urlencoded", "application/graphql",
                         "application/x-ndjson", "application/problem+json"))


def _response_text(response: Any) -> str:
    content_type = response.headers.get("content-type", "")
    if not response.content or _is_text(content_type):
        return str(response.text)
    return _binary_description(content_type, len(response.content))


def _binary_description(content_type: str, size: int, shown: bool = False) -> str:
    media = content_type.split(";")[0].strip() or "no content type"
    return f"(binary response: {media}, {size:,} bytes{'; the image is attached' if shown else ''})"


def _response_value(response: Any) -> Any:
    """What the model gets of a 2xx answer: its text; for a binary body a
    short description (content type, size), and the image itself when it is
    one the model can see (PNG, JPEG, GIF, WebP, up to 768 KB)."""
    from agentloop.activities.image_tool import image_media_type
    from agentloop.shared.base.messages import ImagePart

    content_type = response.headers.get("content-type", "")
    data = response.content
    if not data or _is_text(content_type):
        return response.text
    media = image_media_type(data[:16])
    if media is not None and len(data) <= MAX_RESPONSE_IMAGE_BYTES:
        return [_binary_description(content_type, len(data), shown=True),
                ImagePart(media_type=media, data=base64.b64encode(data).decode())]
    return _binary_description(content_type, len(data))


def _excerpt(schema: Any, depth: int = 0) -> str:
    """A schema in a few words: its type, enum, format, and for an object
    its properties' types (required marked), for an array its items'."""
    if not isinstance(schema, dict):
        return json.dumps(schema)
    for combo in ("oneOf", "anyOf", "allOf"):
        if isinstance(schema.get(combo), list):
            joined = " | " if combo != "allOf" else " & "
            return "(" + joined.join(_excerpt(s, depth + 1) for s in schema[combo][:4]) + \
                (" | ..." if len(schema[combo]) > 4 else "") + ")"
    kind = schema.get("type", "object" if "properties" in schema else "any")
    text = "|".join(kind) if isinstance(kind, list) else str(kind)
    if "enum" in schema:
        values = schema["enum"]
        text += " one of " + json.dumps(values[:12], ensure_ascii=False) + (" ..." if len(values) > 12 else "")
    if "format" in schema:
        text += f" ({schema['format']})"
    if kind == "array" and "items" in schema and depth < 2:
        text += " of " + _excerpt(schema["items"], depth + 1)
    properties = schema.get("properties")
    if isinstance(properties, dict) and properties and depth < 2:
        required = set(schema.get("required") or [])
        shown = [f"{name}{'*' if name in required else ''}: {_excerpt(sub, depth + 1)}"
                 for name, sub in list(properties.items())[:15]]
        more = f", ... {len(properties) - 15} more" if len(properties) > 15 else ""
        text += " {" + ", ".join(shown) + more + "}"
    return text


def invalid_arguments_message(tool: str, errors: list[Any], limit: int = 4000) -> str:
    """The failing fields of a call, each with what it expects (a compact
    excerpt of its schema; ``*`` marks a required property)."""
    lines: list[str] = []
    for error in errors[:10]:
        where = ".".join(map(str, error.absolute_path)) or "(arguments)"
        expected = _excerpt(error.schema)
        if len(expected) > 400:
            expected = expected[:400] + " ..."
        lines.append(f"{where}: {error.message[:300]} (expected: {expected})")
    if len(errors) > 10:
        lines.append(f"... and {len(errors) - 10} more problems")
    text = f"Invalid arguments for tool '{tool}': " + "; ".join(lines) + \
        ". Fix these fields and call it again (* marks a required property)."
    return text if len(text) <= limit else text[:limit] + " ..."


def _quote(value: str) -> str:
    from urllib.parse import quote

    return quote(value, safe="")


def operation_name(api: str, method: str, path: str, operation: dict[str, Any]) -> str:
    """The tool's name: ``<api>__<operationId>`` (``<api>__<method>_<path>``
    without one), other characters as ``_``, at most 64."""
    op_id = operation.get("operationId") or f"{method}_{path}"
    return (api + "__" + _BAD.sub("_", str(op_id)))[:64]


def _disambiguated(api: str, found: list[tuple[str, str, dict[str, Any]]]) -> tuple[list[str], list[str]]:
    """Each operation's tool name, and the names several operations shared:
    those are renamed ``<api>__<operationId>_<method>_<path>`` (cut to 64
    characters, a short hash of method and path added if still shared)."""
    import hashlib
    from collections import Counter

    names = [operation_name(api, method, path, op) for method, path, op in found]
    counts = Counter(names)
    shared = sorted(n for n, c in counts.items() if c > 1)
    if not shared:
        return names, []
    renamed = []
    for name, (method, path, op) in zip(names, found, strict=True):
        if counts[name] > 1:
            name = (name + "_" + _BAD.sub("_", f"{method}_{path.strip('/')}"))[:64]
        renamed.append(name)
    recount = Counter(renamed)
    for i, (name, (method, path, _)) in enumerate(zip(renamed, found, strict=True)):
        if recount[name] > 1:
            digest = hashlib.sha256(f"{method} {path}".encode()).hexdigest()[:8]
            renamed[i] = name[:55] + "_" + digest
    return renamed, shared


def openapi_tools(api: str, source: OpenApiSource | dict[str, Any]) -> list[OpenApiOperation]:
    """The operations of ``source`` (OpenAPI 3, or Swagger 2.0) as tools
    named ``<api>__<operationId>``. Says at start, in one warning each,
    which operationIds several operations shared (and how they were named
    apart), and which operations have a method that is not called.

    Raises:
        UserError: The document cannot be read, or no base URL is known.
    """
    source = source if isinstance(source, OpenApiSource) else OpenApiSource.model_validate(source)
    document = _load(Path(source.spec))
    if not isinstance(document, dict) or not isinstance(document.get("paths"), dict):
        raise UserError(f"the OpenAPI document {source.spec} has no paths")
    base_url = source.base_url or _document_base_url(document)
    if not base_url:
        raise UserError(f"API {api!r}: give base_url (the document {source.spec} names no server)")
    found: list[tuple[str, str, dict[str, Any]]] = []
    shared_params: dict[str, list[dict[str, Any]]] = {}
    skipped: list[str] = []
    for path, item in document["paths"].items():
        item = _resolve(item, document) if isinstance(item, dict) else {}
        shared_params[path] = item.get("parameters", [])
        for key, value in item.items():
            if key in _METHODS and isinstance(value, dict):
                found.append((key, path, value))
            elif key not in _PATH_ITEM_FIELDS and not key.startswith("x-"):
                skipped.append(f"{key.upper()} {path}")
    names, shared = _disambiguated(api, found)
    if shared:
        log.warning("API %r: %d operationIds name more than one operation (%s); each of those operations is named "
                    "<api>__<operationId>_<method>_<path> instead, e.g. %s", api, len(shared), ", ".join(shared),
                    next(n for n, base in zip(names, (operation_name(api, m, p, o) for m, p, o in found), strict=True)
                         if base in shared))
    if skipped:
        log.warning("API %r: %d operations are left out, as agentloop does not call their methods: %s", api,
                    len(skipped), ", ".join(skipped))
    return [OpenApiOperation(api, source, expand(base_url), method, path, operation, shared_params[path], document,
                             name=name) for name, (method, path, operation) in zip(names, found, strict=True)]


def _document_base_url(document: dict[str, Any]) -> str | None:
    """The first server of an OpenAPI 3 document; ``schemes``, ``host`` and
    ``basePath`` of a Swagger 2.0 one."""
    if str(document.get("swagger", "")).startswith("2"):
        if not document.get("host"):
            return None
        scheme = (document.get("schemes") or ["https"])[0]
        return f"{scheme}://{document['host']}{document.get('basePath', '')}"
    return next((s.get("url") for s in document.get("servers", []) if isinstance(s, dict) and s.get("url")), None)


def register_openapi_tools(registry: ToolRegistry, api: str, **source: Any) -> list[str]:
    """Register every operation of an API in ``registry``; their names."""
    tools = openapi_tools(api, OpenApiSource(**source))
    for tool in tools:
        registry.register(tool, replace=True)
    return [t.name for t in tools]


def register_openapi_from_env(registry: ToolRegistry, environ: dict[str, str] | None = None) -> list[str]:
    """Register the APIs of the file ``AGENTLOOP_OPENAPI`` names (none when unset)."""
    path = (os.environ if environ is None else environ).get(OPENAPI_ENV)
    if not path:
        return []
    data = _load(Path(path))
    if not isinstance(data, dict):
        raise UserError(f"the file {path} ({OPENAPI_ENV}) must map API names to {{spec, base_url, headers}}")
    names: list[str] = []
    for api, source in data.items():
        names += register_openapi_tools(registry, api, **source)
    return names
