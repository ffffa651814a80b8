"""``agentloop replay``'s decisions without a server: which histories this
process cannot decode (and the sentence that says what to set), and the
summary that counts them apart from non-deterministic runs (the command on
a real encrypted run: tests/process/workers/test_encryption.py)."""

from __future__ import annotations

import base64

from temporalio.api.common.v1 import Payload, Payloads
from temporalio.api.history.v1 import History, HistoryEvent

from agentloop.cli.replay import replay_summary, undecodable
from agentloop.shared.base.encryption import EncryptionCodec, converter_from_env

KEY = bytes(range(32))


def history_with(payload: Payload) -> History:
    event = HistoryEvent(event_id=1)
    event.workflow_execution_started_event_attributes.input.CopyFrom(Payloads(payloads=[payload]))
    return History(events=[event])


def plain() -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=b'"hello"')


async def test_a_history_sealed_with_a_key_this_process_lacks_is_named_with_what_to_set() -> None:
    sealed = EncryptionCodec([("k1", KEY)]).seal(plain())
    no_keys = await undecodable(history_with(sealed), converter_from_env({}))
    assert no_keys == ("its payloads are encrypted with key 'k1', which this process lacks (no key is set); set "
                       "AGENTLOOP_ENCRYPTION_KEYS=k1:<base64 key>,... (or AGENTLOOP_ENCRYPTION_KEY_FILE) to the "
                       "keys its workers use")
    other = converter_from_env({"AGENTLOOP_ENCRYPTION_KEYS": f"k2:{base64.b64encode(bytes(32)).decode()}"})
    assert (await undecodable(history_with(sealed), other)).startswith(
        "its payloads are encrypted with key 'k1', which this process lacks (it has 'k2'); add 'k1' to "
        "AGENTLOOP_ENCRYPTION_KEYS")
    keyed = converter_from_env({"AGENTLOOP_ENCRYPTION_KEYS": f"k1:{base64.b64encode(KEY).decode()}"})
    assert await undecodable(history_with(sealed), keyed) is None
    assert await undecodable(history_with(plain()), converter_from_env({})) is None


async def test_a_payload_in_an_encoding_the_converter_does_not_know_is_named() -> None:
    odd = Payload(metadata={"encoding": b"binary/snappy"}, data=b"...")
    assert await undecodable(history_with(odd), converter_from_env({})) == (
        "a payload has the encoding 'binary/snappy', which this code's data converter does not know: replay it "
        "with the codec or converter its workers use")


def test_the_summary_counts_undecodable_runs_apart_from_non_deterministic_ones() -> None:
    assert replay_summary(5, 0, 0, "q") == "replayed 5 run histories against this code: all replay"
    assert replay_summary(5, 2, 3, "q").startswith(
        "replayed 2 of 5 run histories against this code: 2 would fail (non-determinism); do not deploy it over "
        "these runs; 3 not replayed")
    assert replay_summary(5, 0, 3, "q").startswith("replayed 2 of 5 run histories against this code: all replay; "
                                                   "3 not replayed: their payloads cannot be decoded")
    assert replay_summary(0, 0, 0, "q") == "no runs match 'q': nothing to replay"
