"""``python -m agentloop.cli``."""

from agentloop.cli import entrypoint

entrypoint()
