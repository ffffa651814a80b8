"""Connection settings from the environment, shared by client, worker and CLI."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

DEFAULT_TASK_QUEUE = "agentloop"


@dataclass
class TemporalConfig:
    """Where Temporal is and which task queue runs agents.

    Attributes:
        address: ``host:port`` of the Temporal frontend; None means "start the
            embedded dev server" for CLI commands that can.
        namespace: Temporal namespace.
        task_queue: Task queue the workers poll and runs are started on.
        imports: Modules a worker imports to register tools and scripted models.
    """

    address: str | None = None
    namespace: str = "default"
    task_queue: str = DEFAULT_TASK_QUEUE
    imports: list[str] = field(default_factory=list)

    @classmethod
    def from_env(cls) -> TemporalConfig:
        """Read ``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``,
        ``AGENTLOOP_TASK_QUEUE`` and ``AGENTLOOP_IMPORTS`` (comma-separated)."""
        imports = [m.strip() for m in os.environ.get("AGENTLOOP_IMPORTS", "").split(",") if m.strip()]
        return cls(
            address=os.environ.get("TEMPORAL_ADDRESS") or None,
            namespace=os.environ.get("TEMPORAL_NAMESPACE") or "default",
            task_queue=os.environ.get("AGENTLOOP_TASK_QUEUE") or DEFAULT_TASK_QUEUE,
            imports=imports,
        )
