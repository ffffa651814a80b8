"""Payload encryption: AES-256-GCM over every payload a run sends to Temporal.

Temporal's history holds what crosses its boundaries: a run's input (the
prompt, the messages), each activity's input and result (LLM answers, tool
arguments and results), signals, updates and queries (approvals, the event
stream's deltas), memos and failures. :class:`EncryptionCodec` is a
:class:`temporalio.converter.PayloadCodec`: each payload is serialized whole
(its own metadata too) and sealed with AES-256-GCM under the first key; the
sealed payload says only ``encoding: binary/encrypted``, the cipher and the
key's id, so the server, its database and its operators read none of it.
Search attributes are not payloads: they stay plaintext (docs/security.md).

Keys come from ``AGENTLOOP_ENCRYPTION_KEYS`` (``keyid:base64key``,
comma-separated) or from the file ``AGENTLOOP_ENCRYPTION_KEY_FILE`` (the same,
one a line): the first key encrypts, every key decrypts, so rotation is "put
the new key first, keep the old ones while runs that used them live". A
payload that is not encrypted (a run started before encryption was turned
on) passes through unchanged.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.converter import DataConverter, DefaultFailureConverter, PayloadCodec

from agentloop.shared.base.errors import AgentLoopError, UserError

KEYS_ENV = "AGENTLOOP_ENCRYPTION_KEYS"
KEY_FILE_ENV = "AGENTLOOP_ENCRYPTION_KEY_FILE"

#: The ``encoding`` of an encrypted payload (as Temporal's samples spell it).
ENCODING = b"binary/encrypted"
#: Metadata naming the key that sealed a payload.
KEY_ID_METADATA = "encryption-key-id"
#: Metadata naming the cipher.
CIPHER_METADATA = "encryption-cipher"
CIPHER = b"AES-256-GCM"

_NONCE_BYTES = 12
_KEY_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_HOW = f"{KEYS_ENV}=keyid:base64key,... (the first encrypts, all decrypt) or {KEY_FILE_ENV}=FILE (one a line)"


class EncryptionKeyMissing(AgentLoopError):
    """A payload is sealed with a key this process lacks. Not a UserError on
    purpose: a workflow task that meets it fails and Temporal retries it, so
    the run waits (nothing lost) until a worker with the key picks it up."""

    def __init__(self, key_id: str, known: Sequence[str]) -> None:
        have = ", ".join(repr(k) for k in known) or "none"
        super().__init__(
            f"cannot decrypt a payload sealed with encryption key {key_id!r}: this process has the keys "
            f"{have}; add {key_id!r} to {KEYS_ENV} (keyid:base64key, comma-separated, the first encrypts) "
            f"or to the file {KEY_FILE_ENV} names, and restart it"
        )
        self.key_id = key_id


class PayloadTampered(AgentLoopError):
    """An encrypted payload does not authenticate under the key its id names."""


def _aesgcm(key: bytes) -> Any:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    return AESGCM(key)


class EncryptionCodec(PayloadCodec):
    """AES-256-GCM over whole payloads.

    Args:
        keys: ``(key id, 32-byte key)`` pairs: the first encrypts, every one
            decrypts. Key ids are short names (letters, digits, ``.``, ``_``,
            ``-``); they travel in each payload's metadata, the keys never do.

    Raises:
        UserError: No key, a key that is not 32 bytes, a malformed or
            repeated key id.
    """

    def __init__(self, keys: Sequence[tuple[str, bytes]]) -> None:
        if not keys:
            raise UserError(f"an encryption codec needs at least one key: set {_HOW}")
        ids = [key_id for key_id, _ in keys]
        for key_id, key in keys:
            _check_key(key_id, key, "EncryptionCodec")
        if len(set(ids)) != len(ids):
            raise UserError(f"two encryption keys have the same id ({_repeated(ids)}); give each key its own id")
        self.key_ids = ids
        self._ciphers = {key_id: _aesgcm(key) for key_id, key in keys}

    @property
    def encrypting_key_id(self) -> str:
        """The id of the key new payloads are sealed with."""
        return self.key_ids[0]

    def __repr__(self) -> str:
        return f"EncryptionCodec(keys={self.key_ids!r})"

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.seal(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.open(p) for p in payloads]

    def seal(self, payload: Payload) -> Payload:
        """``payload`` encrypted with the first key."""
        key_id = self.key_ids[0]
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._ciphers[key_id].encrypt(nonce, payload.SerializeToString(), key_id.encode())
        return Payload(
            metadata={"encoding": ENCODING, KEY_ID_METADATA: key_id.encode(), CIPHER_METADATA: CIPHER},
            data=nonce + sealed,
        )

    def open(self, payload: Payload) -> Payload:
        """``payload`` decrypted; one that is not encrypted, as it is.

        Raises:
            EncryptionKeyMissing: Its key is not one of this codec's.
            PayloadTampered: It does not authenticate under its key.
        """
        if payload.metadata.get("encoding") != ENCODING:
            return payload
        key_id = payload.metadata.get(KEY_ID_METADATA, b"").decode(errors="replace")
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise EncryptionKeyMissing(key_id, self.key_ids)
        from cryptography.exceptions import InvalidTag

        try:
            plain = cipher.decrypt(payload.data[:_NONCE_BYTES], payload.data[_NONCE_BYTES:], key_id.encode())
        except InvalidTag:
            raise PayloadTampered(
                f"a payload sealed with encryption key {key_id!r} does not decrypt under this process's key "
                f"{key_id!r}: the key with that id differs from the one that sealed it, or the payload was altered"
            ) from None
        opened = Payload()
        opened.ParseFromString(plain)
        return opened


class EncryptedFailureConverter(DefaultFailureConverter):
    """Temporal's failure converter with the message and stack trace moved
    into the failure's encoded attributes (so the codec seals them), except
    for :class:`EncryptionKeyMissing`: its message names key ids only, and an
    operator without the keys must be able to read it in the history."""

    def __init__(self) -> None:
        super().__init__(encode_common_attributes=True)

    def to_failure(self, exception: BaseException, payload_converter: Any, failure: Any) -> None:
        if isinstance(exception, EncryptionKeyMissing):
            DefaultFailureConverter.default.to_failure(exception, payload_converter, failure)
            return
        super().to_failure(exception, payload_converter, failure)


def with_codec(converter: DataConverter, codec: PayloadCodec | None) -> DataConverter:
    """``converter`` with ``codec`` (and, for Temporal's default failure
    converter, :class:`EncryptedFailureConverter`); as it is when ``codec``
    is None or already its codec.

    Raises:
        UserError: ``converter`` has another codec already.
    """
    if codec is None or converter.payload_codec is codec:
        return converter
    if converter.payload_codec is not None:
        raise UserError(
            f"this data converter has a payload codec already ({type(converter.payload_codec).__name__}), and "
            f"agentloop was given another ({type(codec).__name__}, from AgentLoopPlugin(codec=...) or {KEYS_ENV}): "
            "keep one, e.g. pass it as AgentLoopPlugin(codec=...) and leave the converter's unset, or "
            f"AgentLoopPlugin(codec=False) to keep the converter's"
        )
    failures = converter.failure_converter_class
    if failures is DefaultFailureConverter:
        failures = EncryptedFailureConverter
    return dataclasses.replace(converter, payload_codec=codec, failure_converter_class=failures)


# Keys from the environment ------------------------------------------------------------


def _repeated(ids: Sequence[str]) -> str:
    return ", ".join(sorted({repr(i) for i in ids if ids.count(i) > 1}))


def _check_key(key_id: str, key: bytes, where: str) -> None:
    if not _KEY_ID.match(key_id):
        raise UserError(f"{where}: the key id {key_id!r} is not 1 to 64 letters, digits, '.', '_' or '-'")
    if len(key) != 32:
        raise UserError(f"{where}: key {key_id!r} is {len(key)} bytes; AES-256 needs 32 (generate one with "
                        "python -c 'import base64, os; print(base64.b64encode(os.urandom(32)).decode())')")


def _base64(text: str) -> bytes | None:
    """Standard or URL-safe base64, padded or not; None when it is neither."""
    padded = text + "=" * (-len(text) % 4)
    for altchars in (None, b"-_"):
        try:
            return base64.b64decode(padded, altchars=altchars, validate=True)
        except (binascii.Error, ValueError):
            continue
    return None


def parse_keys(entries: Sequence[str], where: str) -> list[tuple[str, bytes]]:
    """``keyid:base64key`` entries as ``(key id, key)`` pairs, checked.

    Raises:
        UserError: An entry that is not ``keyid:base64key``, a key that is
            not base64 of 32 bytes, a repeated id. Messages never hold key material.
    """
    keys: list[tuple[str, bytes]] = []
    for number, entry in enumerate(entries, 1):
        key_id, sep, encoded = entry.partition(":")
        key_id, encoded = key_id.strip(), encoded.strip()
        if not sep or not key_id or not encoded:
            raise UserError(f"{where}: entry {number} is not keyid:base64key (e.g. k2:<44 base64 characters>)")
        key = _base64(encoded)
        if key is None:
            raise UserError(f"{where}: key {key_id!r} is not base64")
        _check_key(key_id, key, where)
        keys.append((key_id, key))
    ids = [key_id for key_id, _ in keys]
    if len(set(ids)) != len(ids):
        raise UserError(f"{where}: two keys have the same id ({_repeated(ids)}); give each key its own id")
    return keys


def keys_from_env(environ: Mapping[str, str] | None = None) -> list[tuple[str, bytes]]:
    """The keys of ``AGENTLOOP_ENCRYPTION_KEYS`` or ``AGENTLOOP_ENCRYPTION_KEY_FILE``;
    empty when neither is set.

    Raises:
        UserError: Both are set, the file cannot be read or holds no key, or
            an entry is malformed.
    """
    env = os.environ if environ is None else environ
    listed, file = env.get(KEYS_ENV, "").strip(), env.get(KEY_FILE_ENV, "").strip()
    if listed and file:
        raise UserError(f"both {KEYS_ENV} and {KEY_FILE_ENV} are set; set one")
    if listed:
        return parse_keys([e for e in listed.split(",") if e.strip()], KEYS_ENV)
    if not file:
        return []
    try:
        text = Path(file).read_text()
    except OSError as err:
        raise UserError(f"{KEY_FILE_ENV}: cannot read {file} ({err.strerror})") from None
    lines = [line.strip() for line in text.splitlines()]
    entries = [line for line in lines if line and not line.startswith("#")]
    if not entries:
        raise UserError(f"{KEY_FILE_ENV}: {file} holds no key (one keyid:base64key a line; the first encrypts)")
    return parse_keys(entries, f"{KEY_FILE_ENV} ({file})")


def codec_from_env(environ: Mapping[str, str] | None = None) -> EncryptionCodec | None:
    """An :class:`EncryptionCodec` with the environment's keys, or None when no key is set.

    Raises:
        UserError: See :func:`keys_from_env`.
    """
    keys = keys_from_env(environ)
    return EncryptionCodec(keys) if keys else None


def converter_from_env(environ: Mapping[str, str] | None = None) -> DataConverter:
    """The data converter agentloop's own clients use: pydantic's, with the
    environment's :class:`EncryptionCodec` when keys are set.

    Raises:
        UserError: See :func:`keys_from_env`.
    """
    from temporalio.contrib.pydantic import pydantic_data_converter

    return with_codec(pydantic_data_converter, codec_from_env(environ))
