"""A remote A2A agent as a tool (``a2a:<url>``): an agentloop agent calls
another one served by ``agentloop serve``'s A2A door, with ``a2a-sdk``'s
client on the worker; the idempotency key makes a repeated call the same
remote run; a URL the worker does not list is refused."""

from __future__ import annotations

import contextlib
import json
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from a2a.server.request_handlers.response_helpers import agent_card_to_dict

from agentloop import AgentClient
from agentloop.activities.tool_sources import a2a_tools
from agentloop.server import ServerSettings, parse_tokens
from agentloop.server.a2a.card import agent_card
from agentloop.shared.base.errors import UserError
from agentloop.shared.runs.result import RunError
from agentloop.testing import call, calls, reply, script
from tests.helpers import agents
from tests.helpers.agents import echo_results
from tests.helpers.http_api import serve

TOKEN = "remote-secret-0123456789"


async def test_an_agent_calls_a_remote_a2a_agent(agent_client: AgentClient, worker, monkeypatch) -> None:
    remote = agents.spec(script(reply("remote says 42")), name="oracle", system_prompt="Knows the answer.")
    settings = ServerSettings(tokens=parse_tokens(f"caller:act:{TOKEN}:agents=oracle"), agents={"oracle": remote})
    async with worker(), serve(agent_client, settings) as api:
        url = f"{api.url}/a2a/oracle"
        monkeypatch.setenv(a2a_tools.TOKENS_ENV, f"{url}={TOKEN}")
        name = a2a_tools.tool_name(url)
        definition = await a2a_tools.definition(f"a2a:{url}")
        assert definition.name == name and "Knows the answer." in definition.description
        assert definition.parameters["required"] == ["message"]

        model = script(calls(call(name, {"message": "what is the answer?"})), echo_results)
        caller = agents.spec(model, name="asker", tools=[f"a2a:{url}"])
        result = await agent_client.run(caller, "ask the oracle")
        assert result.final_text == f"{name}:remote says 42"
        run_id = result.run_id
        # The remote's token stays on the worker: not in the caller's history, nor in its events.
        history = await agent_client.get_handle(run_id).workflow_handle.fetch_history()
        assert TOKEN.encode() not in b"".join(e.SerializeToString() for e in history.events)
        assert not [e async for e in agent_client.events(run_id) if TOKEN in e.model_dump_json()]
        # The remote run is keyed by the caller's run and call: sending the same call again is the same task.
        again, is_error = await a2a_tools.call(name, {"message": "what is the answer?"}, f"{run_id}:call_0_0")
        assert (again, is_error) == ("remote says 42", False)
        remote_runs = (await api.http.get("/v1/runs", params={"name": "oracle"},
                                          headers={"Authorization": f"Bearer {TOKEN}"})).json()["runs"]
        assert len(remote_runs) == 1

        monkeypatch.delenv(a2a_tools.TOKENS_ENV)
        other = agents.spec(script(reply("unused")), name=f"x{uuid.uuid4().hex[:4]}", tools=[f"a2a:{url}"])
        with pytest.raises(RunError) as refused:
            await agent_client.run(other, "go")
        causes, err = [], refused.value
        while err is not None:
            causes.append(str(err))
            err = err.__cause__
        assert any(f"list it in {a2a_tools.AGENTS_ENV}" in c for c in causes), causes


class _Recorder(BaseHTTPRequestHandler):
    """A remote agent whose card names another address (``card``), or the
    address it names (``seen`` records what reached it)."""

    card: bytes = b""
    seen: list[tuple[str, str, str | None]] = []

    def do_GET(self) -> None:  # noqa: N802
        self.seen.append(("GET", self.path, self.headers.get("Authorization")))
        self.send_response(200 if self.card else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.card)))
        self.end_headers()
        self.wfile.write(self.card)

    def do_POST(self) -> None:  # noqa: N802
        self.seen.append(("POST", self.path, self.headers.get("Authorization")))
        self.send_response(500)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def _listening(card: bytes) -> Iterator[tuple[str, list[tuple[str, str, str | None]]]]:
    handler = type("Handler", (_Recorder,), {"card": card, "seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler.seen
    finally:
        server.shutdown()
        server.server_close()


async def test_a_card_that_names_another_address_is_refused_and_nothing_reaches_it(monkeypatch) -> None:
    """A card is the remote's to write: one whose interface is another
    origin (a metadata service, the Temporal server's HTTP API) would have the
    worker POST there with the remote's token. Such a card is refused."""
    with _listening(b"") as (sink, reached):
        card = agent_card("oracle", agents.spec(name="oracle"), f"{sink}/api/v1/namespaces/default/workflows/x",
                          tokens=True)
        with _listening(json.dumps(agent_card_to_dict(card)).encode()) as (remote, _):
            url = f"{remote}/a2a/oracle"
            monkeypatch.setenv(a2a_tools.TOKENS_ENV, f"{url}={TOKEN}")
            with pytest.raises(UserError, match="sends calls to http://127.0.0.1:"):
                await a2a_tools.definition(f"a2a:{url}")
            with pytest.raises(UserError, match=f"listed in {a2a_tools.AGENTS_ENV} only"):
                await a2a_tools.call(a2a_tools.tool_name(url), {"message": "hi"}, "run:call")
    assert reached == []
