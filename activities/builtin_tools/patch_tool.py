"""The built-in ``apply_patch`` tool: the ``*** Begin Patch`` format, all
hunks or nothing."""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agentloop.activities.builtin_tools.workspace import (
    hard_link_error,
    open_for_reading,
    remove_file,
    replace_file,
    resolve_in_workspace,
    workspace_relative,
)
from agentloop.shared.base.errors import ToolError
from agentloop.tools.tool_context import ToolContext


def apply_patch(patch: str, *, ctx: ToolContext) -> str:
    """Add, delete, update or move files with a patch; all of it applies or none.

    Format:

        *** Begin Patch
        *** Add File: path/new.py
        +each line of the new file, prefixed with '+'
        *** Delete File: path/old.py
        *** Update File: path/app.py
        *** Move to: path/renamed.py
        @@ def main():
         unchanged context line, prefixed with ' '
        -removed line, prefixed with '-'
        +added line, prefixed with '+'
        *** End of File
        *** End Patch

    '*** Move to:' (rename the updated file) is optional. Each hunk starts
    with '@@', optionally followed by a line to find first, such as the
    enclosing function's signature. '*** End of File' is optional and anchors
    the hunk at the end of the file. Give about 3 lines of context around each
    change, enough to make its place unique; hunks of a file must be in file
    order. If any hunk does not match, nothing is changed.

    Changed files are replaced, not written in place (permissions are kept),
    so other hard links to them keep the old content; files with more than
    one hard link cannot be updated or moved (they are not read). Deleting or
    moving a symlink removes the link, not what it points to.

    Args:
        patch: The whole patch text, from '*** Begin Patch' to '*** End Patch'.
        ctx: The call context (supplied by the executor, not by the model).
    """
    ops = _parse_patch(patch)
    workspace = ctx.workspace
    files = _VirtualFiles(workspace)
    summary: list[str] = []
    for op in ops:
        if op.kind == "delete":
            # The name itself: deleting a symlink removes the link, not its target.
            path = resolve_in_workspace(workspace, op.path, follow_final=False)
        else:
            path = resolve_in_workspace(workspace, op.path)
        shown = workspace_relative(workspace, path)
        if op.kind == "add":
            if files.exists(path, op.path):
                raise ToolError(
                    f"Cannot add '{op.path}': it already exists; use "
                    f"'*** Update File: {op.path}' to change it. No file was changed."
                )
            files.write(path, op.content)
            summary.append(f"A {shown}")
        elif op.kind == "delete":
            if not files.exists(path, op.path):
                raise ToolError(
                    f"Cannot delete '{op.path}': it does not exist. No file was changed."
                )
            files.write(path, None)
            summary.append(f"D {shown}")
        else:
            current = files.read(path, op.path)
            if current is None:
                raise ToolError(
                    f"Cannot update '{op.path}': it does not exist; use "
                    f"'*** Add File: {op.path}' to create it. No file was changed."
                )
            updated = _apply_hunks(current, op.hunks, op.path)
            if op.move_to is None:
                files.write(path, updated)
                summary.append(f"M {shown}")
                continue
            dest = resolve_in_workspace(workspace, op.move_to)
            if dest != path and files.exists(dest, op.move_to):
                raise ToolError(
                    f"Cannot move '{op.path}' to '{op.move_to}': the destination already "
                    "exists. No file was changed."
                )
            # Moving a symlink removes the link, as deleting it does, not its target.
            files.write(resolve_in_workspace(workspace, op.path, follow_final=False), None)
            files.write(dest, updated, mode_from=path)
            summary.append(f"M {workspace_relative(workspace, dest)} (moved from {shown})")
    files.commit()
    return "Applied the patch:\n" + "\n".join(summary)


