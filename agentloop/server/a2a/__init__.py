"""Every registered agent as an A2A agent: its card, ``SendMessage`` and
``SendStreamingMessage`` (``message/send``, ``message/stream``), tasks that are
runs (docs/agent-protocols.md)."""
