"""Options and argument types several commands share, declared once; each
command module adds its own subparser with them (:mod:`agentloop.cli.parser`)."""

from __future__ import annotations

import argparse


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
