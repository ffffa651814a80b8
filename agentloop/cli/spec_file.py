"""``agentloop run --spec FILE``: an agent written down in JSON or YAML.

The file holds one ``AgentSpec`` as a mapping (sub-agents included, e.g.
``examples/team.yaml``); the command's flags override its fields.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentloop.cli.common import DEFAULT_RUN_TOOLS, existing_workspace
from agentloop.shared.base.errors import UserError, describe_validation_error

#: Most bytes a spec file may have.
MAX_SPEC_FILE_BYTES = 1_000_000


def read_spec_file(path: str) -> dict[str, Any]:
    """The mapping in a JSON (``.json``) or YAML file.

    Raises:
        UserError: No such file, too large, not JSON or YAML, or not a mapping.
    """
    file = Path(path)
    if not file.is_file():
        raise UserError(f"--spec {path}: no such file")
    if file.stat().st_size > MAX_SPEC_FILE_BYTES:
        raise UserError(f"--spec {path} is {file.stat().st_size:,} bytes; a spec file has at most "
                        f"{MAX_SPEC_FILE_BYTES:,}")
    text = file.read_text(encoding="utf-8", errors="replace")
    if file.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise UserError(f"--spec {path} is not valid JSON: {err.msg} at line {err.lineno}, "
                            f"column {err.colno}") from None
    else:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            problem = getattr(err, "problem", None) or "it does not parse"
            raise UserError(f"--spec {path} is not valid YAML: {problem}{where}") from None
    if not isinstance(data, dict):
        raise UserError(f"--spec {path} must hold one mapping of AgentSpec fields (model, name, tools, "
                        "sub_agents...), e.g. {\"model\": \"scripted:demo\", \"name\": \"lead\"}")
    return data


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The AgentSpec fields the command's flags set (only flags given)."""
    from agentloop.shared.definition.approvals import PermissionRule

    fields: dict[str, Any] = {}
    if args.model:
        fields["model"] = args.model
    if args.tool:
        fields["tools"] = args.tool
    if args.system is not None:
        fields["system_prompt"] = args.system
    if args.max_steps is not None:
        fields["max_steps"] = args.max_steps
    if args.max_tokens is not None:
        fields["max_tokens"] = args.max_tokens
    if getattr(args, "priority", None) is not None:
        fields["priority"] = args.priority
    if args.rules:
        fields["permissions"] = [PermissionRule(tool=tool, action=action).model_dump()
                                 for action, tool in args.rules]
    if args.yes:
        fields["default_permission"] = "allow"
    return fields


def spec_from_file(path: str, args: argparse.Namespace, *, default_model: str | None, workspace: str | None) -> Any:
    """The spec in ``path`` with the flags' overrides (``workspace``: the
    ``--workspace`` flag's directory); its sub-agents that name no workspace
    work in the run's.

    Raises:
        UserError: The file cannot be read, or its fields are not a valid spec.
    """
    from agentloop.shared.definition.spec import AgentSpec

    data = {**read_spec_file(path), **overrides(args)}
    if "model" not in data:
        if not default_model:
            raise UserError(f"--spec {path} names no model: add \"model\" to the file, or give --model "
                            "(or set AGENTLOOP_MODEL)")
        data["model"] = default_model
    if workspace is not None:
        data["workspace"] = workspace
    elif not isinstance(data.get("workspace", "."), str):
        raise UserError(f"--spec {path}: workspace must be a directory's path")
    else:
        data["workspace"] = existing_workspace(data.get("workspace", "."), f"the workspace of --spec {path},")
    _inherit_workspace(data, data["workspace"])
    try:
        return AgentSpec.model_validate(data)
    except ValidationError as exc:
        raise UserError(f"--spec {path}: {describe_validation_error(exc)}") from None


def _inherit_workspace(data: dict[str, Any], workspace: str) -> None:
    for sub in (data.get("sub_agents") or {}).values():
        spec = sub.get("spec") if isinstance(sub, dict) else None
        if isinstance(spec, dict):
            spec.setdefault("workspace", workspace)
            _inherit_workspace(spec, spec["workspace"])


def spec_of_run(args: argparse.Namespace):
    """The run's AgentSpec: from ``--spec FILE`` with the flags' overrides, or from the flags."""
    from agentloop.shared.definition.approvals import PermissionRule
    from agentloop.shared.definition.spec import AgentSpec

    model = args.model or os.environ.get("AGENTLOOP_MODEL")
    if args.spec:
        return spec_from_file(args.spec, args, default_model=model,
                              workspace=existing_workspace(args.workspace) if args.workspace else None)
    if not model:
        raise UserError(
            "choose a model: --model openai:gpt-4.1-mini, --model anthropic:claude-sonnet-4-5, "
            "or --model scripted:demo to try it offline (or set AGENTLOOP_MODEL)"
        )
    workspace = existing_workspace(args.workspace or ".")
    try:
        return AgentSpec(
            model=model,
            tools=args.tool or DEFAULT_RUN_TOOLS,
            system_prompt=args.system or "",
            max_steps=16 if args.max_steps is None else args.max_steps,
            max_tokens=args.max_tokens,
            priority=getattr(args, "priority", None),
            workspace=workspace,
            # In the order given: the first rule that matches a call decides.
            permissions=[PermissionRule(tool=tool, action=action) for action, tool in args.rules],
            default_permission="allow" if args.yes else "auto",
        )
    except ValidationError as exc:
        raise UserError(describe_validation_error(exc)) from None
