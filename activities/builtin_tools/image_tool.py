"""The ``view_image`` built-in tool: an image from the workspace, shown to
the model as an image part of the tool's result (both providers)."""

from __future__ import annotations

import base64
import os
import stat

from agentloop.activities.builtin_tools.workspace import open_for_reading, resolve_in_workspace
from agentloop.shared.base.errors import ToolError
from agentloop.shared.base.messages import ImagePart
from agentloop.tools.tool_context import ToolContext

#: Largest image view_image sends (its base64 travels in the run's history).
MAX_IMAGE_BYTES = 768 * 1024

_SIGNATURES = [
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
]


def image_media_type(head: bytes) -> str | None:
    """The image type of a file from its first bytes: PNG, JPEG, GIF or WebP."""
    for signature, media_type in _SIGNATURES:
        if head.startswith(signature):
            return media_type
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def view_image(file_path: str, *, ctx: ToolContext) -> ImagePart:
    """Look at an image file from the workspace (PNG, JPEG, GIF or WebP, up to 768 KB).

    Args:
        file_path: Path of the image, relative to the workspace root.
        ctx: The call context (supplied by the executor, not by the model).
    """
    path = resolve_in_workspace(ctx.workspace, file_path, must_exist=True)
    try:
        fd, st = open_for_reading(ctx.workspace, path)
    except IsADirectoryError:
        raise ToolError(f"'{file_path}' is a directory, not an image") from None
    except OSError as exc:
        raise ToolError(f"Could not read '{file_path}': {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(st.st_mode):
            raise ToolError(f"'{file_path}' is not a regular file")
        if st.st_size > MAX_IMAGE_BYTES:
            raise ToolError(f"'{file_path}' is {st.st_size:,} bytes; view_image takes images up to "
                            f"{MAX_IMAGE_BYTES:,} bytes (make a smaller copy first)")
        with os.fdopen(fd, "rb", closefd=False) as file:
            data = file.read(MAX_IMAGE_BYTES + 1)
    finally:
        os.close(fd)
    media_type = image_media_type(data[:16])
    if media_type is None:
        raise ToolError(f"'{file_path}' is not a PNG, JPEG, GIF or WebP image")
    return ImagePart(media_type=media_type, data=base64.b64encode(data).decode())
