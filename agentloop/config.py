"""Connection settings from the environment, shared by client, worker and CLI."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

DEFAULT_TASK_QUEUE = "agentloop"

#: Environment variables that hold provider credentials: only a worker that
#: calls models may have them (role ``models`` or ``all``); a tools-only worker
#: refuses to start with any of them set, and shell commands never get them.
PROVIDER_KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")

#: What a worker process runs (``agentloop worker --role``, ``AGENTLOOP_WORKER_ROLE``):
#: ``models`` polls the run's task queue (the workflow and ``call_model``),
#: ``tools`` polls ``<task queue>-tools`` (``resolve_tools`` and
#: ``execute_tool``), ``all`` both, in one process.
WORKER_ROLES = ("all", "models", "tools")


@dataclass
class TemporalConfig:
    """Where Temporal is and which task queue runs agents.

    Attributes:
        address: ``host:port`` of the Temporal frontend; None means "start the
            embedded dev server" for CLI commands that can.
        namespace: Temporal namespace.
        task_queue: Task queue the workers poll and runs are started on.
        imports: Modules a worker imports to register tools and scripted models.
        role: What a worker runs: ``all`` (default), ``models`` or ``tools``
            (see :data:`WORKER_ROLES`).
    """

    address: str | None = None
    namespace: str = "default"
    task_queue: str = DEFAULT_TASK_QUEUE
    imports: list[str] = field(default_factory=list)
    role: str = "all"

    @classmethod
    def from_env(cls) -> TemporalConfig:
        """Read ``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``,
        ``AGENTLOOP_TASK_QUEUE``, ``AGENTLOOP_IMPORTS`` (comma-separated) and
        ``AGENTLOOP_WORKER_ROLE``; the role is checked where it is used."""
        imports = [m.strip() for m in os.environ.get("AGENTLOOP_IMPORTS", "").split(",") if m.strip()]
        return cls(
            address=os.environ.get("TEMPORAL_ADDRESS") or None,
            namespace=os.environ.get("TEMPORAL_NAMESPACE") or "default",
            task_queue=os.environ.get("AGENTLOOP_TASK_QUEUE") or DEFAULT_TASK_QUEUE,
            imports=imports,
            role=(os.environ.get("AGENTLOOP_WORKER_ROLE") or "all").strip().lower(),
        )


def provider_keys_in(environ: dict[str, str] | None = None) -> list[str]:
    """Names of :data:`PROVIDER_KEY_VARIABLES` set (non-empty) in the environment."""
    env = os.environ if environ is None else environ
    return [name for name in PROVIDER_KEY_VARIABLES if env.get(name)]
