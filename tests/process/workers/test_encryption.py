"""Payload encryption on a real dev server, with ``agentloop worker``
processes that take their keys from ``AGENTLOOP_ENCRYPTION_KEYS``: the raw
history (``temporal workflow show -o json``, no codec) holds none of a run's
plaintext; through ``agentloop codec-server`` it does; keys rotate under a
run in flight; a worker without the key fails each workflow task naming the
key, and the run goes on once a worker with it polls. (The codec, keys,
converter and the codec server's auth and CORS: tests/unit/shared/test_encryption.py.)"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.protobuf.message import Message
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory

from agentloop import AgentClient, AgentLoopPlugin
from agentloop.shared.base.encryption import ENCODING, KEY_ID_METADATA, KEYS_ENV, EncryptionCodec
from agentloop.workers.devserver import DevServer, free_port
from tests.helpers.agents import spec
from tests.helpers.cli import agentloop, clean_env, run_temporal
from tests.helpers.fixtures.encryption_fixture import Reverser, answer_text
from tests.helpers.paths import ROOT
from tests.helpers.polling import eventually
from tests.helpers.runs import task_failures, wait_status

FIXTURE = "tests.helpers.fixtures.encryption_fixture"
KEY_A, KEY_B = bytes(range(32)), bytes(range(32, 64))
KEYS_A = f"ka:{base64.b64encode(KEY_A).decode()}"
KEYS_B = f"kb:{base64.b64encode(KEY_B).decode()}"
CODEC_TOKEN = "c" * 24


async def encrypting_client(server: DevServer, *keys: tuple[str, bytes]) -> Client:
    """A client of ``server`` encrypting with ``keys`` (through the plugin, as AgentClient.connect does)."""
    return await Client.connect(server.address, plugins=[AgentLoopPlugin(codec=EncryptionCodec(list(keys)))])


@pytest.fixture
def workers(dev_server: DevServer, task_queue: str, tmp_path: Path) -> Iterator[Any]:
    """``workers(keys, workspace)`` starts ``agentloop worker --import tests.helpers.fixtures.encryption_fixture``
    with ``AGENTLOOP_ENCRYPTION_KEYS=keys``; ``await workers.stop(proc)`` stops one
    with SIGTERM (``await``). Any left are killed at the end."""
    procs: list[subprocess.Popen[bytes]] = []
    log = tmp_path / "worker.log"

    def start(keys: str, workspace: Path) -> subprocess.Popen[bytes]:
        env = clean_env(tmp_path, TEMPORAL_ADDRESS=dev_server.address, AGENTLOOP_TASK_QUEUE=task_queue,
                        **{KEYS_ENV: keys})
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "agentloop.cli", "worker", "--import", FIXTURE, "--workspace", str(workspace)],
            cwd=ROOT, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT,
        ))
        return procs[-1]

    async def stop(proc: subprocess.Popen[bytes]) -> None:
        proc.terminate()
        await asyncio.to_thread(proc.wait, 30)

    start.stop = stop
    start.log = log
    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


async def raw_history(server: DevServer, run_id: str, *codec: str) -> str:
    """``temporal workflow show -w RUN -o json``, with ``codec`` options if any."""
    shown = await run_temporal(server, "workflow", "show", "-w", run_id, "-o", "json", *codec)
    assert shown.returncode == 0, shown.stderr
    return shown.stdout


def everything_readable(history_json: str) -> str:
    """The history's JSON with every base64 string in it decoded as well
    (payload data and metadata are base64 there): plaintext anywhere shows."""
    texts = [history_json]

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
        elif isinstance(node, str) and len(node) >= 8:
            try:
                texts.append(base64.b64decode(node, validate=True).decode("utf-8", errors="replace"))
            except ValueError:
                pass

    walk(json.loads(history_json))
    return "\n".join(texts)


#: Not payloads of the run's data: search attributes are indexed by the server (docs/security.md).
PLAINTEXT_BY_DESIGN = {"temporal.api.common.v1.SearchAttributes"}


def payload_key_ids(history: WorkflowHistory, event_type: int) -> set[str]:
    """The key ids of the payloads of the history's events of ``event_type``."""
    found: set[str] = set()

    def walk(message: Any) -> None:
        for field, value in message.ListFields():
            if field.message_type is None:
                continue
            if isinstance(value, Message):
                items: Any = [value]
            elif field.message_type.GetOptions().map_entry:
                items = value.values()
            else:
                items = value
            for item in items:
                if not isinstance(item, Message) or item.DESCRIPTOR.full_name in PLAINTEXT_BY_DESIGN:
                    continue  # a map of plain values, or search attributes
                if item.DESCRIPTOR.full_name == "temporal.api.common.v1.Payload":
                    assert item.metadata.get("encoding") == ENCODING, f"a plaintext payload in {field.name}"
                    found.add(item.metadata[KEY_ID_METADATA].decode())
                else:
                    walk(item)

    for event in history.events:
        if event.event_type == event_type:
            walk(event)
    return found