@dataclass
class _Hunk:
    context: str | None
    first_line: int
    # (kind, text) with kind ' ' (context), '-' (remove) or '+' (add).
    lines: list[tuple[str, str]] = field(default_factory=list)
    end_of_file: bool = False

    @property
    def old(self) -> list[str]:
        return [text for kind, text in self.lines if kind != "+"]

    def replacement(self, original: list[str]) -> list[str]:
        """The new lines, given the file lines the hunk's old lines matched.

        Context lines keep the file's text, so a whitespace-tolerant match
        does not rewrite lines the hunk only meant to point at.
        """
        out: list[str] = []
        k = 0
        for kind, text in self.lines:
            if kind == "+":
                out.append(text)
                continue
            if kind == " ":
                out.append(original[k])
            k += 1
        return out

    def without_trailing_blank(self) -> _Hunk | None:
        """This hunk minus a final blank context/removed line, if it has one."""
        for index in range(len(self.lines) - 1, -1, -1):
            kind, text = self.lines[index]
            if kind == "+":
                continue
            if text.strip() or index == 0:
                return None
            rest = self.lines[:index] + self.lines[index + 1 :]
            return _Hunk(self.context, self.first_line, rest, self.end_of_file)
        return None


@dataclass
class _FileOp:
    kind: str  # "add", "delete" or "update"
    path: str
    content: str = ""
    move_to: str | None = None
    hunks: list[_Hunk] = field(default_factory=list)


_ADD = "*** Add File: "
_DELETE = "*** Delete File: "
_UPDATE = "*** Update File: "
_MOVE = "*** Move to: "
_EOF_MARKER = "*** End of File"
# Models trained on unified diffs write "@@ -3,7 +3,8 @@"; those numbers are
# not context text to search for.
_UNIFIED_HUNK_HEADER = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")


def _parse_patch(patch: str) -> list[_FileOp]:
    lines = patch.strip().splitlines()
    if not lines or lines[0].strip() != "*** Begin Patch":
        raise ToolError("The patch must start with the line '*** Begin Patch'")
    if lines[-1].strip() != "*** End Patch":
        raise ToolError("The patch must end with the line '*** End Patch'")
    ops: list[_FileOp] = []
    i = 1
    end = len(lines) - 1

    def where(index: int) -> str:
        return f"Line {index + 1} of the patch"

    while i < end:
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        if line.startswith(_ADD):
            op = _FileOp("add", _patch_path(line, _ADD, where(i)))
            i += 1
            content: list[str] = []
            while i < end and not lines[i].startswith("*** "):
                if not lines[i].startswith("+"):
                    raise ToolError(
                        f"{where(i)}: every line of '{_ADD}{op.path}' must start with '+' "
                        f"(use '+' alone for an empty line); got {lines[i]!r}"
                    )
                content.append(lines[i][1:])
                i += 1
            op.content = "".join(f"{text}\n" for text in content)
            ops.append(op)
        elif line.startswith(_DELETE):
            ops.append(_FileOp("delete", _patch_path(line, _DELETE, where(i))))
            i += 1
        elif line.startswith(_UPDATE):
            op = _FileOp("update", _patch_path(line, _UPDATE, where(i)))
            i += 1
            if i < end and lines[i].startswith(_MOVE):
                op.move_to = _patch_path(lines[i], _MOVE, where(i))
                i += 1
            i = _parse_hunks(lines, i, end, op, where)
            if not op.hunks and op.move_to is None:
                raise ToolError(f"'{_UPDATE}{op.path}' has no hunks; add '@@' hunks")
            ops.append(op)
        else:
            raise ToolError(
                f"{where(i)}: expected '{_ADD}', '{_DELETE}', '{_UPDATE}' or "
                f"'*** End Patch'; got {line!r}"
            )
    if not ops:
        raise ToolError("The patch changes no file")
    return ops


