"""The built-in ``grep_files`` tool: a regular-expression search over the
workspace's text files."""

from __future__ import annotations

import fnmatch
import io
import os
import re
from collections.abc import Iterator
from pathlib import Path

from activities.workspace import resolve_in_workspace, workspace_relative
from agentloop.errors import ToolError
from activities.file_tools import _BINARY_SNIFF_BYTES, _clip_line, _sorted_entries
from agentloop.tools import ToolContext

_GREP_MAX_LINE_CHARS = 500
_GREP_MAX_FILE_BYTES = 10 * 1024 * 1024
_GREP_SKIP_DIRS = frozenset({".git", "node_modules"})


def grep_files(
    pattern: str,
    path: str = ".",
    include: str | None = None,
    max_results: int = 200,
    *,
    ctx: ToolContext,
) -> str:
    """Search file contents with a Python regular expression.

    Returns matching lines as "path:line: text", sorted by path. Skips .git,
    node_modules, binary files and files over 10 MB. Each line is matched on
    its own.

    Args:
        pattern: Python regular expression, e.g. "def \\w+_handler" or "TODO|FIXME".
        path: File or directory to search, relative to the workspace root.
        include: Only search files whose name matches this glob, e.g. "*.py".
        max_results: Stop after this many matching lines.
        ctx: The call context (supplied by the executor, not by the model).
    """
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ToolError(f"Invalid regex {pattern!r}: {exc}") from None
    if max_results < 1:
        raise ToolError(f"max_results must be 1 or more, got {max_results}")
    root = resolve_in_workspace(ctx.workspace, path, must_exist=True)
    real_root = Path(os.path.realpath(ctx.workspace))

    results: list[str] = []
    capped = False
    for file in _files_under(root, real_root, include):
        for lineno, line in _text_lines(file):
            if regex.search(line):
                if len(results) == max_results:
                    capped = True
                    break
                shown = workspace_relative(ctx.workspace, file)
                results.append(f"{shown}:{lineno}: {_clip_line(line.rstrip(), _GREP_MAX_LINE_CHARS)}")
        if capped:
            break

    where = f"'{path}'" + (f" (files matching {include!r})" if include else "")
    if not results:
        return f"No matches for {pattern!r} in {where}."
    if capped:
        results.append(
            f"[... results capped at {max_results} matches; narrow the pattern, path or "
            "include to see the rest ...]"
        )
    return "\n".join(results)


def _files_under(root: Path, workspace_root: Path, include: str | None) -> Iterator[Path]:
    """Files to search under ``root``, in path order (depth first, by name)."""
    if not root.is_dir():
        yield root
        return
    # A stack of directory iterators rather than recursion: deep trees must
    # not hit the recursion limit.
    stack: list[Iterator[os.DirEntry[str]]] = [_sorted_entries(root)]
    while stack:
        entry = next(stack[-1], None)
        if entry is None:
            stack.pop()
            continue
        if entry.is_dir(follow_symlinks=False):
            if entry.name not in _GREP_SKIP_DIRS:
                stack.append(_sorted_entries(Path(entry.path)))
            continue
        if include and not _glob_matches(entry.path, entry.name, workspace_root, include):
            continue
        file = Path(entry.path)
        if entry.is_symlink():
            # A symlinked file may point outside the workspace: only follow
            # links that stay inside it.
            target = Path(os.path.realpath(file))
            if not (target == workspace_root or workspace_root in target.parents):
                continue
            if not target.is_file():
                continue
        elif not entry.is_file(follow_symlinks=False):
            continue
        yield file


def _glob_matches(full: str, name: str, workspace_root: Path, include: str) -> bool:
    if "/" not in include:
        return fnmatch.fnmatch(name, include)
    try:
        rel = Path(full).relative_to(workspace_root).as_posix()
    except ValueError:
        rel = full
    return fnmatch.fnmatch(rel, include)


def _text_lines(file: Path) -> Iterator[tuple[int, str]]:
    """Numbered lines of a text file; nothing for binary, huge or unreadable files."""
    try:
        if file.stat().st_size > _GREP_MAX_FILE_BYTES:
            return
        data = file.read_bytes()
    except OSError:
        return
    if b"\x00" in data[:_BINARY_SNIFF_BYTES]:
        return
    text = data.decode("utf-8", errors="replace")
    # Universal newlines, as read_file uses, so line numbers agree with it.
    for lineno, line in enumerate(io.StringIO(text, newline=None), start=1):
        yield lineno, line.rstrip("\n")


