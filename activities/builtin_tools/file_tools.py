"""The built-in ``read_file``, ``write_file`` and ``list_dir`` tools,
confined to the workspace root."""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from agentloop.activities.builtin_tools.workspace import (
    hard_link_error,
    open_for_reading,
    replace_file,
    resolve_in_workspace,
    workspace_relative,
)
from agentloop.shared.base.errors import ToolError
from agentloop.shared.base.text import cut
from agentloop.tools.tool_context import ToolContext

# Git and many other tools call a file binary if its first 8 KiB hold a NUL.
_BINARY_SNIFF_BYTES = 8192
_MAX_LINE_CHARS = 2000
_LIST_UNEXPANDED_DIRS = frozenset({".git", "node_modules"})


def read_file(file_path: str, offset: int = 1, limit: int = 2000, *, ctx: ToolContext) -> str:
    """Read a text file from the workspace, with line numbers.

    Each line is shown as its number, a tab, and its text. Read long files in
    pieces with offset and limit. Binary files, directories and files with
    more than one hard link (other names may lie outside the workspace) are
    refused.

    Args:
        file_path: Path of the file, relative to the workspace root.
        offset: Line number to start at (the first line is 1).
        limit: Most lines to return.
        ctx: The call context (supplied by the executor, not by the model).
    """
    if offset < 1:
        raise ToolError(f"offset must be 1 or more (the first line is line 1), got {offset}")
    if limit < 1:
        raise ToolError(f"limit must be 1 or more, got {limit}")
    path = resolve_in_workspace(ctx.workspace, file_path, must_exist=True)
    try:
        fd, st = open_for_reading(ctx.workspace, path)
    except FileNotFoundError:
        raise ToolError(f"'{file_path}' does not exist (it was removed just now)") from None
    except IsADirectoryError:  # the workspace root itself
        raise ToolError(
            f"'{file_path}' is a directory, not a file; use list_dir to see what it contains"
        ) from None
    except OSError as exc:
        raise ToolError(f"Could not read '{file_path}': {exc.strerror or exc}") from None

    try:
        # Checked on the open descriptor, so a path changed since it was
        # resolved cannot slip another file past the checks.
        if stat.S_ISDIR(st.st_mode):
            raise ToolError(
                f"'{file_path}' is a directory, not a file; use list_dir to see what it contains"
            )
        if not stat.S_ISREG(st.st_mode):
            raise ToolError(f"'{file_path}' is not a regular file")
        if st.st_nlink > 1:
            raise hard_link_error(file_path, st.st_nlink, "read_file")
    except ToolError:
        os.close(fd)
        raise

    shown: list[str] = []
    total = 0
    try:
        with open(fd, "rb") as raw:
            if b"\x00" in raw.read(_BINARY_SNIFF_BYTES):
                raise _binary_file_error(file_path)
            raw.seek(0)
            text = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline=None)
            for total, line in enumerate(text, start=1):
                if "\x00" in line:
                    raise _binary_file_error(file_path)
                if offset <= total < offset + limit:
                    clipped = cut(line.rstrip("\n"), _MAX_LINE_CHARS)
                    shown.append(f"{total:>6}\t{clipped}")
    except OSError as exc:
        raise ToolError(f"Could not read '{file_path}': {exc.strerror or exc}") from None

    if total == 0:
        return f"'{file_path}' is empty."
    if offset > total:
        raise ToolError(
            f"offset {offset} is past the end of '{file_path}', which has {total} lines"
        )
    last = offset + len(shown) - 1
    body = "\n".join(shown)
    if last < total:
        body += (
            f"\n[... {total - last} more lines: showing lines {offset}-{last} of {total}; "
            f"call read_file with offset={last + 1} to read on ...]"
        )
    return body


