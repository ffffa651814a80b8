"""The ``agentloop`` command as a user runs it: a subprocess, the embedded
server or the session's dev server, the scripted demo model and the real
OpenAI SDK against a local server that speaks OpenAI's wire format."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from temporalio.client import Client

from agentloop.workers.devserver import DevServer
from tests.helpers.cli import agentloop, clean_env
from tests.helpers.paths import ROOT
from tests.helpers.servers.provider_servers import (
    OpenAIServer,
    ScriptedResponse,
    openai_completion,
    openai_tool_call,
)


def test_run_offline_demo_with_embedded_server(tmp_path: Path, workspace: Path) -> None:
    (workspace / "hello.txt").write_text("hello from the workspace\n")
    proc = agentloop(
        "run", "Summarise this workspace", "--model", "scripted:demo", "--workspace", str(workspace),
        env=clean_env(tmp_path), cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert '[step 1] tool call list_dir {"path": ".", "depth": 1}' in lines
    assert "[step 2] tool result read_file (ok): 1 hello from the workspace" in lines
    assert 'its first line is: "hello from the workspace"' in proc.stdout
    assert "3 steps, 2 tool calls" in proc.stderr
    # The embedded server kept its state in AGENTLOOP_HOME.
    assert (tmp_path / "home" / "temporal.db").exists()


def test_failed_run_exits_nonzero_with_reason(tmp_path: Path, workspace: Path) -> None:
    # (A scripted model this process does not have is refused before the run starts: test_cli_errors.)
    proc = agentloop(
        "run", "x", "--model", "scripted:cli-no-steps", "--import", "tests.helpers.cli", "--workspace", str(workspace),
        env=clean_env(tmp_path), cwd=ROOT,
    )
    assert proc.returncode == 1, proc.stderr
    assert "failed (error): LLM step 1 failed: the scripted model has 0 steps and was asked for step 1" in proc.stderr


def test_bad_model_string_is_a_usage_error(tmp_path: Path) -> None:
    proc = agentloop("run", "x", "--model", "gpt-4", env=clean_env(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("agentloop: model: model 'gpt-4' must be 'provider:model'")


async def test_run_with_openai_provider_from_sdk_env_vars(
    tmp_path: Path, workspace: Path, dev_server: DevServer, temporal_client: Client, task_queue: str
) -> None:
    (workspace / "todo.txt").write_text("buy milk\n")
    secret = "sk-test-very-secret-key-123"
    with OpenAIServer() as server:
        server.enqueue(
            ScriptedResponse(json_body=openai_completion(
                tool_calls=[openai_tool_call("call_abc", "read_file", json.dumps({"file_path": "todo.txt"}))],
                finish_reason="tool_calls",
            )),
            ScriptedResponse(json_body=openai_completion(content="You need to buy milk.")),
        )
        env = clean_env(
            tmp_path,
            TEMPORAL_ADDRESS=dev_server.address,
            AGENTLOOP_TASK_QUEUE=task_queue,
            OPENAI_API_KEY=secret,
            OPENAI_BASE_URL=server.base_url,
        )
        proc = agentloop(
            "run", "What is on my list?", "--model", "openai:gpt-test", "--workspace", str(workspace),
            "--tool", "read_file", "--run-id", f"cli-{task_queue}", "--local-worker",
            env=env, cwd=tmp_path,
        )
        assert proc.returncode == 0, proc.stderr
        assert "You need to buy milk." in proc.stdout
        first, second = server.requests
    assert first.headers["authorization"] == f"Bearer {secret}"
    assert first.json["model"] == "gpt-test"
    assert [t["function"]["name"] for t in first.json["tools"]] == ["read_file"]
    tool_message = second.json["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_abc"
    assert "buy milk" in tool_message["content"]

    # Secrets stay in the worker's environment: nothing in the run's history mentions the key.
    history = await temporal_client.get_workflow_handle(f"cli-{task_queue}").fetch_history()
    assert secret.encode() not in history.to_json().encode()
    assert len(history.events) > 10


async def test_dev_serves_other_clients_and_temporal_cli_shows_summaries(
    tmp_path: Path, workspace: Path
) -> None:
    import signal

    from agentloop import AgentClient, AgentSpec
    from agentloop.workers.devserver import find_temporal_binary, free_port

    (workspace / "hello.txt").write_text("hi\n")
    port = free_port()
    dev = subprocess.Popen(
        [sys.executable, "-m", "agentloop.cli", "dev", "--headless", "--port", str(port),
         "--data-dir", str(tmp_path / "data"), "--workspace", str(workspace)],
        cwd=tmp_path, env=clean_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        address = None
        for line in dev.stdout:  # the address line comes once server and worker are up
            if "export TEMPORAL_ADDRESS=" in line:
                address = line.split("=", 1)[1].strip()
                break
        assert address == f"127.0.0.1:{port}", dev.stderr.read() if dev.poll() is not None else ""
        assert "agentloop list --status awaiting_approval" in "".join(next(dev.stdout) for _ in range(2))
        # Ops commands in other terminals find the embedded server through this file.
        assert (tmp_path / "data" / "server.address").read_text() == f"{address}\n"
        client = await AgentClient.connect(address)
        result = await client.run(
            AgentSpec(model="scripted:demo", tools=["list_dir", "read_file"]), "look", run_id="dev-run-1"
        )
        assert result.status == "completed" and result.report.tool_call_count == 2

        show = subprocess.run(
            [find_temporal_binary(), "workflow", "show", "--workflow-id", "dev-run-1", "--detailed",
             "--address", address],
            capture_output=True, text=True, timeout=60,
        )
        assert show.returncode == 0, show.stderr
        summaries = [line.split(":", 1)[1].strip() for line in show.stdout.splitlines()
                     if line.startswith("userMetadata.summary:")]
        assert summaries == [
            "agent on scripted:demo",  # the run itself
            "resolve tools", "LLM step 1", "tool list_dir", "LLM step 2", "tool read_file", "LLM step 3",
        ]
    finally:
        dev.send_signal(signal.SIGINT)
        try:
            code = dev.wait(timeout=30)
        finally:
            if dev.poll() is None:
                dev.kill()
    assert code == 0
    assert not (tmp_path / "data" / "server.address").exists()
