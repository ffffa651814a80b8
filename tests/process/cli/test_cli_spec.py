"""`agentloop run --spec FILE`: JSON and YAML spec files, flags overriding
their fields, bad files as sentences, and examples/team.yaml run offline."""

from __future__ import annotations

import json
from pathlib import Path

from agentloop.workers.devserver import DevServer
from tests.helpers.cli import agentloop, clean_env
from tests.helpers.paths import ROOT


def run_spec(tmp_path: Path, dev_server: DevServer, task_queue: str, *args: str):
    env = clean_env(tmp_path, TEMPORAL_ADDRESS=dev_server.address, AGENTLOOP_TASK_QUEUE=task_queue)
    return agentloop("run", *args, "--local-worker", env=env, cwd=tmp_path)


def test_the_team_example_runs_offline(tmp_path: Path, workspace: Path, dev_server: DevServer, task_queue: str) -> None:
    (workspace / "notes.txt").write_text("the team reads this\n")
    proc = run_spec(tmp_path, dev_server, task_queue, "--spec", str(ROOT / "examples" / "team.yaml"),
                    "--workspace", str(workspace), "What is here?", "--run-id", f"team-{task_queue}")
    assert proc.returncode == 0, proc.stderr
    run = f"team-{task_queue}"
    lines = proc.stdout.splitlines()
    assert f"[step 1] ⇢ researcher started (run {run}-sub-call_0_0): What is here?" in lines
    assert (f"[step 1] ⇢ reviewer started (run {run}-sub-call_0_1, with a copy of the conversation): "
            "What is here?") in lines
    assert any(line.startswith("[step 1] ⇠ researcher completed (") for line in lines)
    # The sub-agents worked in the run's workspace.
    assert proc.stdout.count('its first line is: "the team reads this"') >= 2
    assert "My team reported. researcher: " in proc.stdout


def test_flags_override_the_files_fields(tmp_path: Path, workspace: Path, dev_server: DevServer,
                                         task_queue: str) -> None:
    spec = tmp_path / "agent.json"
    spec.write_text(json.dumps({"name": "filed", "model": "scripted:no-such-script", "tools": ["list_dir"],
                                "max_steps": 1}))
    proc = run_spec(tmp_path, dev_server, task_queue, "--spec", str(spec), "--model", "scripted:demo",
                    "--max-steps", "4", "--tool", "list_dir", "--tool", "read_file", "--workspace", str(workspace),
                    "Look around", "--jsonl")
    assert proc.returncode == 0, proc.stderr
    created = json.loads(proc.stdout.splitlines()[0])
    assert created["type"] == "agent.run.created"
    assert (created["agent_name"], created["model"]) == ("filed", "scripted:demo")


def test_bad_spec_files_are_sentences(tmp_path: Path) -> None:
    env = clean_env(tmp_path)

    def refused(name: str, text: str | None) -> str:
        path = tmp_path / name
        if text is not None:
            path.write_text(text)
        proc = agentloop("run", "--spec", str(path), "x", env=env, cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr
        return proc.stderr.strip()

    assert refused("missing.yaml", None) == f"agentloop: --spec {tmp_path / 'missing.yaml'}: no such file"
    assert refused("bad.json", "{oops") == (
        f"agentloop: --spec {tmp_path / 'bad.json'} is not valid JSON: Expecting property name enclosed in "
        "double quotes at line 1, column 2")
    assert refused("bad.yaml", "name: [unclosed").startswith(
        f"agentloop: --spec {tmp_path / 'bad.yaml'} is not valid YAML: ")
    assert refused("list.yaml", "- a\n- b\n").startswith(
        f"agentloop: --spec {tmp_path / 'list.yaml'} must hold one mapping of AgentSpec fields")
    assert refused("nomodel.yaml", "name: x\n") == (
        f"agentloop: --spec {tmp_path / 'nomodel.yaml'} names no model: add \"model\" to the file, or give "
        "--model (or set AGENTLOOP_MODEL)")
    assert refused("typo.yaml", "model: scripted:demo\nsub_agent: {}\n") == (
        f"agentloop: --spec {tmp_path / 'typo.yaml'}: sub_agent: Extra inputs are not permitted; "
        "did you mean sub_agents?")
    assert refused("steps.yaml", "model: scripted:demo\nmax_step: 4\n") == (
        f"agentloop: --spec {tmp_path / 'steps.yaml'}: max_step: Extra inputs are not permitted; "
        "did you mean max_steps?")
    assert refused("odd.yaml", "model: scripted:demo\nzzzz: 1\n") == (
        f"agentloop: --spec {tmp_path / 'odd.yaml'}: zzzz: Extra inputs are not permitted")
    deep = {"model": "scripted:demo", "max_depth": 1, "sub_agents": {"a": {"spec": {
        "model": "scripted:demo", "name": "a",
        "sub_agents": {"b": {"spec": {"model": "scripted:demo", "name": "b"}}}}}}}
    assert refused("deep.json", json.dumps(deep)) == (
        "agentloop: sub-agents nest 2 levels deep (agent -> a -> b), past max_depth=1; flatten the team or "
        "raise AgentSpec.max_depth (at most 10) on the top agent")
