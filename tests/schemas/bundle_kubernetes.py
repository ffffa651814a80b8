"""Write the Kubernetes schemas under tests/schemas/kubernetes/, one standalone
file per kind the manifests of deploy/kubernetes/ use, from the schemas
the PyPI package kubernetes-validate ships (its fork of
kubernetes-json-schema, ``vX.Y.0-local-strict``: unknown fields are errors).

Each kind's schema there refers to a shared ``_definitions.json``; a bundle
is the kind's schema with the definitions it reaches copied under ``$defs``
and its references made local, so the test validates offline with
``jsonschema`` alone. Run once when the Kubernetes version or the kinds change:

    pip download --no-deps kubernetes-validate==1.37.0 -d /tmp/kv
    python -m tests.schemas.bundle_kubernetes /tmp/kv/kubernetes_validate-1.37.0-py3-none-any.whl
"""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path
from typing import Any

VERSION = "v1.33.0"
#: The kinds deploy/kubernetes/ uses, as the package names their files.
KINDS = ["deployment-apps-v1", "service-v1", "configmap-v1", "job-batch-v1"]
OUT = Path(__file__).resolve().parent / "kubernetes" / VERSION
DEFINITIONS = "/api/_definitions.json#/$defs/"


def local(node: Any, reached: set[str], pending: list[str]) -> Any:
    """``node`` with every reference into the definitions made local; the names reached are collected."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                name = value.split("#/$defs/", 1)[1]
                if name not in reached:
                    reached.add(name)
                    pending.append(name)
                out[key] = f"#/$defs/{name}"
            else:
                out[key] = local(value, reached, pending)
        return out
    if isinstance(node, list):
        return [local(item, reached, pending) for item in node]
    return node


def bundle(kind: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    reached: set[str] = set()
    pending: list[str] = []
    out = local(kind, reached, pending)
    defs: dict[str, Any] = {}
    while pending:
        name = pending.pop()
        defs[name] = local(definitions[name], reached, pending)
    out["$defs"] = dict(sorted(defs.items()))
    return out


def main(wheel: str) -> None:
    folder = f"kubernetes_validate/kubernetes-json-schema/{VERSION}-local-strict/"
    with zipfile.ZipFile(wheel) as archive:
        definitions = json.loads(archive.read(folder + "_definitions.json"))["$defs"]
        OUT.mkdir(parents=True, exist_ok=True)
        for name in KINDS:
            kind = json.loads(archive.read(f"{folder}{name}.json"))
            (OUT / f"{name}.json").write_text(json.dumps(bundle(kind, definitions), indent=1, sort_keys=False) + "\n")
            print(f"wrote {OUT / name}.json")


if __name__ == "__main__":
    main(sys.argv[1])
