"""``agentloop serve``: an HTTP API, AG-UI streams and a web console over a
Temporal namespace's agent runs (docs/http-api.md).

Room rules: the server is a client of Temporal. It imports the shared data
and the client, never workflows, activities or the CLI.

The map, top down (pyproject's layers contract keeps imports going down):
``app`` assembles the routes; ``runs``, ``threads``, ``console`` (the web
console, its script in ``static/``) and ``codec`` (the codec server) are
routes; ``agui/`` the AG-UI route and its event mapping; ``deps`` the
request dependencies; ``access/`` tokens, scopes and the Host/Origin doors;
``streams/`` one event reader per run and the SSE framing; ``settings`` and
``problems`` (RFC 9457 answers) at the bottom.
"""

from agentloop.server.app import create_app
from agentloop.server.deps import ServerState
from agentloop.server.settings import ApiToken, ServerSettings, parse_tokens

__all__ = ["ApiToken", "ServerSettings", "ServerState", "create_app", "parse_tokens"]
