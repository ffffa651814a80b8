"""Scripted models for tests: moved to :mod:`agentloop.testing` (import
``script`` and ``script_every_step`` from there); kept for imports that
still name this module."""

from __future__ import annotations

from agentloop.testing import script, script_every_step

__all__ = ["script", "script_every_step"]
