"""Facts about tools that more than one side checks, each written once."""

from __future__ import annotations

import re

#: A tool's name, as the providers accept it (a sub-agent's name is a tool
#: name too).
TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

#: Most characters of a tool's output that reach the model, by default
#: (``AgentSpec.tool_output_limit``); the rest is cut with a note.
TOOL_OUTPUT_LIMIT = 16_000
