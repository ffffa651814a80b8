"""Confinement of built-in tools to a workspace root, and output truncation.

Every path a model passes to a built-in tool goes through
:func:`resolve_in_workspace`, so the tools cannot read or write outside the
workspace, neither with ``..`` nor through symlinks. The files themselves are
then opened with :func:`open_for_reading`, :func:`replace_file` and
:func:`remove_file`, which walk from the workspace root one directory at a
time without following symlinks (so a path swapped for a symlink after it was
resolved is refused, not followed) and never write into a file in place: a
hard link to a file outside the workspace is a second name for that file's
data, and writing through it would change the outside file.
:func:`~agentloop.shared.base.text.cut` bounds what the model sees of a tool's output.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from agentloop.shared.base.errors import ToolError, preview

__all__ = [
    "hard_link_error",
    "workspace_problem",
    "worker_directories",
    "open_for_reading",
    "remove_file",
    "replace_file",
    "resolve_in_workspace",
    "workspace_relative",
]


#: Directories no run may use as its workspace, nor anything inside them:
#: the system's own. (``/proc``, ``/sys`` and ``/dev``: see
#: :func:`agentloop.shared.definition.spec.system_workspace_problem`.)
SYSTEM_TREES = ("/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/run",
                "/var/run", "/var/lib", "/var/log", "/var/cache", "/var/spool", "/var/mail")
#: Directories no run may use as its workspace themselves (a run may work
#: in a directory inside them): each holds the files of many.
SHARED_DIRS = ("/", "/home", "/root", "/var", "/tmp", "/var/tmp", "/opt", "/srv", "/mnt", "/media", "/usr/local")


def worker_directories() -> dict[str, Path]:
    """The directories this worker itself uses, by what they are: a
    workspace above one of them would give its commands the worker's code,
    its data or its keys. Resolved."""
    import sys

    dirs = {"its working directory": Path.cwd(), "its Python environment": Path(sys.prefix),
            "its Python installation": Path(sys.base_prefix)}
    data = os.environ.get("AGENTLOOP_HOME") or str(Path.home() / ".agentloop")
    dirs["its data directory"] = Path(data)
    return {what: Path(os.path.realpath(path)) for what, path in dirs.items()}


def workspace_problem(
    workspace: Path, *, default: Path, roots: list[Path] | None, home: Path | None = None,
    worker_dirs: dict[str, Path] | None = None,
) -> str | None:
    """Why a run may not use ``workspace`` (resolved) on this worker, as a
    sentence, or None.

    Refused: ``/`` and the directories shared by many (:data:`SHARED_DIRS`),
    anything in the system's (:data:`SYSTEM_TREES`), the worker's home and
    its ancestors, and any ancestor of a directory the worker uses (its
    working directory, its Python environment, its data directory), unless
    it is the worker's own default workspace (``default``, what the
    operator started it with). With ``roots``, the workspace must lie
    strictly inside one of them (a root holds the workspaces of many runs),
    or be the worker's default workspace.
    """
    ws = Path(os.path.realpath(workspace))
    default = Path(os.path.realpath(default))
    home = Path(os.path.realpath(home if home is not None else Path.home()))
    text = str(ws)
    home_problem = (f"workspace {workspace} is {'the' if ws == home else 'above the'} home directory of the "
                    f"worker's user ({home}), which holds its keys and configuration; use a project directory "
                    "inside it")
    if ws == home:
        return home_problem
    if text in SHARED_DIRS:
        return (f"workspace {workspace} is {'the root directory' if text == '/' else 'a directory many share'}: "
                "a run's commands could read and write everything in it; use a project directory inside it")
    if ws in home.parents:
        return home_problem
    for tree in SYSTEM_TREES:
        if text == tree or text.startswith(tree + "/"):
            return f"workspace {workspace} is in {tree}, a system directory; use a directory of your project"
    if ws != default:
        for what, path in (worker_dirs if worker_dirs is not None else worker_directories()).items():
            if ws in path.parents:
                return (f"workspace {workspace} holds the worker's own files ({what}, {path}): its commands "
                        "could change the worker; use a directory beside them")
    if roots and ws != default and not any(root in ws.parents for root in roots):
        inside = ws in roots
        return (f"workspace {workspace} is {'one of' if inside else 'outside'} the directories this worker allows "
                f"(AGENTLOOP_WORKSPACE_ROOTS or the worker's workspace: {':'.join(map(str, roots))})"
                + ("; a root holds the workspaces of many runs: use a directory inside it" if inside else
                   "; use a directory inside one of them"))
    return None


def resolve_in_workspace(
    workspace: Path, path: str, *, must_exist: bool = False, follow_final: bool = True
) -> Path:
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
        follow_final: Follow a symlink in the final component. With False the
            path's directory is resolved but a final symlink is kept as is, so
            an operation on the path (deleting it) acts on the link itself.

    Returns:
        The absolute path with symlinks resolved; it lies inside the
        workspace's resolved root.

    Raises:
        ToolError: The path is outside the workspace, leads outside it through
            a symlink, is malformed, or (with ``must_exist``) does not exist.
    """
    if "\x00" in path:
        raise ToolError(f"Path {path!r} contains a NUL character; paths cannot contain NUL")
    _check_lengths(workspace, path)
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
    if follow_final:
        real = Path(os.path.realpath(candidate))
    elif normalized in (given_root, real_root):
        real = real_root
    else:
        real = Path(os.path.realpath(normalized.parent)) / normalized.name
    if not _is_within(real, real_root):
        raise ToolError(
            f"Path '{path}' leads through a symlink to {real}, which is outside the "
            f"workspace {given_root}; use a path inside it"
        )
    if must_exist and not (real.exists() if follow_final else os.path.lexists(real)):
        raise ToolError(
            f"Path '{path}' does not exist in the workspace {given_root} "
            "(relative paths are resolved against the workspace)"
        )
    return real