def markers(run_marker: str) -> dict[str, str]:
    return {what: f"{what.upper()}-{run_marker}" for what in ("prompt", "arg", "file", "fail", "reply")}


async def test_the_raw_history_holds_no_plaintext_and_the_codec_server_shows_it_all(
    dev_server: DevServer, task_queue: str, workspace: Path, workers: Any, tmp_path: Path
) -> None:
    marker = uuid.uuid4().hex
    secret = markers(marker)
    (workspace / "given.txt").write_text(secret["file"])
    worker = workers(KEYS_A, workspace)
    client = AgentClient(await encrypting_client(dev_server, ("ka", KEY_A)), task_queue=task_queue)
    handle = await client.start(
        spec("scripted:enc-secrets", tools=["write_file", "read_file"], system_prompt="be brief",
             stream_batch_seconds=0.02),
        f"PROMPT-{marker} please",
    )
    # The client decodes the run's event stream (the poll query) and its result.
    events = [event async for event in handle.events()]
    result = await handle.result()
    assert result.final_text == answer_text(marker)
    streamed = "".join(e.delta.text for e in events if e.type == "thread.message.delta")
    assert secret["reply"] in streamed  # the LLM activity published deltas (signals) that held the answer
    assert (workspace / "note.txt").read_text() == secret["arg"]

    raw = everything_readable(await raw_history(dev_server, handle.run_id))
    for what, text in secret.items():
        assert text not in raw, f"the {what} is in the raw history"
    assert "__temporal_workflow_stream_publish" in raw  # the stream's signals are there, sealed
    history = await handle.workflow_handle.fetch_history()
    for event_type in (EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
                       EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
                       EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
                       EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED):
        assert payload_key_ids(history, event_type) == {"ka"}, EventType.Name(event_type)
    # The summaries the Temporal UI shows (the run's "<name> on <model>", each activity's) are payloads too.
    summaries = [e.user_metadata.summary for e in history.events if e.HasField("user_metadata")]
    assert len(summaries) > 3 and all(p.metadata["encoding"] == ENCODING for p in summaries)
    started = [e.activity_task_started_event_attributes for e in history.events
               if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED]
    failed_first = [a.last_failure for a in started if a.attempt == 2]
    assert failed_first and failed_first[0].message == "Encoded failure"  # the message is sealed too

    # Through the codec server, with a read token: every secret is there.
    port = free_port()
    codec_env = clean_env(tmp_path, **{KEYS_ENV: KEYS_A, "AGENTLOOP_API_TOKENS": f"ops:read:{CODEC_TOKEN}"})
    codec_server = subprocess.Popen(
        [sys.executable, "-m", "agentloop.cli", "codec-server", "--port", str(port)],
        cwd=ROOT, env=codec_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    try:
        endpoint = ("--codec-endpoint", f"http://127.0.0.1:{port}")

        async def shown() -> str | None:
            out = await run_temporal(dev_server, "workflow", "show", "-w", handle.run_id, "-o", "json", *endpoint,
                                     "--codec-auth", f"Bearer {CODEC_TOKEN}")
            return out.stdout if out.returncode == 0 else None

        decoded = everything_readable(await eventually(shown, "the codec server to answer", timeout=30))
        for what, text in secret.items():
            assert text in decoded, f"the {what} is not in the history shown through the codec server"
        # Without the token the codec server refuses.
        async with httpx.AsyncClient() as http:
            refused = await http.post(f"http://127.0.0.1:{port}/decode", json={"payloads": []})
        assert refused.status_code == 401
    finally:
        codec_server.terminate()
        codec_server.wait(30)
    await workers.stop(worker)


async def test_keys_rotate_under_a_run_in_flight(
    dev_server: DevServer, task_queue: str, workspace: Path, workers: Any
) -> None:
    marker = uuid.uuid4().hex
    old = AgentClient(await encrypting_client(dev_server, ("ka", KEY_A)), task_queue=task_queue)
    worker = workers(KEYS_A, workspace)
    handle = await old.start(spec("scripted:enc-approve", tools=["write_file"], default_permission="auto"),
                             f"PROMPT-{marker}")
    await wait_status(handle, "awaiting_approval", timeout=30)
    await workers.stop(worker)

    # The new key first, the old one kept: the run in flight reads its old payloads, writes new ones with kb.
    workers(f"{KEYS_B},{KEYS_A}", workspace)
    rotated = AgentClient(await encrypting_client(dev_server, ("kb", KEY_B), ("ka", KEY_A)), task_queue=task_queue)
    await rotated.get_handle(handle.run_id).approve("call_0_0")
    result = await rotated.get_handle(handle.run_id).result()
    assert result.final_text == f"REPLY-{marker}" and (workspace / "asked.txt").read_text() == f"ARG-{marker}"

    history = await handle.workflow_handle.fetch_history()
    assert not task_failures(history)
    assert payload_key_ids(history, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED) == {"ka"}
    assert payload_key_ids(history, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED) == {"kb"}
    assert payload_key_ids(history, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED) == {"kb"}
    completed = payload_key_ids(history, EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED)
    assert completed == {"ka", "kb"}  # the first step's answer under ka, the later ones under kb
    # A client that holds only the old key cannot read the new payloads: they really are kb's.
    with pytest.raises(Exception, match="'kb'"):
        await old.get_handle(handle.run_id).result()


async def test_a_worker_without_the_key_fails_clearly_and_the_run_goes_on_with_one_that_has_it(
    dev_server: DevServer, task_queue: str, workspace: Path, workers: Any
) -> None:
    marker = uuid.uuid4().hex
    wrong = workers(KEYS_B, workspace)
    client = AgentClient(await encrypting_client(dev_server, ("ka", KEY_A)), task_queue=task_queue)
    handle = await client.start(spec("scripted:enc-approve", tools=["write_file"]), f"PROMPT-{marker}")

    async def failed_task() -> list[str]:
        return task_failures(await handle.workflow_handle.fetch_history())

    (message, *_) = await eventually(failed_task, "a workflow task to fail on the missing key", timeout=60)
    # Readable without the keys: it names the key it lacks, the keys it has, and what to set.
    assert "encryption key 'ka'" in message and "'kb'" in message and KEYS_ENV in message
    await workers.stop(wrong)
    assert "encryption key 'ka'" in workers.log.read_text()

    workers(KEYS_A, workspace)
    result = await handle.result()
    assert result.final_text == f"REPLY-{marker}" and (workspace / "asked.txt").read_text() == f"ARG-{marker}"


async def test_replay_without_the_key_names_it_per_run_and_counts_the_run_apart(
    dev_server: DevServer, task_queue: str, workspace: Path, workers: Any, tmp_path: Path
) -> None:
    """``agentloop replay`` over an encrypted run, without its key: a sentence
    naming the key and what to set, no traceback, not "non-determinism", exit 3."""
    marker = uuid.uuid4().hex
    workers(KEYS_A, workspace)
    client = AgentClient(await encrypting_client(dev_server, ("ka", KEY_A)), task_queue=task_queue)
    handle = await client.start(spec("scripted:enc-approve", tools=["write_file"], default_permission="allow"),
                                f"PROMPT-{marker}")
    assert (await handle.result()).final_text == f"REPLY-{marker}"

    def replay(*args: str, **keys: str) -> subprocess.CompletedProcess[str]:
        env = clean_env(tmp_path, drop=("AGENTLOOP_ENCRYPTION",), TEMPORAL_ADDRESS=dev_server.address, **keys)
        return agentloop("replay", "--last", "5", "--query", f'WorkflowId="{handle.run_id}"', *args, env=env)

    bare = replay()
    assert bare.returncode == 3, bare.stdout + bare.stderr
    assert bare.stdout.startswith(f"{handle.run_id} (") and "not replayed: its payloads are encrypted with key " \
        f"'ka', which this process lacks (no key is set); set {KEYS_ENV}=ka:<base64 key>" in bare.stdout
    assert "Traceback" not in bare.stdout + bare.stderr and "KeyError" not in bare.stdout + bare.stderr
    assert "non-determinism" not in bare.stderr
    assert bare.stderr.strip() == ("replayed 0 of 1 run histories against this code: none could be checked; 1 not "
                                   "replayed: their payloads cannot be decoded by this process (see each run's "
                                   "line), so nothing is known of them")
    as_json = json.loads(replay("--json").stdout)
    assert (as_json["ok"], as_json["replayed"], as_json["problem"]) == (False, False, None)
    assert "'ka'" in as_json["undecodable"]

    other = replay(**{KEYS_ENV: KEYS_B})  # some keys, not the one
    assert other.returncode == 3 and "key 'ka', which this process lacks (it has 'kb'); add 'ka' to " \
        f"{KEYS_ENV}" in other.stdout, other.stdout + other.stderr
    verbose = replay("--verbose")  # what the SDK met, for whoever wants it
    assert verbose.returncode == 3 and "Traceback" in verbose.stderr and "binary/encrypted" in verbose.stderr
    keyed = replay(**{KEYS_ENV: KEYS_A})
    assert keyed.returncode == 0, keyed.stdout + keyed.stderr
    assert keyed.stderr.strip() == "replayed 1 run histories against this code: all replay"


async def test_a_users_own_codec_works_through_the_plugin(
    temporal_client: Client, task_queue: str, dev_server: DevServer, registry: Any, workspace: Path
) -> None:
    from agentloop.testing import reply, script
    from agentloop.workers.worker import build_worker

    marker = uuid.uuid4().hex
    mine = await Client.connect(dev_server.address, plugins=[AgentLoopPlugin(codec=Reverser())])
    client = AgentClient(mine, task_queue=task_queue)
    async with build_worker(mine, task_queue=task_queue, registry=registry, workspace=workspace):
        handle = await client.start(spec(script(reply(f"REPLY-{marker}"))), f"PROMPT-{marker}")
        assert (await handle.result()).final_text == f"REPLY-{marker}"
    raw = everything_readable(await raw_history(dev_server, handle.run_id))
    assert f"PROMPT-{marker}" not in raw and f"REPLY-{marker}" not in raw
    history = await handle.workflow_handle.fetch_history()
    (started,) = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED]
    assert started.workflow_execution_started_event_attributes.input.payloads[0].metadata["encoding"] == (
        b"binary/reversed")
    # A Worker whose plugin encrypts refuses a client that would not.
    from temporalio.worker import Worker

    from agentloop import UserError

    with pytest.raises(UserError, match="its client does not"):
        Worker(temporal_client, task_queue=task_queue,
               plugins=[AgentLoopPlugin(codec=EncryptionCodec([("ka", KEY_A)]))])


