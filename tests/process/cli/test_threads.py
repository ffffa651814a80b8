"""Threads across processes: a follow-up after the worker and then a server
of the test's own restarted, and `agentloop run --thread` / `send` on the
embedded server (threads on the session's server: tests/server/runs/test_threads.py)."""


from __future__ import annotations

import uuid
from pathlib import Path

from agentloop import AgentClient, AgentSpec
from agentloop.testing import reply
from agentloop.tools.registry import ToolRegistry
from tests.helpers.agents import recording, user_texts
from tests.helpers.paths import ROOT


async def test_a_follow_up_after_the_worker_and_then_the_server_restarted(tmp_path: Path) -> None:
    from agentloop.workers.devserver import DevServer
    from agentloop.workers.worker import build_worker, connect

    model, seen = recording(lambda r: reply(f"answer to {user_texts(r)[-1]}"))
    spec = AgentSpec(model=model)
    server = DevServer(db_file=tmp_path / "temporal.db", log_file=tmp_path / "server.log")
    server.start()
    try:
        await server.wait_ready()
        task_queue = f"tq-{uuid.uuid4().hex[:12]}"
        client = AgentClient(await connect(server.address), task_queue=task_queue)
        async with build_worker(client.temporal, task_queue=task_queue, registry=ToolRegistry(), workspace=tmp_path):
            first = await client.start(spec, "remember the number 7", thread_id="thread-restarts")
            assert (await first.result()).final_text == "answer to remember the number 7"
        # The worker is gone; now the server goes too, and comes back on its SQLite file.
        server.stop()
        server.start()
        await server.wait_ready()
        client = AgentClient(await connect(server.address), task_queue=task_queue)
        async with build_worker(client.temporal, task_queue=task_queue, registry=ToolRegistry(), workspace=tmp_path):
            follow_up = await client.send("thread-restarts", "which number?")
            result = await follow_up.result()
    finally:
        server.stop()
    assert follow_up.turn == 2 and result.final_text == "answer to which number?"
    assert [(m.role, m.text) for m in seen[-1].messages] == [
        ("user", "remember the number 7"), ("assistant", "answer to remember the number 7"), ("user", "which number?"),
    ]


def test_run_thread_then_send_on_the_embedded_server_and_send_to_a_missing_thread(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    root = ROOT
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "OPENAI_", "ANTHROPIC_"))}
    env.update(AGENTLOOP_HOME=str(tmp_path / "home"), PYTHONPATH=str(root))
    (tmp_path / "notes.txt").write_text("buy milk\n")

    def agentloop(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "agentloop.cli", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=180)

    first = agentloop("run", "--thread", "cli-thread", "--model", "scripted:demo", "What is here?")
    assert first.returncode == 0, first.stderr
    assert "thread cli-thread · scripted:demo" in first.stderr
    assert 'its first line is: "buy milk"' in first.stdout
    assert '[turn 1 completed · ' in first.stderr and '`agentloop send cli-thread "..."` goes on]' in first.stderr
    follow_up = agentloop("send", "cli-thread", "And now?")
    assert follow_up.returncode == 0, follow_up.stderr
    assert "thread cli-thread · turn 2" in follow_up.stderr and "[turn 2 completed · " in follow_up.stderr
    missing = agentloop("send", "no-such-thread", "hello?")
    assert missing.returncode == 2
    assert missing.stderr.strip() == (
        "agentloop: thread no-such-thread does not exist; start it with `agentloop run --thread no-such-thread "
        "...` (or pass a spec to AgentClient.send)")
    assert "Traceback" not in missing.stderr + follow_up.stderr


def shell_blocks(page: Path) -> list[str]:
    """The commands of a page's ```bash blocks, in order."""
    import re

    blocks = re.findall(r"^```bash\n(.*?)^```", page.read_text(), re.S | re.M)
    return [line for block in blocks for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_the_conversations_pages_shell_blocks_work_typed_in_order(env, spawn_worker, tmp_path: Path) -> None:
    # A user against `agentloop dev`: one worker, and every command of the
    # page typed in order, each of which must work.
    import subprocess
    import sys

    spawn_worker("tests.helpers.fixtures.durable_fixture")
    (tmp_path / "README.md").write_text("# notes\nbuy milk\n")
    env = dict(env, PATH=f"{Path(sys.executable).parent}:{env['PATH']}")
    for command in shell_blocks(ROOT / "docs" / "conversations.md"):
        done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=120)
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
