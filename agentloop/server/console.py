"""The web console at ``/`` (to be built)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(include_in_schema=False)
