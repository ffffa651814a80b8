"""Built-in tools of a coding agent, confined to the workspace root.

``shell_command``, ``read_file``, ``write_file``, ``apply_patch``,
``grep_files``, ``list_dir`` and ``view_image``. Every path argument goes through
:func:`~agentloop.activities.builtin_tools.workspace.resolve_in_workspace`, so none of them reads or
writes outside ``ToolContext.workspace``; files are opened without following
symlinks, files with more than one hard link are not read, and writes
replace files rather than writing into them, so a hard link cannot carry a
read or a write out of the workspace either. The docstrings of the tool functions
are what the model reads: their summary becomes the tool's description and
their ``Args:`` entries the parameters' descriptions.

Register them with :func:`register_builtin_tools` (or take
:data:`BUILTIN_TOOLS`)::

    from agentloop.tools.registry import default_registry
    from agentloop.activities.builtin_tools import register_builtin_tools

    register_builtin_tools(default_registry)
"""

from agentloop.activities.builtin_tools.file_tools import list_dir, read_file, write_file
from agentloop.activities.builtin_tools.grep_tool import grep_files
from agentloop.activities.builtin_tools.image_tool import view_image
from agentloop.activities.builtin_tools.patch_tool import apply_patch
from agentloop.activities.builtin_tools.shell_tool import shell_command
from agentloop.tools.registry import Tool, ToolRegistry

__all__ = [
    "BUILTIN_TOOLS",
    "apply_patch",
    "grep_files",
    "list_dir",
    "read_file",
    "register_builtin_tools",
    "shell_command",
    "view_image",
    "write_file",
]


#: The built-in tools; read_file, grep_files and list_dir change nothing.
#: shell_command is async (its command runs in its own process group); the
#: others are plain functions that run in a child process per call, killed
#: on timeout, so no file or pattern can stall the worker.
BUILTIN_TOOLS: list[Tool] = [
    Tool(shell_command, read_only=False),
    Tool(read_file, read_only=True, isolated=True),
    Tool(write_file, read_only=False, isolated=True),
    Tool(apply_patch, read_only=False, isolated=True),
    Tool(grep_files, read_only=True, isolated=True),
    Tool(list_dir, read_only=True, isolated=True),
    Tool(view_image, read_only=True, isolated=True),
]


def register_builtin_tools(registry: ToolRegistry) -> None:
    """Add the built-in tools to a registry.

    Safe to call more than once: the registry accepts the same functions again.

    Args:
        registry: Where to register them, e.g. ``agentloop.tools.registry.default_registry``.
    """
    for builtin in BUILTIN_TOOLS:
        registry.register(builtin)
