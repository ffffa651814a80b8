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
