"""Event streams: one Temporal reader per run shared by its listeners (hub), and the SSE framing (sse)."""
