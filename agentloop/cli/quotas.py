"""``agentloop quota``: tenants' spend quotas (docs/many-tenants.md)."""

from __future__ import annotations

import argparse
import json

from agentloop.cli.common import table
from agentloop.cli.embedded import ops_client
from agentloop.shared.base.errors import UserError
from agentloop.shared.runs.quotas import Amount, QuotaLimits, QuotaView, parse_window


def add_quota_parser(sub: argparse._SubParsersAction) -> None:
    """The ``quota`` command: ``set`` and ``show``."""
    quota = sub.add_parser(
        "quota", help="a tenant's spend quota: tokens and/or US dollars per window",
        description="Set and show a tenant's spend quota, kept by its ledger workflow agentloop-quota-<tenant> "
                    "(docs/many-tenants.md).")
    actions = quota.add_subparsers(dest="quota_command", required=True)
    put = actions.add_parser("set", help="set a tenant's limits (starts its ledger)")
    put.add_argument("tenant")
    put.add_argument("--usd", type=float, metavar="DOLLARS", help="most US dollars per window, e.g. 50")
    put.add_argument("--tokens", type=int, metavar="N", help="most tokens (input plus output) per window")
    put.add_argument("--per", default="1d", metavar="WINDOW", help="the window: 30s, 5m, 1h, 1d, 1w (default 1d)")
    put.add_argument("--at-limit", default="wait", choices=["wait", "fail"],
                     help="a run at the limit waits for the next window (default) or fails (quota_exceeded)")
    show = actions.add_parser("show", help="a tenant's limits, window, spend and reservations")
    show.add_argument("tenant")
    show.add_argument("--json", action="store_true", help="as one JSON object")


def limits_of(args: argparse.Namespace) -> QuotaLimits:
    """The limits ``quota set`` was given, checked."""
    if args.usd is None and args.tokens is None:
        raise UserError("give --usd, --tokens or both: a quota limits something")
    if (args.usd is not None and args.usd <= 0) or (args.tokens is not None and args.tokens <= 0):
        raise UserError("--usd and --tokens are positive")
    try:
        window = parse_window(args.per)
    except ValueError as err:
        raise UserError(f"--per: {err}") from None
    return QuotaLimits(tokens=args.tokens, usd=args.usd, window_seconds=window, at_limit=args.at_limit)


async def cmd_quota(args: argparse.Namespace) -> int:
    client = await ops_client()
    if args.quota_command == "set":
        view = await client.quotas.set(args.tenant, limits_of(args))
        print("\n".join(describe(view)))
        return 0
    found = await client.quotas.get(args.tenant)
    if found is None:
        raise UserError(f"tenant {args.tenant!r} has no quota (set one with agentloop quota set {args.tenant} "
                        "--usd 50 --per 1d)")
    print(_json(found) if args.json else "\n".join(describe(found)))
    return 0


def _amount(amount: Amount, limits: QuotaLimits | None) -> str:
    parts = []
    if limits is None or limits.tokens is not None:
        parts.append(f"{amount.tokens or 0} tokens")
    if limits is None or limits.usd is not None:
        parts.append(f"${amount.usd or 0.0:.4f}")
    return ", ".join(parts)


def describe(view: QuotaView) -> list[str]:
    """``quota show``'s lines."""
    limits = view.limits
    if limits is None:
        return [f"tenant {view.tenant}: no limits"]
    limit = _amount(Amount(tokens=limits.tokens, usd=limits.usd), limits)
    lines = table([
        ["tenant", view.tenant],
        ["limit", f"{limit} per {limits.window_seconds:g}s (at the limit: {limits.at_limit})"],
        ["window", f"{view.window_start.isoformat() if view.window_start else '-'} to "
                   f"{view.window_end.isoformat() if view.window_end else '-'}"],
        ["spent", _amount(view.spent, limits)],
        ["reserved", f"{_amount(view.reserved, limits)} by {len(view.holders)} run(s)"],
    ])
    lines += [f"  {run}: {_amount(left, limits)}" for run, left in sorted(view.holders.items())]
    return lines


def _json(view: QuotaView) -> str:
    return json.dumps(view.model_dump(mode="json"))
