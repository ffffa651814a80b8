"""Options and argument types several commands share, declared once; each
command module adds its own subparser with them (:mod:`agentloop.cli.parser`)."""

from __future__ import annotations

import argparse

from agentloop.cli.common import DEFAULT_RUN_TOOLS


def port_number(text: str) -> int:
    """A TCP port, 0 to 65535 (0: pick a free one)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (0 to 65535; 0 picks a free one)")
    return port


def run_id(text: str) -> str:
    """A run id: not empty."""
    if not text.strip():
        raise argparse.ArgumentTypeError("a run id is not empty (`agentloop list` shows the runs)")
    return text


def positive(text: str) -> int:
    """A whole number, 1 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: give 1 or more")
    return value


def allowed_hosts(p: argparse.ArgumentParser) -> None:
    p.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                   help="a Host name to answer besides 127.0.0.1, localhost and [::1] (also "
                        "$AGENTLOOP_ALLOWED_HOSTS, comma-separated): the name a proxy or a browser uses to reach "
                        "this server; with API tokens, giving one turns the Host check on; repeatable")


def imports(p: argparse.ArgumentParser) -> None:
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import MODULE first (it registers tools or scripted models); repeatable")


def workspace(p: argparse.ArgumentParser, help: str) -> None:
    """``--workspace``: the directory the tools of the command's runs work in."""
    p.add_argument("--workspace", help=help)


def listen_host(p: argparse.ArgumentParser) -> None:
    """``--host`` of a command that serves HTTP."""
    p.add_argument("--host", help="the address to listen on (default: 127.0.0.1)")


def agent_options(p: argparse.ArgumentParser, *, spec_help: str, max_steps_help: str, max_tokens_help: str) -> None:
    """The agent's fields on the command line of a command that starts runs
    (``run``, ``chat``): ``--spec`` and the flags that override it."""
    p.add_argument("--spec", metavar="FILE", help=spec_help)
    p.add_argument("--model", help="provider:model (default: $AGENTLOOP_MODEL)")
    workspace(p, "directory the tools work in (default: the spec file's, else .)")
    p.add_argument("--tool", action="append", help="tool the model may call; repeatable "
                   f"(default: {', '.join(DEFAULT_RUN_TOOLS)}; with --spec, the file's)")
    p.add_argument("--system", help="system prompt")
    p.add_argument("--max-steps", type=int, help=max_steps_help)
    p.add_argument("--max-tokens", type=int, metavar="N", help=max_tokens_help)
    p.add_argument("--priority", type=int, metavar="N", help="the run's priority in Temporal's queues, 1 (first) "
                   "to 5 (last); default: the spec's, else 3 (AgentSpec.priority, docs/many-tenants.md)")
    tenant_option(p)


def tenant_option(p: argparse.ArgumentParser) -> None:
    """``--tenant``: whose run it is (docs/many-tenants.md)."""
    p.add_argument("--tenant", metavar="NAME", help="whose run it is: its fairness key in Temporal's queues and "
                   "its AgentTenant search attribute (docs/many-tenants.md)")


def permission_options(p: argparse.ArgumentParser, *, allow_help: str, ask_help: str, yes_help: str) -> None:
    """``--allow``, ``--ask`` and ``--yes``: which calls run without asking."""
    # Both flags append (action, tool) to one list, so rules keep the order given.
    p.add_argument("--allow", dest="rules", action="append", default=[], metavar="TOOL",
                   type=lambda tool: ("allow", tool), help=allow_help)
    p.add_argument("--ask", dest="rules", action="append", metavar="TOOL",
                   type=lambda tool: ("ask", tool), help=ask_help)
    p.add_argument("--yes", action="store_true", help=yes_help)

