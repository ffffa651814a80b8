"""``agentloop replay``: replay the histories of runs on a live server
against the workflow code installed here, and report any run the code would
no longer replay (non-determinism): the check to run before a deploy or a
ramp (docs/deploying.md#agentloop-replay).

A history whose payloads this process cannot decode (encrypted with a key
it lacks, or in an encoding its converter does not know) is not replayed:
it is named with what to set, and counted apart from the runs that would
fail, since nothing was checked."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from agentloop.cli.options import positive
from agentloop.shared.base import contracts
from agentloop.shared.base.errors import UserError
from agentloop.shared.base.text import cut

#: Exit statuses: every history replays; some would fail (non-determinism);
#: none would fail, but some could not be decoded, so were not replayed.
EXIT_OK, EXIT_NON_DETERMINISM, EXIT_UNDECODABLE = 0, 1, 3
#: The workflow types this code defines (users' own workflows are theirs to replay).
REPLAYED_TYPES = (contracts.WORKFLOW_NAME, contracts.SCHEDULE_FEED_WORKFLOW_NAME)


@dataclass(frozen=True)
class Replayed:
    """One run's history, replayed."""

    run_id: str
    temporal_run_id: str
    problem: str | None
    #: Why the history was not replayed: a payload this process cannot decode.
    undecodable: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None and self.undecodable is None


def replay_query(extra: str | None, include_running: bool) -> str:
    """The list filter: agentloop's workflow types, completed (or also
    running), and ``extra``."""
    types = " OR ".join(f'WorkflowType="{t}"' for t in REPLAYED_TYPES)
    parts = [f"({types})"]
    if not include_running:
        parts.append('ExecutionStatus="Completed"')
    if extra:
        parts.append(f"({extra})")
    return " AND ".join(parts)


def describe_failure(error: BaseException) -> str:
    """A replay failure in one line (the SDK's non-determinism message is long)."""
    text = " ".join(str(error).split())
    return cut(text, 400)


def _payloads(message: Any) -> Iterator[Any]:
    """Every ``Payload`` in a protobuf message (an event), however deep."""
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if hasattr(value, "DESCRIPTOR"):
            items: Any = [value]
        elif field.message_type.GetOptions().map_entry:
            items = value.values()
        else:
            items = value
        for item in items:
            if not hasattr(item, "DESCRIPTOR"):
                continue  # a map of plain values
            if item.DESCRIPTOR.full_name == "temporal.api.common.v1.Payload":
                yield item
            else:
                yield from _payloads(item)


async def undecodable(history: Any, converter: Any) -> str | None:
    """Why this process cannot decode the payloads of ``history`` (and so
    cannot replay it), in a sentence that says what to set; None when it can."""
    from agentloop.shared.base.encryption import (
        ENCODING,
        KEY_FILE_ENV,
        KEY_ID_METADATA,
        KEYS_ENV,
        EncryptionKeyMissing,
    )

    try:  # the encodings the payload converter decodes (a converter of the user's own: not checked)
        known = set(getattr(converter.payload_converter_class(), "converters", {}))
    except Exception:
        known = set()
    codec = converter.payload_codec
    have = ", ".join(repr(k) for k in getattr(codec, "key_ids", [])) or "none"
    for event in history.events:
        for payload in _payloads(event):
            if codec is not None:
                try:
                    [payload] = await codec.decode([payload])
                except EncryptionKeyMissing as err:
                    return (f"its payloads are encrypted with key {err.key_id!r}, which this process lacks (it has "
                            f"{have}); add {err.key_id!r} to {KEYS_ENV} (keyid:base64key,...) or the file "
                            f"{KEY_FILE_ENV} names")
                except Exception as err:  # a codec of the user's own, or a tampered payload
                    return f"a payload does not decode: {type(err).__name__}: {' '.join(str(err).split())[:300]}"
            encoding = payload.metadata.get("encoding", b"")
            if encoding == ENCODING:
                key_id = payload.metadata.get(KEY_ID_METADATA, b"").decode(errors="replace")
                return (f"its payloads are encrypted with key {key_id!r}, which this process lacks (no key is "
                        f"set); set {KEYS_ENV}={key_id}:<base64 key>,... (or {KEY_FILE_ENV}) to the keys its "
                        "workers use")
            if known and encoding not in known:
                return (f"a payload has the encoding {encoding.decode(errors='replace')!r}, which this code's data "
                        "converter does not know: replay it with the codec or converter its workers use")
    return None


