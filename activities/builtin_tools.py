"""Built-in tools of a coding agent, confined to the workspace root.

``shell_command``, ``read_file``, ``write_file``, ``apply_patch``,
``grep_files`` and ``list_dir``. Every path argument goes through
:func:`~activities.workspace.resolve_in_workspace`, so none of them reads or
writes outside ``ToolContext.workspace``. The docstrings of the tool functions
are what the model reads: their summary becomes the tool's description and
their ``Args:`` entries the parameters' descriptions.

Register them with :func:`register_builtin_tools` (or take
:data:`BUILTIN_TOOLS`)::

    from agentloop.tools import default_registry
    from activities.builtin_tools import register_builtin_tools

    register_builtin_tools(default_registry)
"""

from __future__ import annotations

import asyncio
import fnmatch
import io
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from activities.workspace import resolve_in_workspace, truncate_output, workspace_relative
from agentloop.errors import ToolError
from agentloop.tools import Tool, ToolContext, ToolRegistry

__all__ = [
    "BUILTIN_TOOLS",
    "apply_patch",
    "grep_files",
    "list_dir",
    "read_file",
    "register_builtin_tools",
    "shell_command",
    "write_file",
]

# How often a running command heartbeats; well under any sane heartbeat timeout.
_HEARTBEAT_INTERVAL = 1.0
# After SIGTERM on timeout, how long the command gets to exit before SIGKILL.
_TERM_GRACE = 2.0
# After bash exits, how long background processes that still hold the output
# pipe may keep writing before the process group is killed.
_DRAIN_GRACE = 1.0
# How long to wait for a killed process to be reaped and its pipe to close.
_REAP_TIMEOUT = 5.0

# Worker environment variables whose names look like credentials; commands the
# model writes must not be able to print them.
_SECRET_NAME_PARTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")
_SECRET_NAME_PREFIXES = ("OPENAI_", "ANTHROPIC_", "AWS_")

# Git and many other tools call a file binary if its first 8 KiB hold a NUL.
_BINARY_SNIFF_BYTES = 8192
_MAX_LINE_CHARS = 2000
_GREP_MAX_LINE_CHARS = 500
_GREP_MAX_FILE_BYTES = 10 * 1024 * 1024
_GREP_SKIP_DIRS = frozenset({".git", "node_modules"})
_LIST_UNEXPANDED_DIRS = frozenset({".git", "node_modules"})


# --------------------------------------------------------------------------
# shell_command