def _parse_hunks(
    lines: list[str], i: int, end: int, op: _FileOp, where: Callable[[int], str]
) -> int:
    """Read the hunks of one Update File section; returns the index after it."""
    hunk: _Hunk | None = None
    while i < end:
        line = lines[i]
        if line.strip() == _EOF_MARKER:
            if hunk is None:
                raise ToolError(f"{where(i)}: '{_EOF_MARKER}' must follow a hunk")
            hunk.end_of_file = True
            i += 1
            continue
        if line.startswith("*** "):
            break
        if line.startswith("@@"):
            context = "" if _UNIFIED_HUNK_HEADER.match(line) else line[2:].strip()
            hunk = _Hunk(context=context or None, first_line=i + 1)
            op.hunks.append(hunk)
            i += 1
            continue
        if hunk is None:
            # The first hunk of a file may leave out its '@@' line.
            hunk = _Hunk(context=None, first_line=i + 1)
            op.hunks.append(hunk)
        # A blank line is an empty context line whose leading space got lost.
        prefix, text = (line[0], line[1:]) if line else (" ", "")
        if prefix in (" ", "-", "+"):
            hunk.lines.append((prefix, text))
        else:
            raise ToolError(
                f"{where(i)}: in '{_UPDATE}{op.path}', hunk lines must start with ' ' "
                f"(context), '-' (remove) or '+' (add); got {line!r}"
            )
        i += 1
    for number, h in enumerate(op.hunks, start=1):
        if not h.lines:
            raise ToolError(
                f"Hunk {number} of '{_UPDATE}{op.path}' (patch line {h.first_line}) is empty"
            )
    return i


def _patch_path(line: str, marker: str, where: str) -> str:
    path = line[len(marker) :].strip()
    if not path:
        raise ToolError(f"{where}: '{marker.strip()}' needs a path")
    return path


def _apply_hunks(text: str, hunks: list[_Hunk], file_path: str) -> str:
    eol = "\r\n" if "\r\n" in text else "\n"
    lines = text.split(eol)
    ends_with_eol = lines[-1] == ""
    if ends_with_eol:
        lines.pop()
    cursor = 0
    edits: list[tuple[int, int, list[str]]] = []
    for number, hunk in enumerate(hunks, start=1):
        if hunk.context is not None:
            found = _seek(lines, [hunk.context], cursor, end_of_file=False)
            if found is None:
                raise ToolError(
                    f"apply_patch failed: in '{file_path}', hunk {number} (patch line "
                    f"{hunk.first_line}) starts with '@@ {hunk.context}', but no line at or "
                    f"after line {cursor + 1} matches it. No file was changed; read the file "
                    "again and regenerate the patch."
                )
            cursor = found + 1
        if not hunk.old:
            # Pure insertion: right after the '@@' line if there is one, else at the end.
            at = cursor if hunk.context is not None else len(lines)
            edits.append((at, 0, hunk.replacement([])))
            continue
        applied = hunk
        found = _seek(lines, hunk.old, cursor, hunk.end_of_file)
        trimmed = hunk.without_trailing_blank() if found is None else None
        if trimmed is not None:
            # Models often add a trailing blank line for the file's final newline.
            applied = trimmed
            found = _seek(lines, trimmed.old, cursor, hunk.end_of_file)
        if found is None:
            place = "at the end of the file" if hunk.end_of_file else f"at or after line {cursor + 1}"
            expected = "\n".join(f"    {line}" for line in hunk.old)
            raise ToolError(
                f"apply_patch failed: in '{file_path}', the context of hunk {number} (patch line "
                f"{hunk.first_line}) did not match. Expected these lines {place}:\n{expected}\n"
                "No file was changed; read the file again and regenerate the patch."
            )
        length = len(applied.old)
        edits.append((found, length, applied.replacement(lines[found : found + length])))
        cursor = found + length
    # Apply bottom-up so earlier edits' positions stay valid.
    for start, length, replacement in sorted(edits, key=lambda e: e[0], reverse=True):
        lines[start : start + length] = replacement
    if not lines:
        return ""
    return eol.join(lines) + (eol if ends_with_eol else "")