async def replay_runs(temporal: object, query: str, last: int, verbose: bool = False) -> list[Replayed]:
    """Replay the newest ``last`` executions matching ``query`` against this
    code; a history this process cannot decode is named, not replayed."""
    from temporalio.worker import Replayer

    from agentloop.shared.base.encryption import converter_from_env
    from agentloop.workers.plugin import AgentLoopPlugin

    replayer = Replayer(workflows=[], plugins=[AgentLoopPlugin()])
    converter = converter_from_env()
    found = []
    async for execution in temporal.list_workflows(query, limit=last):  # type: ignore[attr-defined]
        found.append(execution)
    results = []
    for execution in found:
        handle = temporal.get_workflow_handle(execution.id, run_id=execution.run_id)  # type: ignore[attr-defined]
        history = await handle.fetch_history()
        reason = await undecodable(history, converter)
        if reason is not None:
            if verbose:  # what the SDK meets when it tries (its traceback): shown, not counted
                await replayer.replay_workflow(history, raise_on_replay_failure=False)
            results.append(Replayed(execution.id, execution.run_id, None, reason))
            continue
        with _sdk_logs(verbose):
            outcome = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        problem = describe_failure(outcome.replay_failure) if outcome.replay_failure is not None else None
        results.append(Replayed(execution.id, execution.run_id, problem))
    return results


class _sdk_logs:  # noqa: N801 (used as a context manager)
    """The SDK's workflow-task logs (a traceback per failed task) shown only
    with ``--verbose``: the verdict for each run is printed anyway."""

    def __init__(self, verbose: bool) -> None:
        self.verbose, self.logger = verbose, logging.getLogger("temporalio")
        self.level = self.logger.level

    def __enter__(self) -> None:
        if not self.verbose:
            self.logger.setLevel(logging.CRITICAL)

    def __exit__(self, *_: object) -> None:
        self.logger.setLevel(self.level)


async def cmd_replay(args: argparse.Namespace) -> int:
    from temporalio.service import RPCError, RPCStatusCode

    from agentloop.cli.embedded import ops_client

    client = await ops_client()
    query = replay_query(args.query, args.running)
    try:
        results = await replay_runs(client.temporal, query, args.last, args.verbose)
    except RPCError as err:
        if err.status == RPCStatusCode.INVALID_ARGUMENT:
            raise UserError(f"the server rejected the query {query!r}: {err.message}; fix --query (Temporal's "
                            "list filter syntax, e.g. 'AgentVersion=\"3f9a0c2b1d4e\"')") from None
        raise
    failed = [r for r in results if r.problem is not None]
    skipped = [r for r in results if r.undecodable is not None]
    for r in results:
        if args.json:
            print(json.dumps({"run_id": r.run_id, "temporal_run_id": r.temporal_run_id, "ok": r.ok,
                              "replayed": r.undecodable is None, "problem": r.problem,
                              "undecodable": r.undecodable}))
        elif r.undecodable is not None:
            print(f"{r.run_id} ({r.temporal_run_id}): not replayed: {r.undecodable}")
        elif not r.ok:
            print(f"{r.run_id} ({r.temporal_run_id}): does not replay: {r.problem}")
    print(replay_summary(len(results), len(failed), len(skipped), query), file=sys.stderr)
    return EXIT_NON_DETERMINISM if failed else EXIT_UNDECODABLE if skipped else EXIT_OK


def replay_summary(found: int, failed: int, skipped: int, query: str) -> str:
    """The last line: how many histories were replayed, how many would fail,
    and (apart) how many could not be decoded, so were not replayed."""
    if not found:
        return f"no runs match {query!r}: nothing to replay"
    replayed = found - skipped
    text = (f"replayed {replayed} of {found} run histories against this code: " if skipped else
            f"replayed {found} run histories against this code: ")
    if failed:
        text += f"{failed} would fail (non-determinism); do not deploy it over these runs"
    elif replayed:
        text += "all replay"
    else:
        text += "none could be checked"
    if skipped:
        text += (f"; {skipped} not replayed: their payloads cannot be decoded by this process (see each run's "
                 "line), so nothing is known of them")
    return text


def add_replay_parser(sub: Any) -> None:
    """The ``replay`` command and its options."""
    replay = sub.add_parser(
        "replay", help="replay runs' histories from the server against this code (before a deploy)",
        description="Replay the histories of recent runs on the server ($TEMPORAL_ADDRESS) against the workflow "
                    "code installed here. Exits 1 when any would fail (non-determinism): a deploy of this code "
                    "would break those runs; 3 when none would, but some could not be replayed as their payloads "
                    "do not decode here (encrypted with a key this process lacks: set AGENTLOOP_ENCRYPTION_KEYS). "
                    "Run it in CI before a ramp (docs/deploying.md).",
    )
    replay.add_argument("--last", type=positive, default=20, metavar="N",
                        help="the newest N runs that match (default: 20)")
    replay.add_argument("--query", metavar="EXTRA",
                        help="extra Temporal list filter, e.g. 'AgentVersion=\"3f9a0c2b1d4e\"'")
    replay.add_argument("--running", action="store_true",
                        help="running runs too (their history so far), not only completed ones")
    replay.add_argument("--json", action="store_true", help="one JSON object per run and line")
    replay.add_argument("--verbose", action="store_true",
                        help="also the SDK's log of each failed workflow task, with its traceback")
