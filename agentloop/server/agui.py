"""AG-UI: ``POST /v1/ag-ui/{agent}`` and ``?protocol=ag-ui`` (to be built)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter

router = APIRouter(tags=["ag-ui"])


async def run_stream(state: Any, run_id: str, offset: int) -> AsyncIterator[Any]:
    """The run's events from ``offset`` as AG-UI SSE frames."""
    raise NotImplementedError
    yield