async def shell_command(
    command: str,
    workdir: str = ".",
    timeout_seconds: float = 60,
    *,
    ctx: ToolContext,
) -> str:
    """Run a bash command in the workspace and return its exit code and output.

    The command runs with `bash -c` (not a login shell); stdout and stderr are
    combined. A nonzero exit code is reported, not treated as a failure. There
    is no stdin. Background processes still running when the command ends are
    killed, so start nothing meant to outlive the call. Very long output is
    cut in the middle.

    Args:
        command: The bash command line, e.g. "pytest -q tests/test_x.py".
        workdir: Directory to run in, relative to the workspace root.
        timeout_seconds: Kill the command if it runs longer than this many seconds.
        ctx: The call context (supplied by the executor, not by the model).
    """
    if not command.strip():
        raise ToolError("The command is empty; pass the bash command line to run")
    if timeout_seconds <= 0:
        raise ToolError(f"timeout_seconds must be greater than 0, got {timeout_seconds:g}")
    cwd = resolve_in_workspace(ctx.workspace, workdir, must_exist=True)
    if not cwd.is_dir():
        raise ToolError(f"workdir '{workdir}' is not a directory")

    loop = asyncio.get_running_loop()
    started = loop.time()
    capture = _OutputCapture(max(2 * ctx.output_limit, 4096))
    try:
        transport, protocol = await loop.subprocess_exec(
            lambda: _CommandProtocol(capture),
            "bash",
            "-c",
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=_command_env(),
            # Its own session (and process group) lets us kill everything the
            # command started, not just bash.
            start_new_session=True,
        )
    except OSError as exc:
        raise ToolError(f"The command could not be started: {exc}") from None

    pgid = transport.get_pid()
    timed_out = False
    try:
        deadline = started + timeout_seconds
        while not protocol.exited.is_set():
            remaining = deadline - loop.time()
            if remaining <= 0:
                timed_out = True
                break
            await _wait_event(protocol.exited, min(_HEARTBEAT_INTERVAL, remaining))
            ctx.heartbeat()
        if timed_out:
            _signal_group(pgid, signal.SIGTERM)
            await _wait_event(protocol.exited, _TERM_GRACE)
        else:
            await _wait_event(protocol.output_closed, _DRAIN_GRACE)
    finally:
        # Runs on success, timeout and cancellation alike: whatever is left of
        # the process group dies here, so no call leaves processes behind. (A
        # group id is not reused while any member lives; once it is empty,
        # reuse within this second would need the pid space to wrap around.)
        _signal_group(pgid, signal.SIGKILL)
        await _wait_event(protocol.exited, _REAP_TIMEOUT)
        await _wait_event(protocol.output_closed, _REAP_TIMEOUT)
        transport.close()
        ctx.metrics["duration_ms"] = int((loop.time() - started) * 1000)

    output = capture.text()
    if timed_out:
        ctx.metrics["timed_out"] = True
        partial, _ = truncate_output(output, max(ctx.output_limit // 2, 1000))
        raise ToolError(
            f"Command timed out after {timeout_seconds:g}s and was killed: {_preview(command)}\n"
            + (f"Output before it was killed:\n{partial}" if partial else "It printed nothing.")
        )

    returncode = transport.get_returncode()
    exit_code = returncode if returncode is not None else -1
    ctx.metrics["exit_code"] = exit_code
    header = f"exit code: {exit_code}"
    if exit_code < 0:
        header += f" (killed by signal {_signal_name(-exit_code)})"
    if capture.omitted:
        ctx.metrics["output_bytes"] = capture.total
        header += (
            f" (the command printed {capture.total} bytes; only the first and last parts are "
            "kept, narrow the command to see more)"
        )
    return f"{header}\n{output}" if output else f"{header}\n(no output)"


class _OutputCapture:
    """Head and tail of a byte stream, in bounded memory.

    The first ``cap`` bytes are kept as they come; after that only a rolling
    window of the last ``cap`` bytes, so a command printing gigabytes costs at
    most about three times ``cap``.
    """

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            # Trim in batches rather than per chunk to keep appends amortized O(1).
            if len(self.tail) > 2 * self.cap:
                del self.tail[: len(self.tail) - self.cap]

    @property
    def omitted(self) -> int:
        return self.total - len(self.head) - min(len(self.tail), self.cap)

    def text(self) -> str:
        tail = self.tail[-self.cap :] if len(self.tail) > self.cap else self.tail
        head_text = self.head.decode("utf-8", errors="replace")
        tail_text = bytes(tail).decode("utf-8", errors="replace")
        if self.omitted:
            return (
                f"{head_text}\n[... {self.omitted} bytes of output omitted ...]\n{tail_text}"
            )
        return head_text + tail_text


class _CommandProtocol(asyncio.SubprocessProtocol):
    """Feeds output into the capture and tells when bash exits and output ends.

    A protocol rather than ``asyncio.subprocess.Process``: its ``wait()`` also
    waits for the output pipe to close, which a background process can keep
    open long after bash has exited. And pushing chunks straight into the
    capture keeps no unbounded stream buffer.
    """

    def __init__(self, capture: _OutputCapture) -> None:
        self.capture = capture
        self.exited = asyncio.Event()
        self.output_closed = asyncio.Event()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self.capture.feed(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self.output_closed.set()

    def process_exited(self) -> None:
        self.exited.set()


async def _wait_event(event: asyncio.Event, timeout: float) -> bool:
    try:
        await asyncio.wait_for(event.wait(), timeout)
    except asyncio.TimeoutError:
        pass
    return event.is_set()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        # The group is already gone (PermissionError is what macOS reports for
        # a group whose members are all zombies).
        pass


def _command_env() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if not _looks_secret(name)}


def _looks_secret(name: str) -> bool:
    upper = name.upper()
    return upper.startswith(_SECRET_NAME_PREFIXES) or any(
        part in upper for part in _SECRET_NAME_PARTS
    )


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def _preview(command: str, limit: int = 200) -> str:
    one_line = " ".join(command.split())
    return one_line if len(one_line) <= limit else one_line[: limit - 3] + "..."


# --------------------------------------------------------------------------
# read_file / write_file


def read_file(file_path: str, offset: int = 1, limit: int = 2000, *, ctx: ToolContext) -> str:
    """Read a text file from the workspace, with line numbers.

    Each line is shown as its number, a tab, and its text. Read long files in
    pieces with offset and limit. Binary files and directories are refused.

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
    if path.is_dir():
        raise ToolError(
            f"'{file_path}' is a directory, not a file; use list_dir to see what it contains"
        )
    if not path.is_file():
        raise ToolError(f"'{file_path}' is not a regular file")

    shown: list[str] = []
    total = 0
    try:
        with path.open("rb") as raw:
            if b"\x00" in raw.read(_BINARY_SNIFF_BYTES):
                raise _binary_file_error(file_path)
            raw.seek(0)
            text = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline=None)
            for total, line in enumerate(text, start=1):
                if "\x00" in line:
                    raise _binary_file_error(file_path)
                if offset <= total < offset + limit:
                    clipped = _clip_line(line.rstrip("\n"), _MAX_LINE_CHARS)
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
    file, prefer apply_patch.

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
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
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


def _clip_line(line: str, limit: int) -> str:
    if len(line) <= limit:
        return line
    return line[:limit] + f" [... line cut, {len(line) - limit} more characters]"


# --------------------------------------------------------------------------
# apply_patch


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

    Args:
        patch: The whole patch text, from '*** Begin Patch' to '*** End Patch'.
        ctx: The call context (supplied by the executor, not by the model).
    """
    ops = _parse_patch(patch)
    workspace = ctx.workspace
    files = _VirtualFiles(workspace)
    summary: list[str] = []
    for op in ops:
        path = resolve_in_workspace(workspace, op.path)
        shown = workspace_relative(workspace, path)
        if op.kind == "add":
            if files.read(path, op.path) is not None:
                raise ToolError(
                    f"Cannot add '{op.path}': it already exists; use "
                    f"'*** Update File: {op.path}' to change it. No file was changed."
                )
            files.write(path, op.content)
            summary.append(f"A {shown}")
        elif op.kind == "delete":
            if files.read(path, op.path) is None:
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
            if dest != path and files.read(dest, op.move_to) is not None:
                raise ToolError(
                    f"Cannot move '{op.path}' to '{op.move_to}': the destination already "
                    "exists. No file was changed."
                )
            files.write(path, None)
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

    def read(self, path: Path, shown: str) -> str | None:
        if path in self._pending:
            return self._pending[path]
        if path.is_dir():
            raise ToolError(f"'{shown}' is a directory, not a file. No file was changed.")
        if not path.exists():
            return None
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ToolError(f"Could not read '{shown}': {exc.strerror or exc}") from None
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
        try:
            for path, content in writes:
                path.parent.mkdir(parents=True, exist_ok=True)
                # In place rather than via a temp file: keeps mode, owner and hard links.
                path.write_bytes(content.encode("utf-8"))
                source = self._mode_from.get(path)
                if source is not None and source.exists():
                    shutil.copymode(source, path)
            for path in deletes:
                if path.exists() or path.is_symlink():
                    path.unlink()
        except OSError as exc:
            shown = workspace_relative(self._workspace, Path(exc.filename or ""))
            raise ToolError(
                f"Writing the patched files failed at '{shown}': {exc.strerror or exc}"
            ) from None


# --------------------------------------------------------------------------
# grep_files / list_dir


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


def _sorted_entries(directory: Path) -> Iterator[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as scan:
            return iter(sorted(scan, key=lambda e: e.name))
    except OSError:
        return iter(())


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


# --------------------------------------------------------------------------
# registration

#: The built-in tools; read_file, grep_files and list_dir change nothing.
BUILTIN_TOOLS: list[Tool] = [
    Tool(shell_command, read_only=False),
    Tool(read_file, read_only=True),
    Tool(write_file, read_only=False),
    Tool(apply_patch, read_only=False),
    Tool(grep_files, read_only=True),
    Tool(list_dir, read_only=True),
]


def register_builtin_tools(registry: ToolRegistry) -> None:
    """Add the built-in tools to a registry.

    Safe to call more than once: the registry accepts the same functions again.

    Args:
        registry: Where to register them, e.g. ``agentloop.tools.default_registry``.
    """
    for builtin in BUILTIN_TOOLS:
        registry.register(builtin)
