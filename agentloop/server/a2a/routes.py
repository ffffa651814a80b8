"""The A2A door of ``agentloop serve``: ``/a2a/{agent}`` (JSON-RPC, with
Server-Sent Events for streams) and ``/a2a/{agent}/.well-known/agent-card.json``,
behind the same host, origin, token and size checks as the rest."""

from __future__ import annotations

import json
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.background import BackgroundTask
from starlette.requests import Request as StarletteRequest

from agentloop.server.a2a.card import agent_card
from agentloop.server.a2a.handler import RunTasks
from agentloop.server.access.auth import Caller, authorize
from agentloop.server.deps import server_state
from agentloop.server.problems import Problem, problem_responses
from agentloop.server.settings import Scope

# Described by each agent's card, not by the JSON API's OpenAPI document.
router = APIRouter(tags=["a2a"], responses=problem_responses(401, 403, 404), include_in_schema=False)

#: JSON-RPC methods that only read (a ``read`` token may call them); every other one acts.
STREAM_METHODS = frozenset({"SendStreamingMessage", "SubscribeToTask", "message/stream", "tasks/resubscribe"})
READ_METHODS = frozenset({"GetTask", "SubscribeToTask", "ListTasks", "GetExtendedAgentCard", "tasks/get",
                          "tasks/resubscribe", "agent/getAuthenticatedExtendedCard"})


class _Context(DefaultServerCallContextBuilder):
    """The call context: the SDK's, plus the agent of the path and the caller."""

    def build(self, request: StarletteRequest) -> ServerCallContext:
        context = super().build(request)
        context.state["agent"] = request.state.a2a_agent
        context.state["caller"] = request.state.a2a_caller
        return context


def _dispatcher(request: Request) -> JsonRpcDispatcher:
    app_state = request.app.state
    found = getattr(app_state, "a2a_dispatcher", None)
    if found is None:
        found = app_state.a2a_dispatcher = JsonRpcDispatcher(
            RunTasks(server_state(request)), context_builder=_Context(), enable_v0_3_compat=True)
    return found


def _admit(request: Request, agent: str, needed: Scope) -> Caller:
    """The caller, if its token has scope ``needed`` and may start ``agent``,
    and ``agent`` is registered.

    Raises:
        Problem: 401, 403, or 404 for an agent not registered.
    """
    state = server_state(request)
    caller = authorize(state.settings, request, needed)
    if caller.agents is not None and agent not in caller.agents:
        raise Problem(403, "Agent not allowed", f"token {caller.name!r} may use only "
                      f"{', '.join(caller.agents)}; this is agent {agent[:80]!r}")
    if agent not in state.settings.agents:
        known = ", ".join(sorted(state.settings.agents)) or "none (start the server with --agent NAME=FILE)"
        raise Problem(404, "Unknown agent", f"no agent {agent[:80]!r} is registered with this server; "
                      f"registered: {known}")
    return caller


def rpc_method(body: bytes) -> tuple[str | None, tuple[int, str] | None]:
    """The JSON-RPC method a body names (None when it names none: then it
    needs ``act``), and the JSON-RPC error of a body that cannot be read, if
    so: nested past the parser's depth, or a method that is not a string
    (other bad JSON is the dispatcher's to answer)."""
    try:
        parsed = json.loads(body or b"null")
    except RecursionError:
        return None, (-32700, "Parse error: the body nests arrays or objects too deeply")
    except ValueError:
        return None, None
    method = parsed.get("method") if isinstance(parsed, dict) else None
    if method is not None and not isinstance(method, str):
        return None, (-32600, f"Invalid request: the method must be a string, not {type(method).__name__}")
    return method, None


@router.get("/a2a/{agent}/.well-known/agent-card.json")
async def card(agent: str, request: Request) -> Any:
    """The agent's A2A card: its skills, streaming, bearer auth when the server has tokens."""
    _admit(request, agent, "read")
    state = server_state(request)
    url = str(request.base_url).rstrip("/") + f"/a2a/{agent}"
    made = agent_card(agent, state.settings.agents[agent], url, tokens=bool(state.settings.tokens))
    return JSONResponse(agent_card_to_dict(made))


@router.post("/a2a/{agent}", response_class=Response)
async def rpc(agent: str, request: Request) -> Any:
    """A2A JSON-RPC: ``SendMessage``, ``SendStreamingMessage`` (SSE), ``GetTask``,
    ``CancelTask``, ``SubscribeToTask`` (SSE), and the v0.3 names
    (``message/send``, ``message/stream``, ``tasks/get``, ``tasks/cancel``, ``tasks/resubscribe``)."""
    method, unreadable = rpc_method(await request.body())
    needed: Scope = "read" if method in READ_METHODS else "act"
    caller = request.state.a2a_caller = _admit(request, agent, needed)
    if unreadable is not None:
        code, message = unreadable
        return JSONResponse({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}})
    request.state.a2a_agent = agent
    release = server_state(request).streams.take(caller.name) if method in STREAM_METHODS else None
    try:
        response = await _dispatcher(request).handle_requests(request)
    except BaseException:
        if release is not None:
            release()
        raise
    if release is not None:
        if isinstance(response, StreamingResponse) or hasattr(response, "body_iterator"):
            response.background = BackgroundTask(release)
        else:
            release()
    return response
