"""The built-in ``grep_files`` tool: a regular-expression search over the
workspace's text files, with RE2 (linear time, whatever the pattern)."""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

import re2

from agentloop.activities.builtin_tools.file_tools import _BINARY_SNIFF_BYTES, _sorted_entries
from agentloop.activities.builtin_tools.workspace import open_for_reading, resolve_in_workspace, workspace_relative
from agentloop.shared.base.errors import ToolError
from agentloop.shared.base.text import cut
from agentloop.tools.tool_context import ToolContext

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
    """Search file contents with a regular expression (RE2 syntax).

    Returns matching lines as "path:line: text", sorted by path. Each line is
    matched on its own. Skips .git, node_modules, binary files, files over
    10 MB and files with more than one hard link (the output says how many).
    RE2 is Python's re syntax without backreferences (\\1), lookahead or
    lookbehind ((?=, (?!, (?<=, (?<!), atomic groups and possessive
    quantifiers; \\w, \\d and \\s match ASCII only (use \\pL for any letter).

    Args:
        pattern: Regular expression in RE2 syntax, e.g. "def \\w+_handler" or "TODO|FIXME".
        path: File or directory to search, relative to the workspace root.
        include: Only search files whose name matches this glob, e.g. "*.py".
        max_results: Stop after this many matching lines.
        ctx: The call context (supplied by the executor, not by the model).
    """
    regex, per_line = _compile(pattern)
    if max_results < 1:
        raise ToolError(f"max_results must be 1 or more, got {max_results}")
    root = resolve_in_workspace(ctx.workspace, path, must_exist=True)
    real_root = Path(os.path.realpath(ctx.workspace))

    results: list[str] = []
    hard_linked: list[str] = []
    capped = False
    for file, real in _files_under(root, real_root, include):
        try:
            text = _searchable_text(ctx.workspace, real)
        except _HardLinked:
            hard_linked.append(workspace_relative(ctx.workspace, file))
            continue
        if text is None:
            continue
        for lineno, line in _matching_lines(regex, per_line, text):
            if len(results) == max_results:
                capped = True
                break
            shown = workspace_relative(ctx.workspace, file)
            results.append(f"{shown}:{lineno}: {cut(line.rstrip(), _GREP_MAX_LINE_CHARS)}")
        if capped:
            break

    where = f"'{path}'" + (f" (files matching {include!r})" if include else "")
    if not results:
        results.append(f"No matches for {_shown_pattern(pattern)} in {where}.")
    elif capped:
        results.append(
            f"[... results capped at {max_results} matches; narrow the pattern, path or "
            "include to see the rest ...]"
        )
    if hard_linked:
        count = len(hard_linked)
        names = ", ".join(hard_linked[:_HARD_LINKED_NAMES_SHOWN])
        if count > _HARD_LINKED_NAMES_SHOWN:
            names += f" and {count - _HARD_LINKED_NAMES_SHOWN} more"
        results.append(
            f"[{count} {'file was' if count == 1 else 'files were'} not searched because "
            f"{'it has' if count == 1 else 'they have'} more than one hard link (other names of "
            f"the same file may lie outside the workspace): {names}]"
        )
    return "\n".join(results)


class _HardLinked(Exception):
    """The file has more than one hard link; it is skipped, and counted."""


# RE2 matches in time linear in the text, whatever the pattern: Python's re
# can backtrack for minutes on a pattern like (a+)+$ while holding the GIL.
# never_nl keeps matches inside one line when a whole file is searched at once.
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
_RE2_OPTIONS.never_nl = True
_HARD_LINKED_NAMES_SHOWN = 5
_PATTERN_SHOWN_CHARS = 200

# What RE2 refuses of Python's syntax: its error message, and what to tell the model.
_UNSUPPORTED: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"invalid escape sequence: \\[1-9]"), "backreferences such as \\1 are not supported"),
    # RE2 takes (?P<name>...) but no other (?P form; Python's other one is (?P=name).
    (re.compile(r"invalid perl operator: \(\?P$"),
     "named backreferences such as (?P=name) are not supported"),
    (re.compile(r"invalid perl operator: \(\?[=!]"), "lookahead ((?=...) and (?!...)) is not supported"),
    (re.compile(r"invalid perl operator: \(\?<[=!]"), "lookbehind ((?<=...) and (?<!...)) is not supported"),
    (re.compile(r"invalid perl operator: \(\?>"), "atomic groups ((?>...)) are not supported"),
    (re.compile(r"invalid perl operator: \(\?\("), "conditionals ((?(1)...|...)) are not supported"),
    (re.compile(r"bad repetition operator: (?:[*+?]|\{[\d,]*\})\+"),
     "possessive quantifiers such as a++ are not supported"),
    (re.compile(r"invalid escape sequence: \\Z"), "\\Z is not supported; use $ for the end of the line"),
    (re.compile(r"invalid repetition size"), "counted repetitions go up to {1000}"),
]


