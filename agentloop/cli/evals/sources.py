"""Where an eval's cases and candidate come from: a query, run ids,
snapshot files, a dataset; a spec file, an import path, overrides."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentloop.shared.base.errors import UserError

if TYPE_CHECKING:
    from agentloop.client.agent_client import AgentClient
    from agentloop.client.evals import Overrides
    from agentloop.shared.definition.spec import AgentSpec
    from agentloop.shared.evals.cases import EvalCase


async def read_cases(client: AgentClient, args: argparse.Namespace) -> list[EvalCase]:
    """The cases the options name, in order: query, runs, snapshots, dataset.

    Raises:
        UserError: No source given, or one cannot be read.
    """
    from temporalio.service import RPCError, RPCStatusCode

    from agentloop.client.evals import cases_from_query, cases_from_runs
    from agentloop.shared.evals.cases import cases_from_snapshot, read_dataset

    if not (args.query or args.runs or args.snapshot or getattr(args, "dataset", None)):
        raise UserError("name the cases: --query 'AgentName=\"...\"', --runs RUN..., --snapshot FILE... "
                        "or --dataset suite.jsonl")
    cases: list[EvalCase] = []
    if args.query:
        try:
            cases += await cases_from_query(client, args.query, limit=args.limit, turn=args.turn)
        except RPCError as err:
            if err.status == RPCStatusCode.INVALID_ARGUMENT:
                raise UserError(f"the server rejected --query {args.query!r}: {err.message}") from None
            raise
    if args.runs:
        cases += await cases_from_runs(client, args.runs, turn=args.turn)
    for path in args.snapshot or []:
        cases += cases_from_snapshot(_snapshot_file(path), args.turn)
    dataset = getattr(args, "dataset", None)
    if dataset:
        file = Path(dataset)
        if not file.is_file():
            raise UserError(f"--dataset {dataset}: no such file; write one with `agentloop eval save`")
        cases += read_dataset(file.read_text(encoding="utf-8").splitlines(), source=dataset)
    return cases


def _snapshot_file(path: str) -> Any:
    from agentloop.shared.runs.snapshots import load_snapshot

    try:
        return load_snapshot(Path(path).read_bytes(), path)
    except FileNotFoundError:
        raise UserError(f"--snapshot {path}: no such file; write one with `agentloop export RUN > {path}`") from None
    except OSError as exc:
        raise UserError(f"--snapshot {path} cannot be read: {exc.strerror}") from None


def spec_at(path: str) -> AgentSpec:
    """The AgentSpec at ``module:attribute`` (``--agent``).

    Raises:
        UserError: It cannot be imported or is not an AgentSpec.
    """
    from agentloop.shared.definition.spec import AgentSpec

    module_name, colon, attr = path.partition(":")
    if not colon or not module_name or not attr:
        raise UserError(f"--agent {path}: give MODULE:ATTRIBUTE, e.g. --agent myapp.agents:support")
    try:
        value: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError) as exc:
        raise UserError(f"--agent {path} cannot be imported: {exc}") from None
    if callable(value) and not isinstance(value, AgentSpec):
        value = value()
    if not isinstance(value, AgentSpec):
        raise UserError(f"--agent {path} is a {type(value).__name__}, not an AgentSpec")
    return value


def candidate(args: argparse.Namespace) -> tuple[AgentSpec | None, Overrides, str]:
    """The candidate's spec (None: each case's recorded spec), the
    overrides, and the candidate in words."""
    from agentloop.cli.spec_file import read_spec_file
    from agentloop.client.evals import Overrides
    from agentloop.shared.definition.spec import AgentSpec

    spec = None
    what = "the recorded spec"
    if args.spec:
        from pydantic import ValidationError

        from agentloop.shared.base.errors import describe_validation_error

        try:
            spec = AgentSpec.model_validate(read_spec_file(args.spec))
        except ValidationError as exc:
            raise UserError(f"--spec {args.spec}: {describe_validation_error(exc)}") from None
        what = args.spec
    elif args.agent:
        spec, what = spec_at(args.agent), args.agent
    prompt = None
    if args.prompt_file:
        try:
            prompt = Path(args.prompt_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise UserError(f"--prompt-file {args.prompt_file} cannot be read: {exc.strerror}") from None
    overrides = Overrides(model=args.model, system_prompt=prompt, sets=list(args.set or []))
    changed = overrides.describe()
    return spec, overrides, what + (f" with {changed}" if changed else "")


def add_case_options(p: argparse.ArgumentParser) -> None:
    """Where the cases come from."""
    from agentloop.cli.options import positive

    p.add_argument("--query", help="the completed runs (and threads) this Temporal list filter finds, e.g. "
                                   "'AgentName=\"support\" AND StartTime > \"2026-11-01T00:00:00Z\"'")
    p.add_argument("--runs", nargs="+", metavar="RUN",
                   help="recorded runs by id; a thread gives a case per completed turn, THREAD~N turn N only")
    p.add_argument("--snapshot", nargs="+", metavar="FILE", help="snapshot files (`agentloop export RUN`)")
    p.add_argument("--turn", type=positive, metavar="N",
                   help="of each thread, only turn N (its case starts with the thread's messages before it)")
    p.add_argument("--limit", type=positive, default=100, help="most runs --query takes (default: 100)")
