"""MCP tool sources without a server: names and settings, the servers file,
result content (runs against real MCP servers: tests/server/tools/test_mcp_tools.py)."""


from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentloop.activities.tool_sources.mcp_tools import McpServers, content_text, split_name, tool_name
from agentloop.shared.base.errors import UserError


def test_names_and_settings() -> None:
    assert tool_name("notes", "who.am.i") == "notes__who_am_i"
    assert len(tool_name("s", "x" * 100)) == 64
    assert split_name("notes__add") == ("notes", "add") and split_name("add") is None
    with pytest.raises(UserError, match="'a__b' is not allowed"):
        McpServers({"a__b": {"command": "x"}})
    with pytest.raises(UserError, match="give either command .* or url"):
        McpServers({"both": {"command": "x", "url": "http://h"}})


def test_servers_file(tmp_path: Path) -> None:
    path = tmp_path / "mcp.yaml"
    path.write_text("mcp_servers:\n  notes:\n    command: python\n    args: [-m, notes]\n")
    servers = McpServers.from_env({"AGENTLOOP_MCP_SERVERS": str(path)})
    assert servers.servers["notes"].args == ["-m", "notes"] and servers.owns("notes__x")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(UserError, match=r"bad.json is not valid json"):
        McpServers.from_file(tmp_path / "bad.json")
    with pytest.raises(UserError, match="cannot read the MCP servers file"):
        McpServers.from_file(tmp_path / "missing.json")


def test_content_text() -> None:
    from mcp.types import CallToolResult, ImageContent, TextContent

    assert content_text(CallToolResult(content=[TextContent(type="text", text="a"),
                                                ImageContent(type="image", data="", mime_type="image/png")])) \
        == "a\n[image image/png]"
    assert json.loads(content_text(CallToolResult(content=[], structured_content={"n": 1}))) == {"n": 1}