def write_file(file_path: str, content: str, *, ctx: ToolContext) -> str:
    """Write a file in the workspace, replacing it if it exists.

    Missing parent directories are created. To change part of an existing
    file, prefer apply_patch. An existing file is replaced by a new one (its
    permissions are kept): if it had other hard links, they keep the old
    content.

    Args:
        file_path: Path of the file, relative to the workspace root.
        content: The complete new content of the file.
        ctx: The call context (supplied by the executor, not by the model).
    """
    path = resolve_in_workspace(ctx.workspace, file_path)
    if path.is_dir():
        raise ToolError(f"'{file_path}' is a directory; give the path of a file")
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolError(f"The content is not valid text: {exc.reason}") from None
    try:
        # Never in place: a hard link to a file outside the workspace would
        # carry the write out of it.
        replace_file(ctx.workspace, path, data)
    except IsADirectoryError:
        raise ToolError(f"'{file_path}' is a directory; give the path of a file") from None
    except (FileExistsError, NotADirectoryError):
        raise ToolError(
            f"Could not write '{file_path}': part of its parent path is a file, not a directory"
        ) from None
    except OSError as exc:
        raise ToolError(f"Could not write '{file_path}': {exc.strerror or exc}") from None
    return f"Wrote {len(data)} bytes to {workspace_relative(ctx.workspace, path)}"


def _binary_file_error(file_path: str) -> ToolError:
    return ToolError(
        f"'{file_path}' looks like a binary file (it contains NUL bytes); "
        "read_file only shows text files"
    )



def _sorted_entries(directory: Path) -> Iterator[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as scan:
            return iter(sorted(scan, key=lambda e: e.name))
    except OSError:
        return iter(())


def list_dir(path: str = ".", depth: int = 2, max_entries: int = 500, *, ctx: ToolContext) -> str:
    """List a directory of the workspace as an indented tree.

    Directories end with "/", symlinks show their target. The contents of
    .git and node_modules are not listed.

    Args:
        path: Directory to list, relative to the workspace root.
        depth: How many levels to show; 1 lists only the directory's own entries.
        max_entries: Stop after this many entries.
        ctx: The call context (supplied by the executor, not by the model).
    """
    if depth < 1:
        raise ToolError(f"depth must be 1 or more, got {depth}")
    if max_entries < 1:
        raise ToolError(f"max_entries must be 1 or more, got {max_entries}")
    root = resolve_in_workspace(ctx.workspace, path, must_exist=True)
    if not root.is_dir():
        raise ToolError(f"'{path}' is a file, not a directory; use read_file to read it")

    shown_root = workspace_relative(ctx.workspace, root)
    out: list[str] = [shown_root if shown_root.endswith("/") else shown_root + "/"]
    count = 0
    capped = False

    def walk(directory: Path, level: int) -> None:
        nonlocal count, capped
        try:
            with os.scandir(directory) as scan:
                entries = sorted(scan, key=lambda e: e.name)
        except OSError as exc:
            out.append("  " * level + f"(unreadable: {exc.strerror or exc})")
            return
        for entry in entries:
            if count == max_entries:
                capped = True
                return
            count += 1
            indent = "  " * level
            if entry.is_symlink():
                try:
                    target = os.readlink(entry.path)
                except OSError:
                    target = "?"
                out.append(f"{indent}{entry.name} -> {target}")
            elif entry.is_dir(follow_symlinks=False):
                if entry.name in _LIST_UNEXPANDED_DIRS and level < depth:
                    out.append(f"{indent}{entry.name}/ (contents not listed)")
                    continue
                out.append(f"{indent}{entry.name}/")
                if level < depth:
                    walk(Path(entry.path), level + 1)
                    if capped:
                        return
            else:
                out.append(f"{indent}{entry.name}")

    walk(root, 1)
    if count == 0:
        out.append("  (empty directory)")
    if capped:
        out.append(
            f"[... listing capped at {max_entries} entries; list a subdirectory or use a "
            "smaller depth ...]"
        )
    return "\n".join(out)
