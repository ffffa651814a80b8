"""Registered agents as A2A agents, driven by ``a2a-sdk``'s own client over
real HTTP (uvicorn on 127.0.0.1) against runs on the session's dev server:
the card, a stream to completion, an approval answered in the task, a
context carrying a thread, a cancel, a resubscribe, an idempotency key,
and tokens refused."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import InvalidParamsError
from google.protobuf import json_format, struct_pb2

from agentloop import AgentClient
from agentloop.server import ServerSettings, parse_tokens
from agentloop.shared.runs.search_attributes import AGENT_TENANT
from agentloop.testing import calls, reply, script
from tests.helpers import agents
from tests.helpers.agents import ASKING_TOOLS, awaiting, recording, user_texts, write
from tests.helpers.http_api import serve
from tests.helpers.runs import wait_state

OPS = "ops-secret-0123456789"
OTHER = "other-secret-0123456789"
READER = "read-secret-0123456789"

WORKING, INPUT, DONE, CANCELED = (pb.TASK_STATE_WORKING, pb.TASK_STATE_INPUT_REQUIRED,
                                  pb.TASK_STATE_COMPLETED, pb.TASK_STATE_CANCELED)


def message(text: str = "", *, data: Any = None, task_id: str = "", context_id: str = "",
            metadata: dict[str, Any] | None = None) -> pb.SendMessageRequest:
    parts = [pb.Part(text=text)] if text else []
    if data is not None:
        part = pb.Part()
        part.data.CopyFrom(json_format.ParseDict(data, struct_pb2.Value()))
        parts.append(part)
    made = pb.Message(message_id=uuid.uuid4().hex, role=pb.ROLE_USER, parts=parts, task_id=task_id,
                      context_id=context_id)
    if metadata:
        made.metadata.update(metadata)
    return pb.SendMessageRequest(message=made)


async def a2a_client(url: str, agent: str, token: str | None = None, *, streaming: bool = True) -> Any:
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"} if token else {}, timeout=60)
    return await create_client(f"{url}/a2a/{agent}", ClientConfig(httpx_client=http, streaming=streaming))


async def collect(responses: Any) -> list[pb.StreamResponse]:
    return [r async for r in responses]


def states(events: list[pb.StreamResponse]) -> list[int]:
    return [e.status_update.status.state for e in events if e.HasField("status_update")]


def answer_text(events: list[pb.StreamResponse]) -> str:
    """The answer artifact, rebuilt from its chunks as a client does."""
    text = ""
    for e in events:
        if e.HasField("artifact_update"):
            chunk = "".join(p.text for p in e.artifact_update.artifact.parts)
            text = text + chunk if e.artifact_update.append else chunk
    return text


async def test_card_and_a_stream_to_completion(agent_client: AgentClient, worker) -> None:
    model = script(reply("the answer is 42"), delta_seconds=0.05)
    spec = agents.spec(model, name="helper", system_prompt="Answers questions.\n\nMore.", tools=["read_file"],
                       stream_batch_seconds=0.01)
    async with worker(), serve(agent_client, ServerSettings(agents={"helper": spec})) as api:
        client = await a2a_client(api.url, "helper")
        card = client._card
        assert card.name == "helper" and card.description == "Answers questions."
        assert card.capabilities.streaming and card.skills[0].tags == ["read_file"]
        assert card.supported_interfaces[0].url == f"{api.url}/a2a/helper"
        assert not card.security_schemes  # no tokens, no auth

        events = await collect(client.send_message(message("what is the answer?")))
        assert events[0].HasField("task") and events[0].task.status.state == pb.TASK_STATE_SUBMITTED
        task_id = events[0].task.id
        assert task_id.startswith("run-") and events[0].task.context_id == task_id
        assert states(events)[0] == WORKING and states(events)[-1] == DONE
        assert answer_text(events) == "the answer is 42"
        chunks = [e.artifact_update for e in events if e.HasField("artifact_update")]
        assert len(chunks) >= 2 and not chunks[0].last_chunk and chunks[-1].last_chunk  # streamed, then whole

        task = await client.get_task(pb.GetTaskRequest(id=task_id))
        assert task.status.state == DONE and task.artifacts[0].parts[0].text == "the answer is 42"
        # The task is the run: the HTTP API reads the same run.
        assert (await api.http.get(f"/v1/runs/{task_id}")).json()["agent_name"] == "helper"
        await client.close()


async def test_an_approval_answered_in_the_task_and_a_resubscribe(agent_client: AgentClient, worker,
                                                                  workspace) -> None:
    model = script(calls(write("out.txt", "hi")), reply("wrote it"))
    spec = agents.spec(model, name="writer", default_permission="auto", tools=ASKING_TOOLS)
    async with worker(), serve(agent_client, ServerSettings(agents={"writer": spec})) as api:
        client = await a2a_client(api.url, "writer")
        events = await collect(client.send_message(message("write out.txt")))
        task_id = events[0].task.id
        assert states(events)[-1] == INPUT  # the stream ends where the task waits for input
        asked = events[-1].status_update.status.message
        data = json_format.MessageToDict(asked.parts[-1].data)
        assert (data["kind"], data["tool"], data["call_id"]) == ("approval", "write_file", "call_0_0")
        assert data["arguments"] == {"file_path": "out.txt", "content": "hi"}

        # A resubscribe (a client that reconnects) sees the task waiting, then the request again.
        resubscribed = client.subscribe(pb.SubscribeToTaskRequest(id=task_id))
        first = await anext(resubscribed)
        assert first.task.status.state == INPUT and first.task.id == task_id
        replayed = await collect(resubscribed)  # the past replayed; the stream ends where the task waits
        assert states(replayed)[-1] == INPUT and states(replayed).count(INPUT) == 1

        # A reply that answers nothing is refused with a sentence; the run still waits.
        with pytest.raises(InvalidParamsError, match="approve / deny / skip"):
            await collect(client.send_message(message("maybe", task_id=task_id, context_id=task_id)))
        answered = await collect(client.send_message(
            message(data={"decision": "approve", "reason": "fine"}, task_id=task_id, context_id=task_id)))
        assert states(answered)[-1] == DONE and answer_text(answered) == "wrote it"
        assert (workspace / "out.txt").read_text() == "hi"
        report = (await api.http.get(f"/v1/runs/{task_id}/report")).json()
        assert report["steps"][0]["tool_calls"][0]["decided_by"] == "local"
        await client.close()


async def test_a_context_carries_a_thread_across_messages(agent_client: AgentClient, worker) -> None:
    model, seen = recording(reply("noted"))
    spec = agents.spec(model, name="chat")
    async with worker(), serve(agent_client, ServerSettings(agents={"chat": spec})) as api:
        client = await a2a_client(api.url, "chat", streaming=False)
        first = (await collect(client.send_message(message("my name is Ada"))))[0].task
        assert first.status.state == DONE
        second = (await collect(client.send_message(message("what is my name?", context_id=first.context_id))))
        task = second[0].task
        assert task.context_id == first.context_id and task.id == f"{first.context_id}~2"
        assert task.status.state == DONE and task.artifacts[0].parts[0].text == "noted"
        assert user_texts(seen[-1]) == ["my name is Ada", "what is my name?"]
        # Each turn stays a task of its own.
        assert (await client.get_task(pb.GetTaskRequest(id=first.id))).status.state == DONE
        await client.close()


async def test_a_cancel_and_an_idempotency_key(agent_client: AgentClient, worker) -> None:
    model = script(calls(write("x.txt")), reply("done"))
    spec = agents.spec(model, name="slow", default_permission="auto", tools=ASKING_TOOLS)
    async with worker(), serve(agent_client, ServerSettings(agents={"slow": spec})) as api:
        client = await a2a_client(api.url, "slow", streaming=False)
        request = message("write", metadata={"idempotency_key": "job-7"})
        request.configuration.return_immediately = True
        task = (await collect(client.send_message(request)))[0].task
        again = (await collect(client.send_message(message("write", metadata={"idempotency_key": "job-7"}))))
        assert again[0].task.id == task.id  # the same key: the same run, not a second one
        await wait_state(agent_client.get_handle(task.id), awaiting(), "the write to wait")
        cancelled = await client.cancel_task(pb.CancelTaskRequest(id=task.id))
        assert cancelled.status.state == CANCELED
        assert (await client.get_task(pb.GetTaskRequest(id=task.id))).status.state == CANCELED
        await client.close()


async def test_tokens_scope_and_agent_list(agent_client: AgentClient, worker) -> None:
    tokens = parse_tokens(f"ops:act:{OPS}:agents=a:tenant=acme,other:act:{OTHER}:agents=b,viewer:read:{READER}")
    spec = agents.spec(script(reply("hi")), name="a")
    settings = ServerSettings(tokens=tokens, agents={"a": spec, "b": spec})
    async with worker(), serve(agent_client, settings) as api:
        card_path = "/a2a/a/.well-known/agent-card.json"
        assert (await api.http.get(card_path)).status_code == 401
        refused = await api.http.get(card_path, headers={"Authorization": f"Bearer {OTHER}"})
        assert refused.status_code == 403 and "may use only b" in refused.json()["detail"]
        body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {
            "messageId": "m1", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}}}
        assert (await api.http.post("/a2a/a", json=body, headers={"Authorization": f"Bearer {OTHER}"})
                ).status_code == 403
        viewer = await api.http.post("/a2a/a", json=body, headers={"Authorization": f"Bearer {READER}"})
        assert viewer.status_code == 403 and "scope" in viewer.json()["detail"]
        assert (await api.http.get("/a2a/nobody/.well-known/agent-card.json",
                                   headers={"Authorization": f"Bearer {READER}"})).status_code == 404

        client = await a2a_client(api.url, "a", OPS, streaming=False)
        assert client._card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
        task = (await collect(client.send_message(message("hello"))))[0].task
        assert task.status.state == DONE and task.artifacts[0].parts[0].text == "hi"
        # The token's tenant is forced on the run it starts, as on /v1/runs.
        described = await agent_client.temporal.get_workflow_handle(task.id).describe()
        assert described.typed_search_attributes.get(AGENT_TENANT) == "acme"
        # The v0.3 method names answer too (message/send above was refused only for its token).
        old = await api.http.post("/a2a/a", json=body, headers={"Authorization": f"Bearer {OPS}"})
        assert old.status_code == 200 and old.json()["result"]["status"]["state"] == "completed", old.text
        await client.close()
