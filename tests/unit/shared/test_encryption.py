"""Payload encryption without a server: the codec, its keys from the
environment, the converter and failure converter it goes with, the plugin's
``codec`` argument, and the codec server's app over a real localhost socket
(runs on a real server: tests/process/workers/test_encryption.py)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter, DefaultFailureConverter, PayloadCodec
from temporalio.exceptions import ApplicationError

from agentloop import AgentLoopPlugin, UserError
from agentloop.server.codec import create_codec_app
from agentloop.server.settings import ServerSettings, parse_tokens
from agentloop.shared.base.encryption import (
    CIPHER,
    ENCODING,
    KEY_FILE_ENV,
    KEY_ID_METADATA,
    KEYS_ENV,
    EncryptedFailureConverter,
    EncryptionCodec,
    EncryptionKeyMissing,
    PayloadTampered,
    codec_from_env,
    converter_from_env,
    keys_from_env,
    with_codec,
)
from agentloop.workers.devserver import free_port
from tests.helpers.fixtures.encryption_fixture import Reverser

KEY_A = bytes(range(32))
KEY_B = bytes(range(32, 64))


def b64(key: bytes) -> str:
    return base64.b64encode(key).decode()


def plain(text: str) -> Payload:
    return pydantic_data_converter.payload_converter.to_payloads([text])[0]


async def test_a_sealed_payload_holds_no_plaintext_names_its_key_and_opens_whole() -> None:
    codec = EncryptionCodec([("ka", KEY_A)])
    original = plain("the customer's card is 4111 1111 1111 1111")
    (sealed,) = await codec.encode([original])
    assert sealed.metadata["encoding"] == ENCODING
    assert sealed.metadata[KEY_ID_METADATA] == b"ka"
    assert sealed.metadata["encryption-cipher"] == CIPHER
    assert b"4111" not in sealed.SerializeToString() and b"json/plain" not in sealed.SerializeToString()
    (opened,) = await codec.decode([sealed])
    assert opened == original  # metadata (encoding json/plain) included
    # A fresh nonce each time: the same value never seals to the same bytes.
    (again,) = await codec.encode([original])
    assert again.data != sealed.data


async def test_rotation_new_payloads_use_the_first_key_and_old_ones_stay_readable() -> None:
    old = EncryptionCodec([("ka", KEY_A)])
    rotated = EncryptionCodec([("kb", KEY_B), ("ka", KEY_A)])
    (by_old,) = await old.encode([plain("before")])
    (by_new,) = await rotated.encode([plain("after")])
    assert by_new.metadata[KEY_ID_METADATA] == b"kb" and rotated.encrypting_key_id == "kb"
    assert await rotated.decode([by_old, by_new]) == [plain("before"), plain("after")]
    # Payloads from before encryption was turned on pass through.
    assert await rotated.decode([plain("older")]) == [plain("older")]


async def test_a_missing_key_is_named_with_what_to_set() -> None:
    (sealed,) = await EncryptionCodec([("ka", KEY_A)]).encode([plain("x")])
    with pytest.raises(EncryptionKeyMissing) as caught:
        await EncryptionCodec([("kb", KEY_B)]).decode([sealed])
    message = str(caught.value)
    assert "'ka'" in message and "'kb'" in message and KEYS_ENV in message and KEY_FILE_ENV in message
    assert caught.value.key_id == "ka"
    assert not isinstance(caught.value, UserError)  # a workflow task meeting it is retried, never fails the run


async def test_a_different_key_under_the_same_id_or_an_altered_payload_does_not_open() -> None:
    (sealed,) = await EncryptionCodec([("ka", KEY_A)]).encode([plain("x")])
    with pytest.raises(PayloadTampered, match="'ka'"):
        await EncryptionCodec([("ka", KEY_B)]).decode([sealed])
    forged = Payload()
    forged.CopyFrom(sealed)
    forged.data = sealed.data[:-1] + bytes([sealed.data[-1] ^ 1])
    with pytest.raises(PayloadTampered):
        await EncryptionCodec([("ka", KEY_A)]).decode([forged])
    # The key id is authenticated too: relabelling a payload does not open it.
    relabelled = Payload()
    relabelled.CopyFrom(sealed)
    relabelled.metadata[KEY_ID_METADATA] = b"kb"
    with pytest.raises(PayloadTampered):
        await EncryptionCodec([("kb", KEY_A)]).decode([relabelled])


def test_keys_come_from_the_variable_or_the_file(tmp_path: Path) -> None:
    assert keys_from_env({}) == [] and codec_from_env({}) is None
    listed = {KEYS_ENV: f"kb:{b64(KEY_B)}, ka:{b64(KEY_A).rstrip('=')}"}
    assert keys_from_env(listed) == [("kb", KEY_B), ("ka", KEY_A)]
    urlsafe = base64.urlsafe_b64encode(b"\xfb" * 32).decode()
    assert keys_from_env({KEYS_ENV: f"u:{urlsafe}"}) == [("u", b"\xfb" * 32)]
    file = tmp_path / "keys"
    file.write_text(f"# newest first\nkb:{b64(KEY_B)}\n\nka:{b64(KEY_A)}\n")
    codec = codec_from_env({KEY_FILE_ENV: str(file)})
    assert codec is not None and codec.key_ids == ["kb", "ka"]


@pytest.mark.parametrize(("env", "expected"), [
    ({KEYS_ENV: "ka"}, "entry 1 is not keyid:base64key"),
    ({KEYS_ENV: f"ka:{b64(KEY_A)},kb"}, "entry 2 is not keyid:base64key"),
    ({KEYS_ENV: "ka:not base64!"}, "key 'ka' is not base64"),
    ({KEYS_ENV: f"ka:{b64(b'short')}"}, "key 'ka' is 5 bytes; AES-256 needs 32"),
    ({KEYS_ENV: f"k a:{b64(KEY_A)}"}, "the key id 'k a' is not"),
    ({KEYS_ENV: f"ka:{b64(KEY_A)},ka:{b64(KEY_B)}"}, "two keys have the same id ('ka')"),
    ({KEYS_ENV: f"ka:{b64(KEY_A)}", KEY_FILE_ENV: "/x"}, "set one"),
    ({KEY_FILE_ENV: "/nonexistent/keys"}, "cannot read /nonexistent/keys"),
])
def test_bad_keys_are_one_sentence_without_key_material(env: dict[str, str], expected: str) -> None:
    with pytest.raises(UserError) as caught:
        keys_from_env(env)
    assert expected in str(caught.value)
    assert b64(KEY_A) not in str(caught.value) and b64(KEY_B) not in str(caught.value)


def test_an_empty_key_file_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "keys"
    file.write_text("# nothing yet\n")
    with pytest.raises(UserError, match="holds no key"):
        keys_from_env({KEY_FILE_ENV: str(file)})


async def test_the_converter_seals_payloads_memos_and_failure_messages() -> None:
    converter = converter_from_env({KEYS_ENV: f"ka:{b64(KEY_A)}"})
    assert isinstance(converter.payload_codec, EncryptionCodec)
    assert converter.failure_converter_class is EncryptedFailureConverter
    (payload,) = await converter.encode(["secret prompt"])
    assert payload.metadata["encoding"] == ENCODING and b"secret" not in payload.data
    assert await converter.decode([payload], [str]) == ["secret prompt"]
    memo = await converter._encode_memo({"note": "secret memo"})
    assert memo.fields["note"].metadata["encoding"] == ENCODING

    failure = Failure()
    await converter.encode_failure(ApplicationError("secret failure", {"detail": "secret detail"}), failure)
    assert "secret" not in str(failure) and failure.message == "Encoded failure"
    decoded = await converter.decode_failure(failure)
    assert isinstance(decoded, ApplicationError) and decoded.message == "secret failure"
    assert decoded.details == ({"detail": "secret detail"},)
    # A missing key's message names key ids only: it stays readable without the keys.
    missing = Failure()
    await converter.encode_failure(EncryptionKeyMissing("kz", ["ka"]), missing)
    assert "'kz'" in missing.message and not missing.HasField("encoded_attributes")
    # Without keys: pydantic's converter, untouched.
    assert converter_from_env({}) is pydantic_data_converter


def test_the_plugin_takes_a_codec_the_environments_or_none(monkeypatch: pytest.MonkeyPatch) -> None:
    mine = Reverser()
    assert AgentLoopPlugin(codec=mine).codec is mine
    monkeypatch.setenv(KEYS_ENV, f"ka:{b64(KEY_A)}")
    from_env = AgentLoopPlugin().codec
    assert isinstance(from_env, EncryptionCodec) and from_env.key_ids == ["ka"]
    assert AgentLoopPlugin(codec=False).codec is None
    assert AgentLoopPlugin(codec=mine).codec is mine  # an explicit codec wins over the environment
    with pytest.raises(UserError, match="takes a temporalio.converter.PayloadCodec"):
        AgentLoopPlugin(codec=True)
    monkeypatch.setenv(KEYS_ENV, "ka:short")
    with pytest.raises(UserError, match=KEYS_ENV):
        AgentLoopPlugin()


def test_two_codecs_are_refused_and_the_same_one_is_kept() -> None:
    mine = Reverser()
    with_mine = with_codec(pydantic_data_converter, mine)
    assert with_mine.payload_codec is mine and with_codec(with_mine, mine) is with_mine
    with pytest.raises(UserError, match="has a payload codec already"):
        with_codec(with_mine, EncryptionCodec([("ka", KEY_A)]))
    # A failure converter of the user's own is kept.
    class Mine(DefaultFailureConverter):
        pass

    converter = DataConverter(failure_converter_class=Mine)
    assert with_codec(converter, mine).failure_converter_class is Mine


# The codec server's app, served by uvicorn on a free localhost port ------------------


@contextlib.asynccontextmanager
async def serving(codec: PayloadCodec, settings: ServerSettings) -> AsyncIterator[str]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_codec_app(codec, settings), host="127.0.0.1", port=port,
                                           log_level="warning"))
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


def as_json(payloads: list[Payload]) -> dict[str, object]:
    from google.protobuf import json_format
    from temporalio.api.common.v1 import Payloads

    return json_format.MessageToDict(Payloads(payloads=payloads))


READ = "viewer:read:" + "r" * 20
ACT = "ops:act:" + "a" * 20


async def test_the_codec_server_decodes_for_read_encodes_for_act_and_answers_the_ui_origin() -> None:
    codec = EncryptionCodec([("ka", KEY_A)])
    settings = ServerSettings(tokens=parse_tokens(f"{READ},{ACT}"))
    sealed = await codec.encode([plain("hello"), plain("world")])
    async with serving(codec, settings) as url, httpx.AsyncClient(base_url=url) as http:
        read = {"Authorization": "Bearer " + "r" * 20, "X-Namespace": "default"}
        answer = await http.post("/decode", json=as_json(sealed), headers=read)
        assert answer.status_code == 200, answer.text
        texts = [base64.b64decode(p["data"]).decode() for p in answer.json()["payloads"]]
        assert texts == ['"hello"', '"world"']
        # Without a token, with an unknown one, or encoding with a read token: refused.
        assert (await http.post("/decode", json=as_json(sealed))).status_code == 401
        wrong = await http.post("/decode", json=as_json(sealed), headers={"Authorization": "Bearer " + "x" * 20})
        assert wrong.status_code == 401
        too_small = await http.post("/encode", json=as_json([plain("x")]), headers=read)
        assert too_small.status_code == 403 and "needs 'act'" in too_small.json()["detail"]
        act = {"Authorization": "Bearer " + "a" * 20}
        encoded = await http.post("/encode", json=as_json([plain("x")]), headers=act)
        assert encoded.status_code == 200
        (meta,) = [p["metadata"] for p in encoded.json()["payloads"]]
        assert base64.b64decode(meta["encoding"]) == ENCODING
        # A key the server lacks, and a body that is not Payloads: a sentence.
        (other,) = await EncryptionCodec([("kz", KEY_B)]).encode([plain("x")])
        lacking = await http.post("/decode", json=as_json([other]), headers=read)
        assert lacking.status_code == 400 and "'kz'" in lacking.json()["detail"]
        bad = await http.post("/decode", content=b"[1, 2]", headers={**read, "Content-Type": "application/json"})
        assert bad.status_code == 400 and "JSON Payloads" in bad.json()["detail"]
        # CORS: the Temporal UI's origin (agentloop dev, port 8233) by default; others are not allowed.
        preflight = {"Access-Control-Request-Method": "POST",
                     "Access-Control-Request-Headers": "authorization,content-type,x-namespace"}
        ui = await http.options("/decode", headers={"Origin": "http://localhost:8233", **preflight})
        assert ui.status_code == 200 and ui.headers["access-control-allow-origin"] == "http://localhost:8233"
        assert "x-namespace" in ui.headers["access-control-allow-headers"].lower()
        elsewhere = await http.options("/decode", headers={"Origin": "https://evil.example", **preflight})
        assert "access-control-allow-origin" not in elsewhere.headers
        posted = await http.post("/decode", json=as_json(sealed), headers={"Origin": "http://localhost:8233", **read})
        assert posted.headers["access-control-allow-origin"] == "http://localhost:8233"


async def test_the_codec_server_takes_configured_origins_and_no_token_means_local_callers() -> None:
    codec = EncryptionCodec([("ka", KEY_A)])
    settings = ServerSettings(cors_origins=["https://temporal.example.com"])
    async with serving(codec, settings) as url, httpx.AsyncClient(base_url=url) as http:
        (sealed,) = await codec.encode([plain("hi")])
        answer = await http.post("/decode", json=as_json([sealed]),
                                 headers={"Origin": "https://temporal.example.com"})
        assert answer.status_code == 200
        assert answer.headers["access-control-allow-origin"] == "https://temporal.example.com"
        assert "access-control-allow-origin" not in (
            await http.post("/decode", json=as_json([sealed]), headers={"Origin": "http://localhost:8233"})
        ).headers
        empty = await http.post("/decode", json={})
        assert empty.status_code == 200 and empty.json() == {"payloads": []}


def test_os_urandom_keys_of_the_documented_one_liner_are_accepted() -> None:
    generated = base64.b64encode(os.urandom(32)).decode()
    assert len(keys_from_env({KEYS_ENV: f"k1:{generated}"})[0][1]) == 32


async def test_the_cli_opens_a_sealed_failure_message_and_shows_the_servers_without_the_key() -> None:
    from agentloop.cli.runs.follow import failure_message

    converter = converter_from_env({KEYS_ENV: f"ka:{b64(KEY_A)}"})
    failure = Failure()
    await converter.encode_failure(RuntimeError("the provider hiccuped"), failure)
    assert failure.message == "Encoded failure"
    assert await failure_message(converter, failure) == "the provider hiccuped"
    assert failure.message == "Encoded failure"  # the pending activity's failure is left as it was
    other = converter_from_env({KEYS_ENV: f"kb:{b64(KEY_B)}"})
    assert await failure_message(other, failure) == "Encoded failure"
    plain_failure = Failure(message="plain words")
    assert await failure_message(pydantic_data_converter, plain_failure) == "plain words"
