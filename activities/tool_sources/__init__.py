"""Tool sources beyond the registry: MCP servers and OpenAPI documents, whose
operations become tools. Tool code: never imports the providers.
"""
