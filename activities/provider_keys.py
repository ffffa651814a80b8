"""The environment variables that hold provider credentials.

Apart from the providers, so that tool code (the shell sandbox strips them)
and the worker wiring read them without importing a provider.
"""

#: Environment variables that hold provider credentials: only a worker that
#: calls models may have them (role ``models`` or ``all``); a tools-only worker
#: refuses to start with any of them set, and shell commands never get them.
PROVIDER_KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