def test_the_commands_refuse_bad_or_missing_keys_in_a_sentence(tmp_path: Path) -> None:
    from tests.helpers.cli import agentloop

    env = clean_env(tmp_path, drop=("AGENTLOOP_ENCRYPTION", "AGENTLOOP_API_TOKENS"))
    done = agentloop("codec-server", env=env, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"agentloop: no encryption key: set {KEYS_ENV}="), done.stderr
    done = agentloop("codec-server", "--host", "0.0.0.0", env={**env, KEYS_ENV: KEYS_A}, timeout=60)
    assert done.returncode == 2 and "listens on 127.0.0.1 only (asked: 0.0.0.0)" in done.stderr, done.stderr
    done = agentloop("codec-server", "--codec", "os:sep", env=env, timeout=60)
    assert done.returncode == 2 and "--codec os:sep is a str, not a temporalio.converter.PayloadCodec" in (
        done.stderr), done.stderr
    done = agentloop("codec-server", "--codec", "json:dumps", env=env, timeout=60)
    assert done.returncode == 2 and "--codec json:dumps: calling it raised TypeError" in done.stderr, done.stderr
    bad = {**env, KEYS_ENV: "k1:c2hvcnQ=", "TEMPORAL_ADDRESS": "127.0.0.1:1"}
    done = agentloop("worker", env=bad, timeout=60)
    assert done.returncode == 2 and done.stderr.strip() == (
        f"agentloop: {KEYS_ENV}: key 'k1' is 5 bytes; AES-256 needs 32 (generate one with python -c "
        "'import base64, os; print(base64.b64encode(os.urandom(32)).decode())')"), done.stderr
    assert "Traceback" not in done.stderr


async def test_agentloop_dev_gives_the_web_ui_a_codec_endpoint(tmp_path: Path) -> None:
    """``agentloop dev --ui-codec-endpoint URL``: the dev server's web UI is
    told to decode payloads there (its settings API says so)."""
    from tests.helpers.cli import read_until

    ui_port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentloop.cli", "dev", "--port", "0", "--ui-port", str(ui_port),
        "--ui-codec-endpoint", "http://127.0.0.1:8081", "--workspace", str(tmp_path), cwd=ROOT,
        env=clean_env(tmp_path), stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        assert proc.stdout is not None
        await read_until(proc.stdout, "Temporal UI:", timeout=90)
        async with httpx.AsyncClient(timeout=30) as http:
            settings = (await http.get(f"http://127.0.0.1:{ui_port}/api/v1/settings")).json()
        assert settings["Codec"]["Endpoint"] == "http://127.0.0.1:8081", settings
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 60)