#: Longest file name and path (bytes) where the system will not say (Linux's).
_NAME_MAX, _PATH_MAX = 255, 4096


def _check_lengths(workspace: Path, path: str) -> None:
    """Refuse a name or a path longer than the filesystem takes, in the
    tools' words (not ``File name too long`` with the whole workspace path)."""
    try:
        name_max = os.pathconf(workspace, "PC_NAME_MAX")
        path_max = os.pathconf(workspace, "PC_PATH_MAX")
    except (OSError, ValueError):
        name_max, path_max = _NAME_MAX, _PATH_MAX
    longest = max(path.split("/"), key=lambda part: len(part.encode("utf-8", "surrogatepass")))
    size = len(longest.encode("utf-8", "surrogatepass"))
    if size > name_max:
        raise ToolError(
            f"Path '{preview(path)}' has a name of {size:,} bytes ('{preview(longest, 40)}'); file names are at "
            f"most {name_max} bytes here: use a shorter name")
    full = len(os.path.join(os.path.abspath(workspace), path).encode("utf-8", "surrogatepass"))
    if full > path_max:
        depth = path.count("/") + 1
        raise ToolError(
            f"Path '{preview(path)}' ({depth:,} levels) is {full:,} bytes long with the workspace's; paths are at "
            f"most {path_max:,} bytes here: use a shorter path")


def hard_link_error(shown: str, links: int, tool: str) -> ToolError:
    """The refusal for a file with more than one hard link.

    Another name of the same file may lie outside the workspace, where the
    workspace's confinement cannot see it, so its content is not read.
    """
    return ToolError(
        f"'{shown}' has {links} hard links (the same file under other names, possibly outside "
        f"the workspace), so {tool} does not read it"
    )


def open_for_reading(workspace: Path, path: Path) -> tuple[int, os.stat_result]:
    """Open a file that :func:`resolve_in_workspace` returned, for reading.

    Every directory from the workspace root down and the file itself are
    opened without following symlinks, and the file is opened non-blocking so
    a FIFO cannot hang the call. The checks that matter (a regular file, how
    many hard links) belong on the returned ``fstat`` of the open descriptor,
    not on the path, which may have changed since.

    Args:
        workspace: The workspace root.
        path: A resolved path inside it.

    Returns:
        The open descriptor (the caller closes it) and its ``fstat``.

    Raises:
        ToolError: A symlink appeared in the path after it was resolved.
        OSError: The file could not be opened (FileNotFoundError when it is
            gone).
    """
    with _parent_directory(workspace, path) as (dir_fd, name):
        fd = _no_follow(
            path, os.open, name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
            dir_fd=dir_fd,
        )
    try:
        return fd, os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise


