"""Remote A2A agents as tools: ``a2a:<url>`` in a spec's ``tools``.

The agent's card is fetched when the run's tools are resolved: its skills
make the tool's schema. A call sends one message with an idempotency key
(the run id and the tool call id) in the message's metadata, then polls the
remote task, heartbeating its id: a retried attempt (a worker killed
mid-call) finds the task id in the last heartbeat and resumes the poll
instead of sending the message again.

A worker calls only the agents its environment lists (a spec cannot point
it at any URL): ``AGENTLOOP_A2A_AGENTS`` (URLs, comma-separated) and
``AGENTLOOP_A2A_TOKENS`` (``URL=TOKEN``, comma-separated: the bearer token
for that agent). Tokens never reach the spec or the run's history.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import re
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx
from temporalio import activity

from agentloop.activities.heartbeat import keep_heartbeating
from agentloop.shared.base.errors import UserError
from agentloop.shared.base.text import cut
from agentloop.shared.definition.activity_io import ToolDefinition

PREFIX = "a2a:"
AGENTS_ENV = "AGENTLOOP_A2A_AGENTS"
TOKENS_ENV = "AGENTLOOP_A2A_TOKENS"
#: The message metadata key of the idempotency key (what agentloop's own A2A door reads).
IDEMPOTENCY_KEY = "idempotency_key"
#: The error type of a run whose ``a2a:`` tool cannot be used (not allowed, or its card unreadable).
UNAVAILABLE_ERROR_TYPE = "A2aAgentUnavailable"
#: Seconds between polls of a remote task.
POLL_SECONDS = 0.5


def tool_name(url: str) -> str:
    """The tool's name for the agent at ``url``: its last path segment and a hash of the URL."""
    tail = re.sub(r"[^a-zA-Z0-9_]+", "_", url.rstrip("/").rsplit("/", 1)[-1])[:30].strip("_") or "agent"
    return f"a2a_{tail}_{hashlib.sha256(url.encode()).hexdigest()[:8]}"


def _tokens(env: Mapping[str, str]) -> dict[str, str]:
    found = {}
    for entry in filter(None, (e.strip() for e in env.get(TOKENS_ENV, "").split(","))):
        url, sep, token = entry.rpartition("=")
        if sep and url:
            found[url.rstrip("/")] = token
    return found


def allowed(env: Mapping[str, str] | None = None) -> dict[str, str | None]:
    """The remote agents this worker may call, by URL, with their tokens."""
    env = os.environ if env is None else env
    tokens = _tokens(env)
    urls = [u.strip().rstrip("/") for u in env.get(AGENTS_ENV, "").split(",") if u.strip()]
    return {url: tokens.get(url) for url in [*urls, *tokens]}


def url_of(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """The allowed agent whose tool is ``name``, if any."""
    return next((url for url in allowed(env) if tool_name(url) == name), None)


async def _client(url: str, token: str | None) -> tuple[Any, httpx.AsyncClient]:
    from a2a.client import ClientConfig, create_client

    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"} if token else {}, timeout=60)
    try:
        client: Any = await create_client(url, ClientConfig(httpx_client=http, streaming=False))
        elsewhere = foreign_interfaces(url, [i.url for i in client._card.supported_interfaces])
        if elsewhere:
            await client.close()
            raise UserError(f"the A2A card of {url[:200]!r} sends calls to {', '.join(elsewhere)[:300]}, not to "
                            f"{origin(url)}: this worker sends messages (and the agent's token of {TOKENS_ENV}) "
                            f"to the origin listed in {AGENTS_ENV} only; list the agent at the URL it serves")
        return client, http
    except BaseException:
        await http.aclose()
        raise


def origin(url: str) -> str:
    """``scheme://host:port`` of ``url`` (the port made explicit)."""
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme, 0)
    return f"{parts.scheme}://{(parts.hostname or '').lower()}:{port}"


def foreign_interfaces(url: str, interfaces: list[str]) -> list[str]:
    """The interface URLs of a card fetched from ``url`` whose origin is not
    ``url``'s: a card is the remote's to write, and may name any address (a
    cloud metadata service, the Temporal server) for the worker to POST to,
    with the remote's token."""
    return [i for i in interfaces if origin(i) != origin(url)]


def _refused(url: str) -> UserError:
    return UserError(f"the A2A agent {url[:200]!r} is not one this worker may call: list it in {AGENTS_ENV} "
                     f"(or give its token in {TOKENS_ENV}) on the tools worker")


async def definition(spec_name: str) -> ToolDefinition:
    """The tool of ``a2a:<url>``: the remote card's description, its skills as the schema.

    Raises:
        UserError: The URL is not allowed here, or its card cannot be read.
    """
    url = spec_name.removeprefix(PREFIX).rstrip("/")
    agents = allowed()
    if url not in agents:
        raise _refused(url)
    try:
        client, http = await _client(url, agents[url])
    except Exception as exc:  # the card could not be fetched or read
        raise UserError(f"cannot read the A2A card of {url[:200]!r}: {str(exc)[:300]}") from None
    card = client._card
    await http.aclose()
    skills = [s for s in card.skills]
    described = "; ".join(f"{s.name}: {s.description}" for s in skills)
    properties: dict[str, Any] = {"message": {"type": "string", "description": "the message to send the agent"}}
    if len(skills) > 1:
        properties["skill"] = {"enum": [s.id for s in skills], "description": "the skill asked for"}
    return ToolDefinition(
        name=tool_name(url),
        description=cut(f"Ask the remote agent {card.name}: {card.description}. Skills: {described}", 1000),
        parameters={"type": "object", "properties": properties, "required": ["message"]},
    )


def _text(task: Any) -> str:
    return "\n".join(p.text for a in task.artifacts for p in a.parts if p.text)


async def call(name: str, arguments: dict[str, Any], key: str) -> tuple[str, bool]:
    """Send the remote agent its message (once) and poll its task to the end:
    the answer, and whether it is an error."""
    from a2a.types import a2a_pb2 as pb

    url = url_of(name)
    if url is None:
        raise _refused(name)
    message = str(arguments.get("message", "")).strip()
    if not message:
        return "Error: the call needs a message", True
    details = activity.info().heartbeat_details if activity.in_activity() else []
    task_id: str | None = str(details[-1]) if details and details[-1] else None
    client, http = await _client(url, allowed()[url])
    try:
        beating = keep_heartbeating(current=lambda: task_id, beat_now=True) if activity.in_activity() else \
            contextlib.nullcontext()
        async with beating:
            if task_id is None:
                request = pb.SendMessageRequest(message=pb.Message(
                    message_id=uuid.uuid4().hex, role=pb.ROLE_USER, parts=[pb.Part(text=message)]))
                request.message.metadata.update({IDEMPOTENCY_KEY: key, **(
                    {"skill": str(arguments["skill"])} if arguments.get("skill") else {})})
                request.configuration.return_immediately = True
                sent = [r async for r in client.send_message(request)][0]
                task_id = sent.task.id
                if activity.in_activity():
                    activity.heartbeat(task_id)
            return await _poll(client, task_id)
    finally:
        await client.close()
        await http.aclose()


async def _poll(client: Any, task_id: str) -> tuple[str, bool]:
    from a2a.types import a2a_pb2 as pb

    while True:
        task = await client.get_task(pb.GetTaskRequest(id=task_id))
        state = task.status.state
        said = " ".join(p.text for p in task.status.message.parts if p.text)
        if state == pb.TASK_STATE_COMPLETED:
            return _text(task) or "(the agent answered nothing)", False
        if state in (pb.TASK_STATE_FAILED, pb.TASK_STATE_CANCELED, pb.TASK_STATE_REJECTED):
            return f"Error: the remote task {task_id} ended {pb.TaskState.Name(state)}: {said}", True
        if state in (pb.TASK_STATE_INPUT_REQUIRED, pb.TASK_STATE_AUTH_REQUIRED):
            return (f"Error: the remote task {task_id} waits for input ({said or 'no reason given'}); "
                    "answer it at the remote agent"), True
        await asyncio.sleep(POLL_SECONDS)