def _seek(lines: list[str], pattern: list[str], start: int, end_of_file: bool) -> int | None:
    """Index where ``pattern`` occurs in ``lines`` at or after ``start``.

    Tries an exact match first, then ignoring trailing whitespace, then
    ignoring surrounding whitespace: models often get indentation or trailing
    spaces slightly wrong, and a stricter match wins when there is one.
    """
    last = len(lines) - len(pattern)
    if last < start:
        return None
    candidates: list[int] = list(range(start, last + 1))
    if end_of_file:
        candidates.insert(0, last)
    for normalize in (_same, str.rstrip, str.strip):
        wanted = [normalize(p) for p in pattern]
        for index in candidates:
            if all(normalize(lines[index + k]) == wanted[k] for k in range(len(pattern))):
                return index
    return None


def _same(text: str) -> str:
    return text


class _VirtualFiles:
    """The workspace's files as a patch would leave them, before writing.

    Reads go to disk the first time and to pending changes after, so a patch
    can touch a file several times; nothing is written until :meth:`commit`.
    """

    def __init__(self, workspace: Path) -> None:
        self._workspace = workspace
        self._pending: dict[Path, str | None] = {}
        self._mode_from: dict[Path, Path] = {}
        self._modes: dict[Path, int] = {}

    def exists(self, path: Path, shown: str) -> bool:
        """Whether the name exists (a symlink counts, dangling or not)."""
        if path in self._pending:
            return self._pending[path] is not None
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise ToolError(f"Could not look at '{shown}': {exc.strerror or exc}") from None
        if stat.S_ISDIR(st.st_mode):
            raise ToolError(f"'{shown}' is a directory, not a file. No file was changed.")
        return True

    def read(self, path: Path, shown: str) -> str | None:
        if path in self._pending:
            return self._pending[path]
        try:
            fd, st = open_for_reading(self._workspace, path)
        except FileNotFoundError:
            return None
        except IsADirectoryError:
            raise ToolError(f"'{shown}' is a directory, not a file. No file was changed.") from None
        except OSError as exc:
            raise ToolError(f"Could not read '{shown}': {exc.strerror or exc}") from None
        with open(fd, "rb") as file:
            # Checked on the open descriptor: what is read is what was checked.
            if stat.S_ISDIR(st.st_mode):
                raise ToolError(f"'{shown}' is a directory, not a file. No file was changed.")
            if not stat.S_ISREG(st.st_mode):
                raise ToolError(f"'{shown}' is not a regular file. No file was changed.")
            if st.st_nlink > 1:
                # Its content would reach the model through the patched or moved file.
                raise ToolError(
                    f"{hard_link_error(shown, st.st_nlink, 'apply_patch')} or change it. "
                    "No file was changed."
                )
            try:
                data = file.read()
            except OSError as exc:
                raise ToolError(f"Could not read '{shown}': {exc.strerror or exc}") from None
        self._modes[path] = stat.S_IMODE(st.st_mode)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(
                f"'{shown}' is not UTF-8 text, so apply_patch cannot edit it. No file was changed."
            ) from None

    def write(self, path: Path, content: str | None, *, mode_from: Path | None = None) -> None:
        self._pending[path] = content
        if mode_from is not None:
            self._mode_from[path] = mode_from

    def commit(self) -> None:
        # Writes before deletes: a move's source must stay until its copy exists.
        writes = [(p, c) for p, c in self._pending.items() if c is not None]
        deletes = [p for p, c in self._pending.items() if c is None]
        path = self._workspace
        try:
            for path, content in writes:
                source = self._mode_from.get(path)
                mode = self._modes.get(source) if source is not None else None
                # Replaced, never written in place: a hard link to a file
                # outside the workspace would carry the change out of it.
                replace_file(self._workspace, path, content.encode("utf-8"), mode=mode)
            for path in deletes:
                with contextlib.suppress(FileNotFoundError):
                    remove_file(self._workspace, path)
        except OSError as exc:
            shown = workspace_relative(self._workspace, path)
            if isinstance(exc, (FileExistsError, NotADirectoryError)):
                reason = "part of its parent path is a file, not a directory"
            else:
                reason = exc.strerror or str(exc)
            raise ToolError(f"Writing the patched files failed at '{shown}': {reason}") from None
