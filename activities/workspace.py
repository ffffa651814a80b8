"""Confinement of built-in tools to a workspace root, and output truncation.

Every path a model passes to a built-in tool goes through
:func:`resolve_in_workspace`, so the tools cannot read or write outside the
workspace, neither with ``..`` nor through symlinks. :func:`truncate_output`
bounds what the model sees of a tool's output.
"""

from __future__ import annotations

import os
from pathlib import Path

from agentloop.errors import ToolError

__all__ = ["resolve_in_workspace", "truncate_output", "workspace_relative"]


def resolve_in_workspace(workspace: Path, path: str, *, must_exist: bool = False) -> Path:
    """Resolve a path the model gave to a real path inside the workspace.

    Relative paths are resolved against the workspace; absolute paths are
    accepted when they lie inside it. Symlinks are followed wherever they
    occur (any component, the final one included, and for a path that does
    not exist yet its nearest existing parent), and the path is rejected if
    where it really leads is outside the workspace.

    Args:
        workspace: The workspace root.
        path: The path as the model wrote it.
        must_exist: Reject paths that do not exist.

    Returns:
        The absolute path with symlinks resolved; it lies inside the
        workspace's resolved root.

    Raises:
        ToolError: The path is outside the workspace, leads outside it through
            a symlink, is malformed, or (with ``must_exist``) does not exist.
    """
    if "\x00" in path:
        raise ToolError(f"Path {path!r} contains a NUL character; paths cannot contain NUL")
    given_root = Path(os.path.abspath(workspace))
    real_root = Path(os.path.realpath(workspace))
    # A model writing "~/x" means its home directory, not a folder named "~".
    candidate = Path(path).expanduser() if path == "~" or path.startswith("~/") else Path(path)
    if not candidate.is_absolute():
        candidate = given_root / candidate

    # The lexical check comes first so a plain `..` escape or a foreign
    # absolute path gets the simpler message, not a symlink explanation.
    normalized = Path(os.path.normpath(candidate))
    if not (_is_within(normalized, given_root) or _is_within(normalized, real_root)):
        raise ToolError(
            f"Path '{path}' is outside the workspace {given_root}; use a path inside it "
            "(relative paths are resolved against the workspace)"
        )

    # realpath (non-strict) follows every symlink that exists, including a
    # dangling final one, and keeps the not-yet-existing tail as written; this
    # covers symlinked parents of files about to be created.
    real = Path(os.path.realpath(candidate))
    if not _is_within(real, real_root):
        raise ToolError(
            f"Path '{path}' leads through a symlink to {real}, which is outside the "
            f"workspace {given_root}; use a path inside it"
        )
    if must_exist and not real.exists():
        raise ToolError(
            f"Path '{path}' does not exist in the workspace {given_root} "
            "(relative paths are resolved against the workspace)"
        )
    return real


def workspace_relative(workspace: Path, path: Path) -> str:
    """How to show a resolved path to the model: relative to the workspace.

    Args:
        workspace: The workspace root.
        path: A path returned by :func:`resolve_in_workspace`.

    Returns:
        The POSIX-style path relative to the workspace root, ``.`` for the
        root itself, or the absolute path if it is not inside the root.
    """
    real_root = Path(os.path.realpath(workspace))
    try:
        rel = path.relative_to(real_root)
    except ValueError:
        return str(path)
    return rel.as_posix() or "."


def truncate_output(text: str, limit: int) -> tuple[str, bool]:
    """Shorten text to its head and tail with a visible note in between.

    Two thirds of the budget go to the head and one third to the tail: the
    head usually says what ran, the tail how it ended (errors, summaries).

    Args:
        text: The full output.
        limit: Most characters of the original text to keep.

    Returns:
        The text (unchanged if it fits, else head + note + tail, at most
        ``limit`` characters plus the note's length) and whether it was
        truncated.
    """
    if len(text) <= limit:
        return text, False
    limit = max(limit, 0)
    head = limit * 2 // 3
    tail = limit - head
    omitted = len(text) - head - tail
    note = (
        f"\n[... output truncated: {omitted} of {len(text)} characters omitted; "
        "narrow the command or read a smaller range ...]\n"
    )
    # text[-0:] would be the whole text, hence the explicit start index.
    return text[:head] + note + text[len(text) - tail :], True


def _is_within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents
