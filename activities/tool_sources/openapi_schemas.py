"""An OpenAPI document's schemas as JSON Schema: loading the document, resolving
``$ref``, Swagger 2.0 types normalised, what cannot be said left out with a warning, and
the sentence that tells the model which arguments did not fit.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from agentloop.shared.base.errors import UserError

# The OpenAPI tool source's one logger, for the warnings of both its modules.
log = logging.getLogger("agentloop.activities.tool_sources.openapi_tools")


#: A Swagger 2.0 parameter's fields that are JSON schema.
_SWAGGER_SCHEMA_FIELDS = ("type", "format", "items", "enum", "default", "minimum", "maximum", "exclusiveMinimum",
                          "exclusiveMaximum", "minLength", "maxLength", "pattern", "minItems", "maxItems",
                          "uniqueItems", "multipleOf", "nullable", "x-nullable")


def load_document(path: Path) -> Any:
    import yaml

    try:
        text = path.read_text()
    except OSError as exc:
        raise UserError(f"cannot read the OpenAPI document {path}: {exc.strerror}") from None
    try:
        return yaml.safe_load(text) if path.suffix in (".yaml", ".yml") else json.loads(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise UserError(f"the OpenAPI document {path} is not valid: {str(exc).splitlines()[0]}") from None


def resolve_ref(node: Any, document: dict[str, Any], depth: int = 0) -> Any:
    """``node`` with local ``$ref``s inlined (cycles cut after a few levels)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            if depth > 8:
                return {}
            target: Any = document
            for part in ref[2:].split("/"):
                target = target.get(part.replace("~1", "/").replace("~0", "~"), {}) if isinstance(target, dict) else {}
            return resolve_ref(target, document, depth + 1)
        return {k: resolve_ref(v, document, depth) for k, v in node.items()}
    if isinstance(node, list):
        return [resolve_ref(v, document, depth) for v in node]
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


def json_schema(node: Any, dropped: list[str] | None = None) -> Any:
    """An OpenAPI (3.0, or Swagger 2.0) schema as JSON schema: ``nullable``
    (or ``x-nullable``) as a ``null`` type, boolean ``exclusiveMinimum``/
    ``Maximum`` as numbers, ``type: file`` as a string, ``int``/``bool``/
    ``float`` as JSON schema's names, a type from a lone ``format``,
    ``required: true`` on a property as its object's ``required``,
    annotations the model needs not left out. A type JSON schema does not
    know is left out, and added to ``dropped``."""
    dropped = [] if dropped is None else dropped
    if isinstance(node, list):
        return [json_schema(v, dropped) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: (json_schema(v, dropped) if k != "properties" or not isinstance(v, dict) else
               {name: json_schema(sub, dropped) for name, sub in v.items()})
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
        required = out.get("required")
        listed: list[Any] = required if isinstance(required, list) else []
        if lifted:
            out["required"] = listed + [name for name in lifted if name not in listed]
    if (node.get("nullable") is True or node.get("x-nullable") is True) and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def parameter_schema(parameter: dict[str, Any], swagger: bool, operation: str = "") -> dict[str, Any]:
    """A parameter's JSON schema; a type JSON schema does not know is left
    out, with a warning naming the operation and the parameter."""
    if swagger and parameter.get("in") != "body":
        schema = {k: parameter[k] for k in _SWAGGER_SCHEMA_FIELDS if k in parameter}
    else:
        schema = dict(parameter.get("schema") or {})
    dropped: list[str] = []
    schema = json_schema(schema, dropped)
    if not schema and not dropped:
        schema = {"type": "string"}
    if dropped:
        warn_dropped(operation, f"parameter {parameter.get('name', 'body')!r}", dropped)
    if parameter.get("description"):
        schema["description"] = parameter["description"]
    return schema


def warn_dropped(operation: str, where: str, dropped: list[str]) -> None:
    log.warning("%s: %s has the type %s, which JSON schema does not know; it is left out of the schema the model "
                "sees, and the API checks that value", operation, where, ", ".join(sorted(set(dropped))))


def checkable(operation: str, schema: dict[str, Any]) -> bool:
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
