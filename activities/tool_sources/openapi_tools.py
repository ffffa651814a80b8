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

    from agentloop.activities.tool_sources.openapi_tools import register_openapi_tools

    register_openapi_tools(registry, "pets", spec="pets.yaml", base_url="http://localhost:8080",
                           headers={"Authorization": "Bearer ${PETS_TOKEN}"})

or a file named by ``AGENTLOOP_OPENAPI``: ``{pets: {spec: ..., base_url: ..., headers: ...}}``.
"""

from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentloop.activities.tool_sources.mcp_server import expand
from agentloop.activities.tool_sources.openapi_schemas import (
    checkable,
    invalid_arguments_message,
    json_schema,
    load_document,
    log,
    parameter_schema,
    resolve_ref,
    warn_dropped,
)
from agentloop.shared.base.errors import ToolError, UserError
from agentloop.tools.registry import InvalidToolArguments, Tool, ToolRegistry
from agentloop.tools.tool_context import ToolContext

#: The environment variable naming the worker's OpenAPI file (JSON or YAML).
OPENAPI_ENV = "AGENTLOOP_OPENAPI"

#: The methods whose operations become tools.
_METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
#: The fields of a path item that are not operations.
_PATH_ITEM_FIELDS = {"summary", "description", "servers", "parameters", "$ref"}
#: How a Swagger 2.0 array parameter's values are joined (``multi``: the parameter repeated).
_COLLECTION_SEPARATORS = {"csv": ",", "ssv": " ", "tsv": "\t", "pipes": "|"}
#: Largest image of a response the model is shown (as an image part).
MAX_RESPONSE_IMAGE_BYTES = 768 * 1024
_BAD = re.compile(r"[^a-zA-Z0-9_-]")


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


def _is_json(content_type: str) -> bool:
    media = content_type.split(";")[0].strip().lower()
    return media in ("application/json", "*/*", "") or media.endswith("+json")


class OpenApiOperation(Tool):
    """One operation of an API, as a tool: its path, query, header (and
    Swagger 2.0 ``formData``) parameters as arguments; its request body as
    ``body``, sent as JSON, a form or raw text as the operation consumes."""

    #: Built from the operation in ``__init__`` (a plain Tool builds its own lazily).
    _schema: dict[str, Any]

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
                  for p in resolve_ref(list(shared) + list(operation.get("parameters", [])), document)
                  if isinstance(p, dict)}
        self.params = [p for p in params.values() if p.get("in") in ("path", "query", "header", "formData")]
        properties: dict[str, Any] = {}
        required: list[str] = []
        for p in self.params:
            properties[p["name"]] = parameter_schema(p, swagger, self.name)
            if p.get("required") is True or p.get("in") == "path":
                required.append(p["name"])
        #: How the body is sent: "json", "form", "multipart" or "raw" (with :attr:`content_type`), or None.
        self.body_kind: str | None = None
        self.content_type = "application/json"
        consumes = operation.get("consumes") or document.get("consumes") or []
        if swagger:
            body = next((p for p in params.values() if p.get("in") == "body"), None)
            if body is not None:
                properties["body"] = parameter_schema(body, swagger, self.name)
                if body.get("required"):
                    required.append("body")
                self.content_type = next((c for c in consumes if _is_json(c)), consumes[0] if consumes else
                                         "application/json")
                self.body_kind = "json" if _is_json(self.content_type) else "raw"
            elif any(p.get("in") == "formData" for p in self.params):
                files = any(p.get("type") == "file" for p in self.params)
                self.body_kind = "multipart" if files or "multipart/form-data" in consumes else "form"
        else:
            self._request_body(resolve_ref(operation.get("requestBody"), document) or {}, properties, required)
        self._schema = {"type": "object", "properties": properties, "required": required,
                        "additionalProperties": False}
        self.checkable = checkable(self.name, self._schema)

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
        schema = json_schema((content.get(media) or {}).get("schema"), dropped)
        if dropped:
            warn_dropped(self.name, "the request body", dropped)
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

        if not self.checkable:
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
                if str(value) in (".", ".."):  # the URL would drop a segment: another path than the operation's
                    raise InvalidToolArguments(f"{self.name}: path parameter {p['name']!r} cannot be {value!r}: "
                                               f"it would leave the operation's path {self.path}")
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
                raise ToolError(
                    f"{self.method.upper()} {self.base_url + path} failed: {type(exc).__name__}: {exc}"
                ) from exc
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
    from agentloop.activities.builtin_tools.image_tool import image_media_type
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
    for name, (method, path, _op) in zip(names, found, strict=True):
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
    document = load_document(Path(source.spec))
    if not isinstance(document, dict) or not isinstance(document.get("paths"), dict):
        raise UserError(f"the OpenAPI document {source.spec} has no paths")
    base_url = source.base_url or _document_base_url(document)
    if not base_url:
        raise UserError(f"API {api!r}: give base_url (the document {source.spec} names no server)")
    found: list[tuple[str, str, dict[str, Any]]] = []
    shared_params: dict[str, list[dict[str, Any]]] = {}
    skipped: list[str] = []
    for path, item in document["paths"].items():
        item = resolve_ref(item, document) if isinstance(item, dict) else {}
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
    data = load_document(Path(path))
    if not isinstance(data, dict):
        raise UserError(f"the file {path} ({OPENAPI_ENV}) must map API names to {{spec, base_url, headers}}")
    names: list[str] = []
    for api, source in data.items():
        names += register_openapi_tools(registry, api, **source)
    return names
