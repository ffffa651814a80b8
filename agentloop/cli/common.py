"""What every ``agentloop`` command shares: constants, the home directory,
notes on stderr, and the helpers that find runs and wait for a worker."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from agentloop.shared.base.errors import AgentLoopError, UserError
from agentloop.shared.definition.spec import system_workspace_problem
from agentloop.shared.runs.report import LIVE_STATUSES

if TYPE_CHECKING:
    from agentloop.client.agent_client import AgentClient
    from agentloop.client.handle import AgentRunHandle

T = TypeVar("T")

#: Tools ``agentloop run`` offers the model unless told otherwise.
DEFAULT_RUN_TOOLS = ["shell_command", "read_file", "write_file", "apply_patch", "grep_files", "list_dir"]

#: How long an ops command waits for a worker to answer a query or update.
OPS_TIMEOUT_SECONDS = 15.0

#: The statuses ``agentloop list --status`` filters on.
RUN_STATUSES = [
    "running", "idle", "awaiting_approval", "requires_action", "completed", "failed", "cancelled", "stopped",
    "waiting_for_quota",
]


def table(rows: list[list[str]]) -> list[str]:
    """Rows of cells as lines, each column as wide as its widest cell."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)).rstrip() for row in rows]


class CommandFailed(AgentLoopError):
    """The command could not do what was asked (unknown run, run ended, no
    worker answered); the CLI prints the message and exits 1."""


def say(text: str) -> None:
    """A line for the person on stderr; nothing when stderr is gone (a
    closed terminal after SIGHUP), so cleanup goes on regardless."""
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def existing_workspace(path: str | None, flag: str = "--workspace") -> str | None:
    """``path`` made absolute, when it is a directory.

    Raises:
        UserError: It is not a directory.
    """
    if path is None:
        return None
    resolved = Path(path).resolve()
    if not resolved.is_dir():
        raise UserError(f"{flag} {path} is not a directory")
    problem = system_workspace_problem(str(resolved))
    if problem:
        raise UserError(f"{flag} {path}: {problem}")
    return str(resolved)


async def answer_within(request: Awaitable[T], what: str, run_id: str) -> T:
    """Wait for a query or update that a worker must answer, with a limit."""
    try:
        return await asyncio.wait_for(request, OPS_TIMEOUT_SECONDS)
    except TimeoutError:
        raise CommandFailed(
            f"no worker answered {what} for run {run_id} within {OPS_TIMEOUT_SECONDS:g}s, so nothing was "
            "changed; start a worker for the run's task queue (`agentloop worker`, or `agentloop dev`) "
            "and try again"
        ) from None


async def describe_run(client: AgentClient, run_id: str) -> Any:
    """The run's Temporal description; CommandFailed when there is no such run."""
    from temporalio.service import RPCError, RPCStatusCode

    try:
        return await client.temporal.get_workflow_handle(run_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND and "namespace" not in err.message.lower():
            raise CommandFailed(
                f"no run {run_id!r} in namespace {client.temporal.namespace!r}; "
                "`agentloop list` shows the runs there"
            ) from None
        raise


def temporal_status(description: Any) -> str:
    from temporalio.client import WorkflowExecutionStatus as S

    return {
        S.RUNNING: "running", S.COMPLETED: "completed", S.FAILED: "failed", S.CANCELED: "cancelled",
        S.TERMINATED: "terminated", S.TIMED_OUT: "timed_out", S.CONTINUED_AS_NEW: "continued",
    }.get(description.status, "unknown")


async def running_handle(client: AgentClient, run_id: str, request: str) -> AgentRunHandle:
    """The handle of a run that is still going; CommandFailed otherwise."""
    from temporalio.client import WorkflowExecutionStatus

    from agentloop.shared.runs.search_attributes import AGENT_STATUS

    description = await describe_run(client, run_id)
    if description.status != WorkflowExecutionStatus.RUNNING:
        status = description.typed_search_attributes.get(AGENT_STATUS) or temporal_status(description)
        if status in LIVE_STATUSES:
            status = temporal_status(description)
        raise CommandFailed(f"run {run_id} has ended ({status}); it takes no {request} any more")
    return client.get_handle(run_id)


def stdin_is_terminal() -> bool:
    """Stdin is a terminal we may read: a background job (``agentloop run
    ... &``) that read it would be stopped by SIGTTIN, so it only waits."""
    try:
        if sys.stdin is None or not sys.stdin.isatty():
            return False
        fd = sys.stdin.fileno()
    except (ValueError, OSError):  # closed or detached stdin
        return False
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:  # a terminal, but not our controlling one: no job control applies
        return True
