"""Where things are: the repository root (the working directory and
PYTHONPATH of every subprocess a test starts) and the committed histories."""

from __future__ import annotations

from pathlib import Path

#: The repository root. (No Path.resolve: workflows defined in test modules
#: import this inside the workflow sandbox, which forbids it; __file__ is absolute.)
ROOT = Path(__file__).parents[2]

#: The committed workflow histories that tests/replay/test_replay.py replays.
HISTORIES = ROOT / "tests" / "replay" / "histories"

#: The OpenAPI description of the local pets API (tests of OpenAPI tools).
PETS_API = ROOT / "tests" / "helpers" / "openapi" / "pets.yaml"

#: A store API in OpenAPI 3: $ref components, request bodies (JSON and a
#: form), path and query parameters, an operationId used twice, TRACE, and
#: binary responses.
STORE_API = ROOT / "tests" / "helpers" / "openapi" / "store.yaml"

#: The Swagger 2.0 petstore: body, formData (a form and a file upload),
#: typed path, query and header parameters, consumes.
PETSTORE_V2 = ROOT / "tests" / "helpers" / "openapi" / "petstore-v2.yaml"
