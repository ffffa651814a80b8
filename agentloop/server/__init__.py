"""``agentloop serve``: an HTTP API, AG-UI streams and a web console over a
Temporal namespace's agent runs (docs/http-api.md).

Room rules: the server is a client of Temporal. It imports the shared data
and the client, never workflows, activities or the CLI.
"""

from agentloop.server.app import create_app
from agentloop.server.deps import ServerState
from agentloop.server.settings import ApiToken, ServerSettings, parse_tokens

__all__ = ["ApiToken", "ServerSettings", "ServerState", "create_app", "parse_tokens"]
