"""OpenAPI operations as tools (docs/tools.md).

One tool per operation of an OpenAPI 3 document, named
``<api>__<operationId>``, with a JSON schema made of the operation's path,
query and header parameters and, as ``body``, its JSON request body. A
call is an HTTP request made in the ``execute_tool`` activity; a non-2xx
answer is an error result with the status and the body (cut to the
output limit). The document, the base URL and the credentials are the
worker's: ``${VAR}`` in a header is read from its environment at call time::

    from agentloop.activities.openapi_tools import register_openapi_tools

    register_openapi_tools(registry, "pets", spec="pets.yaml", base_url="http://localhost:8080",
                           headers={"Authorization": "Bearer ${PETS_TOKEN}"})

or a file named by ``AGENTLOOP_OPENAPI``: ``{pets: {spec: ..., base_url: ..., headers: ...}}``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentloop.activities.mcp_tools import expand
from agentloop.shared.errors import ToolError, UserError
from agentloop.tools.registry import InvalidToolArguments, Tool, ToolContext, ToolRegistry

#: The environment variable naming the worker's OpenAPI file (JSON or YAML).
OPENAPI_ENV = "AGENTLOOP_OPENAPI"

_METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
_BAD = re.compile(r"[^a-zA-Z0-9_-]")


class OpenApiSource(BaseModel):
    """An API the worker calls.

    Attributes:
        spec: Path of the OpenAPI 3 document (JSON or YAML).
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


class OpenApiOperation(Tool):
    """One operation of an API, as a tool."""

    def __init__(self, api: str, source: OpenApiSource, base_url: str, method: str, path: str,
                 operation: dict[str, Any], shared: list[dict[str, Any]], document: dict[str, Any]) -> None:
        op_id = operation.get("operationId") or f"{method}_{path}"
        self.name = (api + "__" + _BAD.sub("_", op_id))[:64]
        self.fn = self._request
        self.description = (operation.get("summary") or operation.get("description") or f"{method.upper()} {path}")
        self.read_only = method in ("get", "head", "options")
        self.isolated = False
        self._context_param = None
        self.source, self.base_url, self.method, self.path = source, base_url.rstrip("/"), method, path
        params = {(p.get("in"), p.get("name")): p for p in _resolve(shared + operation.get("parameters", []), document)}
        self.params = [p for p in params.values() if p.get("in") in ("path", "query", "header")]
        properties: dict[str, Any] = {}
        required: list[str] = []
        for p in self.params:
            schema = dict(p.get("schema") or {"type": "string"})
            if p.get("description"):
                schema["description"] = p["description"]
            properties[p["name"]] = schema
            if p.get("required") or p.get("in") == "path":
                required.append(p["name"])
        body = _resolve(operation.get("requestBody"), document) or {}
        body_schema = (body.get("content", {}).get("application/json") or {}).get("schema")
        if body_schema is not None:
            properties["body"] = body_schema
            if body.get("required"):
                required.append("body")
        self._schema = {"type": "object", "properties": properties, "required": required,
                        "additionalProperties": False}

    @property
    def parameters(self) -> dict[str, Any]:
        return json.loads(json.dumps(self._schema))

    def validate(self, arguments: dict[str, Any]) -> Any:
        import jsonschema

        problems = [f"{'.'.join(map(str, e.absolute_path)) or '(arguments)'}: {e.message}"
                    for e in jsonschema.Draft202012Validator(self._schema).iter_errors(arguments)]
        if problems:
            raise InvalidToolArguments(f"Invalid arguments for tool '{self.name}': " + "; ".join(problems)
                                       + f". Expected arguments matching this JSON schema: "
                                       f"{json.dumps(self._schema, separators=(',', ':'))}")
        return arguments

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        self.validate(arguments)
        return await self._request(arguments, ctx)

    async def _request(self, arguments: dict[str, Any], ctx: ToolContext) -> str:
        import httpx2

        path, query, headers = self.path, {}, {k: expand(v) for k, v in self.source.headers.items()}
        for p in self.params:
            if p["name"] not in arguments:
                continue
            value = arguments[p["name"]]
            if p["in"] == "path":
                path = path.replace("{" + p["name"] + "}", _quote(str(value)))
            elif p["in"] == "query":
                query[p["name"]] = value if not isinstance(value, bool) else str(value).lower()
            else:
                headers[p["name"]] = str(value)
        if ctx.idempotency_key:
            headers.setdefault("Idempotency-Key", ctx.idempotency_key)
        async with httpx2.AsyncClient(timeout=self.source.timeout_seconds) as http:
            try:
                response = await http.request(self.method.upper(), self.base_url + path, params=query,
                                              headers=headers, json=arguments.get("body") if "body" in
                                              self._schema["properties"] else None)
            except httpx2.TransportError as exc:
                raise ToolError(f"{self.method.upper()} {self.base_url + path} failed: {type(exc).__name__}: {exc}")
        if not 200 <= response.status_code < 300:
            raise ToolError(f"HTTP {response.status_code} {response.reason_phrase} from {self.method.upper()} "
                            f"{path}: {response.text}")
        return response.text


def _quote(value: str) -> str:
    from urllib.parse import quote

    return quote(value, safe="")


def openapi_tools(api: str, source: OpenApiSource | dict[str, Any]) -> list[OpenApiOperation]:
    """The operations of ``source`` as tools named ``<api>__<operationId>``.

    Raises:
        UserError: The document cannot be read, or no base URL is known.
    """
    source = source if isinstance(source, OpenApiSource) else OpenApiSource.model_validate(source)
    document = _load(Path(source.spec))
    if not isinstance(document, dict) or not isinstance(document.get("paths"), dict):
        raise UserError(f"the OpenAPI document {source.spec} has no paths")
    base_url = source.base_url or next((s.get("url") for s in document.get("servers", []) if s.get("url")), None)
    if not base_url:
        raise UserError(f"API {api!r}: give base_url (the document {source.spec} names no server)")
    tools = []
    for path, item in document["paths"].items():
        for method in _METHODS:
            if isinstance(item, dict) and isinstance(item.get(method), dict):
                tools.append(OpenApiOperation(api, source, expand(base_url), method, path, item[method],
                                              item.get("parameters", []), document))
    return tools


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
