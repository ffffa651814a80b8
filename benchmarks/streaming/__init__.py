"""Streaming: the latency deltas add, and SSE readers held and fanned out through the gateway."""
