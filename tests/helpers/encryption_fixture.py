"""Scripted models for the payload-encryption tests, imported by worker
subprocesses (``agentloop worker --import tests.helpers.encryption_fixture``).

The run's prompt carries a marker (``PROMPT-<id>``); every value the run
then sends through Temporal carries the same id with another prefix, so a
test can look for each in the raw history: a tool's arguments
(``ARG-<id>``), its result (``FILE-<id>``, written by the test into
``given.txt``), a first attempt's failure (``FAIL-<id>``) and the streamed
answer (``REPLY-<id>``, repeated so that every streamed chunk holds it whole).
Also a user's own codec, :class:`Reverser`.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from agentloop.shared.definition.activity_io import ModelRequest, ModelResponse
from agentloop.testing import call, calls, register_scripted_model, reply


def marker_id(request: ModelRequest) -> str:
    first = next(m.text for m in request.messages if m.role == "user")
    return first.split("PROMPT-", 1)[1].split()[0]


def answer_text(marker: str) -> str:
    """The final answer: streamed in chunks that each hold ``REPLY-<id>`` whole."""
    return " ".join([f"REPLY-{marker}"] * 30)


def _use_tools(request: ModelRequest) -> ModelResponse:
    marker = marker_id(request)
    return calls(call("write_file", {"file_path": "note.txt", "content": f"ARG-{marker}"}),
                 call("read_file", {"file_path": "given.txt"}))


def _answer(request: ModelRequest) -> ModelResponse:
    marker = marker_id(request)
    if activity.info().attempt == 1:  # a failure's message goes to the history (the retry's last_failure)
        raise RuntimeError(f"FAIL-{marker}: the provider hiccuped")
    return reply(answer_text(marker))


register_scripted_model("enc-secrets", [_use_tools, _answer], delta_seconds=0.2, paced=("text",))


def _ask(request: ModelRequest) -> ModelResponse:
    return calls(call("write_file", {"file_path": "asked.txt", "content": f"ARG-{marker_id(request)}"}))


def _done(request: ModelRequest) -> ModelResponse:
    return reply(f"REPLY-{marker_id(request)}")


#: Waits for an approval (with ``default_permission="auto"``), then answers.
register_scripted_model("enc-approve", [_ask, _done])


class Reverser(PayloadCodec):
    """A user's own codec (a KMS-backed one in real life)."""

    async def encode(self, payloads):  # type: ignore[no-untyped-def]
        return [Payload(metadata={"encoding": b"binary/reversed"}, data=p.SerializeToString()[::-1])
                for p in payloads]

    async def decode(self, payloads):  # type: ignore[no-untyped-def]
        out = []
        for p in payloads:
            opened = Payload()
            opened.ParseFromString(p.data[::-1])
            out.append(opened)
        return out
