"""``agentloop eval run|save|show|list`` (docs/evals.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentloop.cli.common import say, table
from agentloop.cli.embedded import reading_client
from agentloop.cli.evals.sources import add_case_options, candidate, read_cases
from agentloop.cli.runs.eval_follow import follow_eval
from agentloop.shared.base.errors import UserError

if TYPE_CHECKING:
    from agentloop.client.agent_client import AgentClient

async def cmd_eval(args: argparse.Namespace) -> int:
    async with reading_client("eval") as client:
        match args.eval_command:
            case "run":
                return await _run(client, args)
            case "save":
                return await _save(client, args)
            case "show":
                return await follow_eval(client, args.eval_id, json=args.json, junit=args.junit,
                                         min_pass_rate=args.min_pass_rate)
            case _:
                return await _list(client)


def _checks(args: argparse.Namespace) -> list[Any]:
    from agentloop.shared.evals.checks import parse_check

    try:
        return [parse_check(text) for text in args.check or []]
    except ValueError as exc:
        raise UserError(f"--check: {exc}") from None


def _tool_policies(items: list[str] | None) -> dict[str, str]:
    from agentloop.shared.runs.eval_tools import TOOL_POLICIES

    policies = {}
    for item in items or []:
        name, eq, policy = item.partition("=")
        if not eq or policy not in TOOL_POLICIES:
            raise UserError(f"--tool-policy {item!r}: give TOOL=POLICY, POLICY one of {', '.join(TOOL_POLICIES)}")
        policies[name] = policy
    return policies


async def _run(client: AgentClient, args: argparse.Namespace) -> int:
    from agentloop.client.evals import start_eval

    if args.min_pass_rate is not None and not 0 <= args.min_pass_rate <= 1:
        raise UserError(f"--min-pass-rate {args.min_pass_rate}: a rate between 0 and 1, e.g. 0.95")
    checks, tools = _checks(args), _tool_policies(args.tool_policy)
    spec, overrides, what = candidate(args)
    cases = await read_cases(client, args)
    handle = await start_eval(client, cases, spec=spec, overrides=overrides, checks=checks,
                              concurrency=args.concurrency, task_queue=args.task_queue, policy=args.tools,
                              fallback=args.fallback, tools=tools, candidate=what)
    say(f"eval {handle.id}: {len(cases)} cases, candidate {what}; "
        f"`agentloop eval show {handle.id}` follows it")
    if args.detach:
        print(handle.id)
        return 0
    return await follow_eval(client, handle.id, json=args.json, junit=args.junit, min_pass_rate=args.min_pass_rate)


async def _save(client: AgentClient, args: argparse.Namespace) -> int:
    from agentloop.shared.evals.cases import dataset_line

    cases = await read_cases(client, args)
    lines = "".join(dataset_line(c) + "\n" for c in cases)
    if args.output == "-":
        sys.stdout.write(lines)
    else:
        Path(args.output).write_text(lines, encoding="utf-8")
        say(f"wrote {len(cases)} cases to {args.output}")
    return 0


async def _list(client: AgentClient) -> int:
    from agentloop.client.evals import list_evals

    evals = await list_evals(client)
    if not evals:
        say("no evals")
        return 0
    rows = [["EVAL ID", "STATUS", "STARTED"]]
    rows += [[e.eval_id, e.status, e.started_at.isoformat(timespec="seconds") if e.started_at else "-"]
             for e in evals]
    print("\n".join(table(rows)))
    return 0


def _output_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="the report as one JSON object")
    p.add_argument("--junit", metavar="FILE", help="also write the report as JUnit XML to FILE")
    p.add_argument("--min-pass-rate", type=float, metavar="RATE",
                   help="exit 1 when fewer cases pass, e.g. 0.95")


def add_eval_parser(sub: Any) -> None:
    """The ``eval`` command and its subcommands."""
    from agentloop.cli.options import positive
    from agentloop.shared.runs.eval_tools import TOOL_POLICIES

    ev = sub.add_parser("eval", help="evaluate an agent definition against recorded runs",
                        description="Evaluate a change (prompt, model, tools) against recorded runs or a "
                                    "dataset: each case runs again as a real run of the candidate, its tool "
                                    "calls answered from the recording. See docs/evals.md.")
    evsub = ev.add_subparsers(dest="eval_command", required=True)
    run = evsub.add_parser("run", help="run an eval and print its report",
                           description="Start an eval (a Temporal workflow), follow it, print its report.")
    add_case_options(run)
    run.add_argument("--dataset", metavar="FILE", help="a dataset file (JSONL, `agentloop eval save`)")
    run.add_argument("--spec", metavar="FILE", help="the candidate: an AgentSpec file (JSON or YAML)")
    run.add_argument("--agent", metavar="MODULE:ATTR", help="the candidate: an AgentSpec at an import path")
    run.add_argument("--model", help="override the candidate's model")
    run.add_argument("--prompt-file", metavar="FILE", help="override the candidate's system prompt")
    run.add_argument("--set", action="append", metavar="KEY=VALUE",
                     help="override a spec field (JSON value or text), e.g. --set max_steps=8")
    run.add_argument("--tools", choices=TOOL_POLICIES, default="recorded",
                     help="how tool calls are answered (default: recorded)")
    run.add_argument("--fallback", choices=TOOL_POLICIES[1:], default="refuse",
                     help="a recorded call without a matching recording (default: refuse)")
    run.add_argument("--tool-policy", action="append", metavar="TOOL=POLICY", help="one tool's own policy")
    run.add_argument("--check", action="append", metavar="CHECK",
                     help="a check (default: output_equals and same_tools): same_tools[:order], "
                          "output_equals[:FIELD], contains:TEXT, regex:PATTERN, cost_within:FACTOR, "
                          "steps_within:FACTOR, judge:PROVIDER:MODEL:RUBRIC, function:MODULE:FUNC, or JSON")
    run.add_argument("--concurrency", type=positive, default=10, help="most case runs at once (default: 10)")
    run.add_argument("--task-queue", help="the case runs' task queue (default: the eval's)")
    run.add_argument("--detach", action="store_true", help="print the eval id and exit")
    _output_options(run)
    save = evsub.add_parser("save", help="write the cases of recorded runs to a dataset file",
                            description="Turn recorded runs into a dataset file (JSONL), so a suite can live in git.")
    add_case_options(save)
    save.add_argument("-o", "--output", required=True, metavar="FILE", help="the dataset file (- for stdout)")
    show = evsub.add_parser("show", help="follow an eval and print its report")
    show.add_argument("eval_id", help="the eval's id")
    _output_options(show)
    evsub.add_parser("list", help="evals, newest first")
