"""Model providers: one adapter per wire format (OpenAI, Anthropic, the scripted
demo model), what they share, and the resolver that picks one by model name.

Providers never import tool code (tool sources, built-in tools, the shell
sandbox, ``agentloop.tools``); a contract in ``pyproject.toml`` keeps it so.
"""
