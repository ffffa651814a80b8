"""Every registered agent as an MCP tool, with durable Tasks
(``io.modelcontextprotocol/tasks``): ``/mcp`` on ``agentloop serve`` and
``agentloop mcp-serve --stdio``. The pure mapping is in ``mapping.py``, the
MCP server in ``service.py``, the HTTP door in ``door.py``."""
