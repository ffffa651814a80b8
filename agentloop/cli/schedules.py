"""``agentloop schedule``: schedules of agent runs (docs/schedules.md)."""

from __future__ import annotations

import argparse
import json
import os
from datetime import UTC, datetime
from typing import Any

from agentloop.cli.common import table
from agentloop.cli.embedded import ops_client, reading_client
from agentloop.cli.options import tenant_option

#: The flags of ``agentloop run`` that ``spec_from_file`` reads, unset here.
_RUN_FLAGS = ("model", "tool", "system", "max_steps", "max_tokens", "rules", "yes")


def add_schedule_parser(sub: argparse._SubParsersAction) -> None:
    """The ``schedule`` command and its subcommands."""
    schedule = sub.add_parser(
        "schedule", help="run an agent on a clock (Temporal Schedules)",
        description="Create, list, describe, pause, unpause, trigger, backfill and delete schedules that "
                    "start an agent run on a cron expression or an interval (docs/schedules.md).")
    actions = schedule.add_subparsers(dest="schedule_command", required=True)
    create = actions.add_parser("create", help="create a schedule: --cron or --every")
    create.add_argument("name", help="the schedule's name (its runs' ids start with it)")
    create.add_argument("--spec", required=True, metavar="FILE", help="the agent's spec (JSON or YAML)")
    when = create.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", metavar="EXPR", help="five fields, e.g. '0 7 * * 1-5' (07:00 on weekdays)")
    when.add_argument("--every", metavar="DURATION", help="an interval: 30s, 15m, 1h, 1d")
    create.add_argument("--input", required=True, metavar="TEXT", help="what each firing asks the agent")
    create.add_argument("--thread", metavar="ID", help="feed one thread: each firing is its next message")
    create.add_argument("--overlap", default="skip",
                        choices=["skip", "buffer_one", "buffer_all", "cancel_other", "terminate_other", "allow_all"],
                        help="while the last firing still runs (default: skip)")
    create.add_argument("--catchup-window", metavar="DURATION", help="how late a missed firing may still run")
    create.add_argument("--jitter", metavar="DURATION", help="delay each firing by a random time up to this")
    create.add_argument("--time-zone", metavar="TZ", help="IANA time zone of --cron, e.g. Europe/Paris")
    create.add_argument("--paused", action="store_true", help="create it paused")
    tenant_option(create)
    listing = actions.add_parser("list", help="the schedules of agent runs")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    for action, text in (("describe", "what a schedule is and did"), ("unpause", "fire again"),
                         ("delete", "delete a schedule (its runs go on)")):
        parser = actions.add_parser(action, help=text)
        parser.add_argument("name")
        if action == "describe":
            parser.add_argument("--json", action="store_true", help="as one JSON object")
    pause = actions.add_parser("pause", help="stop firing until unpause")
    pause.add_argument("name")
    pause.add_argument("--note", help="why (shown by describe and the Temporal UI)")
    trigger = actions.add_parser("trigger", help="fire once, now")
    trigger.add_argument("name")
    backfill = actions.add_parser("backfill", help="fire for every firing time in a past period")
    backfill.add_argument("name")
    backfill.add_argument("--start", required=True, type=_when, help="ISO time, e.g. 2025-01-01T00:00:00Z")
    backfill.add_argument("--end", required=True, type=_when, help="ISO time")


def _when(text: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO time, e.g. 2025-01-01T07:00:00Z") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


async def cmd_schedule(args: argparse.Namespace) -> int:
    if args.schedule_command in ("list", "describe"):  # read commands: as `show`, on the embedded server too
        async with reading_client("schedule") as client:
            return await _schedule(client, args)
    return await _schedule(await ops_client(), args)


async def _schedule(client: Any, args: argparse.Namespace) -> int:
    schedules, name = client.schedules, getattr(args, "name", None)
    match args.schedule_command:
        case "create":
            summary = await schedules.create(
                args.name, _spec(args), args.input, cron=args.cron, every=args.every, overlap=args.overlap,
                catchup_window=args.catchup_window, jitter=args.jitter, time_zone=args.time_zone,
                thread_id=args.thread, paused=args.paused, tenant=args.tenant)
            print(f"created schedule {summary.name}: {', '.join(summary.when)}; next: {_next(summary)}")
        case "list":
            found = await schedules.list()
            if args.json:
                for s in found:
                    print(s.model_dump_json())
            else:
                print("\n".join(schedule_lines(found)) if found else "no schedules")
        case "describe":
            summary = await schedules.describe(name)
            print(summary.model_dump_json(indent=2) if args.json else _describe(summary))
        case "pause":
            await schedules.pause(name, args.note)
            print(f"paused {name}")
        case "unpause":
            await schedules.unpause(name)
            print(f"unpaused {name}")
        case "trigger":
            await schedules.trigger(name)
            print(f"triggered {name}")
        case "backfill":
            await schedules.backfill(name, args.start, args.end)
            print(f"backfilled {name} from {args.start.isoformat()} to {args.end.isoformat()}")
        case "delete":
            await schedules.delete(name)
            print(f"deleted schedule {name}")
    return 0


def schedule_lines(found: list[Any]) -> list[str]:
    """``agentloop schedule list``: one line a schedule, in columns."""
    rows = [["NAME", "WHEN", "STATE", "AGENT"]]
    rows += [[s.name, ", ".join(s.when), "paused" if s.paused else "active", s.agent or "-"] for s in found]
    return table(rows)


def _spec(args: argparse.Namespace) -> object:
    from agentloop.cli.spec_file import spec_from_file

    flags = argparse.Namespace(**{k: None for k in _RUN_FLAGS})
    return spec_from_file(args.spec, flags, default_model=os.environ.get("AGENTLOOP_MODEL"), workspace=None)


def _next(summary: object) -> str:
    runs = getattr(summary, "next_runs", [])
    return runs[0].isoformat() if runs else "paused" if getattr(summary, "paused", False) else "none"


def _describe(s: object) -> str:
    data = json.loads(s.model_dump_json())  # type: ignore[attr-defined]
    lines = [f"schedule {data['name']}: {', '.join(data['when'])}",
             f"  agent: {data['agent'] or '-'}"
             + (f", feeding thread {data['thread_id']}" if data["thread_id"] else ""),
             f"  state: {'paused' if data['paused'] else 'active'}" + (f" ({data['note']})" if data["note"] else ""),
             f"  overlap: {data['overlap']}; fired {data['fired']}, skipped for overlap {data['skipped_overlap']}",
             f"  next: {', '.join(data['next_runs'][:3]) or '-'}",
             f"  recent runs: {', '.join(data['recent_runs'][-5:]) or '-'}"]
    return "\n".join(lines)
