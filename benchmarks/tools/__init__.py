"""Tools: isolated tool calls, the shell sandbox's cost, and MCP calls."""