def _compile(pattern: str) -> tuple[re2._Regexp, bool]:
    """The compiled pattern, and whether it must be run line by line.

    A whole file is searched at once in multi-line mode (^ and $ at line
    ends), which is far faster than a call per line; only \\A and \\z, which
    mean the start and end of the searched text, need a search per line.
    """
    try:
        regex = re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as exc:
        raise _regex_error(pattern, exc) from None
    if "\\A" in pattern or "\\z" in pattern:
        return regex, True
    return re2.compile("(?m)" + pattern, _RE2_OPTIONS), False


def _regex_error(pattern: str, exc: re2.error) -> ToolError:
    reason = exc.args[0] if exc.args else str(exc)
    if isinstance(reason, bytes):
        reason = reason.decode("utf-8", errors="replace")
    for matcher, unsupported in _UNSUPPORTED:
        if matcher.search(reason):
            return ToolError(
                f"Invalid regex {_shown_pattern(pattern)}: {unsupported}. grep_files uses RE2 "
                "syntax (no backreferences or lookaround); rewrite the pattern without it"
            )
    # RE2 quotes the offending part of the pattern, which may be all of it.
    reason = cut(reason, _PATTERN_SHOWN_CHARS)
    return ToolError(f"Invalid regex {_shown_pattern(pattern)}: {reason}")


def _shown_pattern(pattern: str) -> str:
    if len(pattern) <= _PATTERN_SHOWN_CHARS:
        return repr(pattern)
    return repr(pattern[:_PATTERN_SHOWN_CHARS]) + f" [... {len(pattern)} characters]"


def _matching_lines(regex: re2._Regexp, per_line: bool, text: bytes) -> Iterator[tuple[int, str]]:
    """Numbered lines of ``text`` (UTF-8, newlines normalised to \\n) that match."""
    if not text:
        return
    # The text's final newline ends the last line; it does not start another.
    end = len(text) - 1 if text.endswith(b"\n") else len(text)
    if per_line:
        for lineno, line in enumerate(text[:end].split(b"\n"), start=1):
            if regex.search(line):
                yield lineno, line.decode("utf-8")
        return
    pos = 0
    lineno = 1
    counted = 0
    while pos <= end:
        found = regex.search(text, pos, end)
        if found is None:
            return
        start = found.start()
        line_start = text.rfind(b"\n", 0, start) + 1
        line_end = text.find(b"\n", start, end)
        if line_end == -1:
            line_end = end
        lineno += text.count(b"\n", counted, line_start)
        counted = line_start
        yield lineno, text[line_start:line_end].decode("utf-8")
        pos = line_end + 1


def _files_under(
    root: Path, workspace_root: Path, include: str | None
) -> Iterator[tuple[Path, Path]]:
    """Files to search under ``root``, in path order (depth first, by name):
    the path to show, and the real path to open (a symlink's target)."""
    if not root.is_dir():
        yield root, root
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
            yield file, target
        elif entry.is_file(follow_symlinks=False):
            yield file, file


def _glob_matches(full: str, name: str, workspace_root: Path, include: str) -> bool:
    if "/" not in include:
        return fnmatch.fnmatch(name, include)
    try:
        rel = Path(full).relative_to(workspace_root).as_posix()
    except ValueError:
        rel = full
    return fnmatch.fnmatch(rel, include)


def _searchable_text(workspace: Path, file: Path) -> bytes | None:
    """The file as UTF-8 with newlines normalised to \\n, or None for binary,
    huge, unreadable or irregular files.

    Raises:
        _HardLinked: The file has more than one hard link.
    """
    try:
        fd, st = open_for_reading(workspace, file)
    except (OSError, ToolError):
        return None
    with open(fd, "rb") as raw:
        # Checked on the open descriptor: what is read is what was checked.
        if not stat.S_ISREG(st.st_mode) or st.st_size > _GREP_MAX_FILE_BYTES:
            return None
        if st.st_nlink > 1:
            raise _HardLinked
        try:
            data = raw.read(_GREP_MAX_FILE_BYTES + 1)
        except OSError:
            return None
    if len(data) > _GREP_MAX_FILE_BYTES or b"\x00" in data[:_BINARY_SNIFF_BYTES]:
        return None
    text = data.decode("utf-8", errors="replace")
    # Universal newlines, as read_file uses, so line numbers agree with it.
    return text.replace("\r\n", "\n").replace("\r", "\n").encode("utf-8")
