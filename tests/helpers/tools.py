"""Tool doubles and what tools read: a GIL-hogging sync tool, a tool
context, a tiny PNG and a tool result that carries it."""

from __future__ import annotations

import base64
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from agentloop.shared.base.messages import ImagePart, Message, ToolResultPart
from agentloop.tools.tool_context import ToolContext

#: A line the regex in :func:`hog_tool` backtracks over for a long time.
HOG_LINE = "a" * 28 + "!"

#: A 1x1 transparent PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=")
PNG_B64 = base64.b64encode(PNG).decode()


def ctx_for(workspace: Path, **kwargs: Any) -> ToolContext:
    """A ToolContext on ``workspace``."""
    return ToolContext(workspace=workspace, **kwargs)


def hog_tool(name: str = "hog") -> Any:
    """A sync tool that notes its pid (and a grandchild's), then spins in C
    code holding the GIL; it notes 'done' if it ever finishes."""

    def hog(ctx: ToolContext) -> str:
        """Backtracks for a long time."""
        sleeper = subprocess.Popen(["sleep", "300"])
        (ctx.workspace / f"{ctx.call_id or name}.sleeper").write_text(str(sleeper.pid))
        (ctx.workspace / f"{ctx.call_id or name}.pid").write_text(str(os.getpid()))
        re.search(r"(a+)+$", HOG_LINE)
        (ctx.workspace / f"{ctx.call_id or name}.done").write_text("done")
        return "finished"

    hog.__name__ = name
    return hog


def image_tool_message() -> Message:
    """A view_image result that carries :data:`PNG`."""
    image = ImagePart(media_type="image/png", data=PNG_B64)
    return Message(role="tool", content=[ToolResultPart(id="c1", name="view_image", content="(attached)",
                                                        images=[image])])
