"""A worker process that knows only its own activities and nothing of
agentloop (like a Go or Java team's worker): ``python -m
tests.helpers.activity_tool_worker ADDRESS TASK_QUEUE LEDGER_FILE``.

``charge_card`` moves money once per idempotency key: it records every
attempt's key in the ledger file, fails its first attempt of each key after
recording it (so the test sees a retry carry the same key), and charges
once per key. ``lookup_account`` takes one JSON object, as activities in
other languages usually do; ``close_account`` always refuses.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

LEDGER = Path(sys.argv[3]) if len(sys.argv) > 3 else Path("ledger.jsonl")


def _entries() -> list[dict]:
    return [json.loads(line) for line in LEDGER.read_text().splitlines()] if LEDGER.exists() else []


@activity.defn(name="charge_card")
async def charge_card(account: str, amount_cents: int, idempotency_key: str, currency: str = "EUR") -> dict:
    """Charge an account.

    Args:
        account: The account id, e.g. "acct-1".
        amount_cents: How much, in cents.
        currency: ISO currency code.
    """
    seen = [e for e in _entries() if e["key"] == idempotency_key]
    charged = any(e["charged"] for e in seen)
    attempt = activity.info().attempt
    with LEDGER.open("a") as f:
        f.write(json.dumps({"key": idempotency_key, "attempt": attempt, "charged": not charged and attempt > 1}) + "\n")
    if attempt == 1:
        raise ApplicationError("the card network timed out", type="NetworkTimeout")
    return {"account": account, "charged_cents": 0 if charged else amount_cents, "currency": currency}


@activity.defn(name="lookup_account")
async def lookup_account(request: dict) -> str:
    return f"account {request['account']}: balance 1200 EUR (key {request.get('idempotency_key', 'none')[:4]}...)"


@activity.defn(name="close_account")
async def close_account(request: dict) -> str:
    raise ApplicationError(f"account {request['account']} has a pending charge", type="Refused", non_retryable=True)


async def main() -> None:
    client = await Client.connect(sys.argv[1])
    worker = Worker(client, task_queue=sys.argv[2], activities=[charge_card, lookup_account, close_account])
    print("ready", flush=True)
    await worker.run()


if __name__ == "__main__":
    asyncio.run(main())