def replace_file(workspace: Path, path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Write a file by writing a temporary file beside it and renaming it over.

    Never writes into an existing file: if the file has other hard links
    (possibly outside the workspace) they keep the old content, and the
    workspace's name gets a new file. Missing parent directories are created.
    The new file keeps the old one's permission bits, or gets ``mode``.

    Args:
        workspace: The workspace root.
        path: A resolved path inside it.
        data: The complete new content.
        mode: Permission bits for the new file; the replaced file's by
            default, or the usual 0o666 less the umask for a new one.

    Raises:
        IsADirectoryError: ``path`` is a directory.
        NotADirectoryError, FileExistsError: Part of the parent path is a file.
        ToolError: A symlink appeared in the path after it was resolved.
        OSError: Any other failure; nothing was changed then.
    """
    with _parent_directory(workspace, path, create=True) as (dir_fd, name):
        try:
            old = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            old = None
        if old is not None and stat.S_ISDIR(old.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if mode is None and old is not None and stat.S_ISREG(old.st_mode):
            mode = stat.S_IMODE(old.st_mode)
        # A short name: the target's own name may already be at the length limit.
        temp = f".agentloop-{secrets.token_hex(6)}.tmp"
        fd = os.open(
            temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666,
            dir_fd=dir_fd,
        )
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                if mode is not None:
                    os.fchmod(fd, mode)
            finally:
                os.close(fd)
            os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=dir_fd)
            raise


def remove_file(workspace: Path, path: Path) -> None:
    """Delete the name ``path``: a symlink itself, never its target; for a
    file with other hard links, only this name (the data stays for the others).

    Raises:
        IsADirectoryError: ``path`` is a directory.
        ToolError: A symlink appeared in the path after it was resolved.
        OSError: Any other failure.
    """
    with _parent_directory(workspace, path) as (dir_fd, name):
        os.unlink(name, dir_fd=dir_fd)


@contextlib.contextmanager
def _parent_directory(
    workspace: Path, path: Path, *, create: bool = False
) -> Iterator[tuple[int, str]]:
    """A descriptor of ``path``'s directory, reached from the workspace root
    without following symlinks, and the final name.

    ``path`` comes from :func:`resolve_in_workspace`, so no component of it
    is a symlink unless one was put there since: then the walk fails rather
    than following it out of the workspace.
    """
    real_root = Path(os.path.realpath(workspace))
    try:
        parts = path.relative_to(real_root).parts
    except ValueError:
        raise ToolError(f"'{path}' is outside the workspace {workspace}") from None
    if not parts:
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    dir_fd = os.open(real_root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, dir_fd=dir_fd)
            flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
            child = _no_follow(path, os.open, part, flags, dir_fd=dir_fd)
            os.close(dir_fd)
            dir_fd = child
        yield dir_fd, parts[-1]
    finally:
        os.close(dir_fd)


def _no_follow(path: Path, call: Callable[..., int], name: str, flags: int, *, dir_fd: int) -> int:
    """Run an ``O_NOFOLLOW`` open; a symlink met there becomes a ToolError."""
    try:
        return call(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        # With O_DIRECTORY, Linux reports a symlink as ENOTDIR, not ELOOP.
        if exc.errno == errno.ENOTDIR and flags & os.O_DIRECTORY:
            try:
                is_link = stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
            except OSError:
                is_link = False
            if not is_link:
                raise
        elif exc.errno != errno.ELOOP:
            raise
        raise ToolError(
            f"'{path}' changed while it was being opened (a symlink took the place of part of "
            "its path); nothing was read or written"
        ) from None


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


def _is_within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents
