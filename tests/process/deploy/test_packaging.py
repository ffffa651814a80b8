"""The wheel: one top-level package, ``agentloop``, that installs beside a
user's own ``workflows`` and ``activities`` packages.

The wheel is built (with the ``build`` front end, no network) from a copy of
the checkout and installed, not editable, into a fresh virtual environment.
That environment gets its dependencies from this one through a ``.pth``
line; ``.pth`` files in a directory added that way are not processed, so the
editable install of this checkout stays inactive there, and ``agentloop``
can only come from the wheel (checked below).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

from tests.helpers.paths import HISTORIES, ROOT

CHECK = r"""
import json, sys
import activities, workers, workflows
import agentloop
from agentloop import AgentLoopPlugin
from agentloop.activities.agent_activities import AgentActivities
from agentloop.workers.worker import build_worker
from agentloop.workflows.agent_run import AgentRunWorkflow
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer
import asyncio

from workflows import HelloWorkflow


async def replay(path):
    history = WorkflowHistory.from_json("replay", open(path).read())
    replayer = Replayer(workflows=[HelloWorkflow], plugins=[AgentLoopPlugin()])
    return (await replayer.replay_workflow(history)).replay_failure


failure = asyncio.run(replay(sys.argv[1]))
print(json.dumps({
    "user": [workflows.WHOSE, activities.WHOSE, workers.WHOSE],
    "user_files": [workflows.__file__, activities.__file__, workers.__file__],
    "agentloop": agentloop.__file__,
    "ours": [sys.modules[AgentRunWorkflow.__module__].__file__, sys.modules[AgentActivities.__module__].__file__,
             sys.modules[build_worker.__module__].__file__],
    "editable_finders": [type(f).__name__ for f in sys.meta_path if "editable" in repr(f).lower()]
                        + [name for name in sys.modules if "editable" in name],
    "replay_failure": repr(failure) if failure else None,
}))
"""

USER_WORKFLOWS = '''
from temporalio import workflow

WHOSE = "the user's workflows"


@workflow.defn
class HelloWorkflow:
    @workflow.run
    async def run(self, name: str) -> str:
        return f"hello {name}"
'''


def build_wheel(tmp_path: Path) -> Path:
    """Build the wheel from a copy of the checkout's packaged files."""
    folders = ["agentloop", "workflows", "activities", "workers"]
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    for folder in folders:
        # symlinks=True: agentloop/workflows and its siblings stay links to the top-level folders.
        shutil.copytree(ROOT / folder, src / folder, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = tmp_path / "dist"
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(src)],
        capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (wheel,) = dist.glob("*.whl")
    return wheel


def test_the_wheel_has_one_top_level_name_and_installs_beside_a_users_own_packages(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (dist_info,) = {n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info")}
        top_level = archive.read(f"{dist_info}/top_level.txt").decode().split()
    assert top_level == ["agentloop"]
    assert {n.split("/")[0] for n in names} == {"agentloop", dist_info}
    # The repository's folders are in it, under agentloop.
    for module in ("agentloop/in_workflow.py", "agentloop/testing.py", "agentloop/shared/base/contracts.py",
                   "agentloop/client/agent_client.py", "agentloop/tools/registry.py", "agentloop/cli/parser.py",
                   "agentloop/workflows/agent_run.py", "agentloop/activities/agent_activities.py",
                   "agentloop/workers/worker.py", "agentloop/workers/plugin.py",
                   # The web console's files (package data).
                   "agentloop/server/static/page.html", "agentloop/server/static/console.js",
                   "agentloop/server/static/console.css", "agentloop/server/static/favicon.svg",
                   "agentloop/server/static/run-page.js", "agentloop/server/agui/mapping.py"):
        assert module in names

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True, capture_output=True,
    )
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    # The dependencies (temporalio, pydantic, ...) from this environment.
    (site / "agentloop-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    user = tmp_path / "project"
    for package, source in (("workflows", USER_WORKFLOWS), ("activities", 'WHOSE = "the user\'s activities"\n'),
                            ("workers", 'WHOSE = "the user\'s workers"\n')):
        (user / package).mkdir(parents=True)
        (user / package / "__init__.py").write_text(source)
    proc = subprocess.run(
        [str(python), "-c", CHECK, str(HISTORIES / "tools_parallel.json")],
        cwd=user, capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.splitlines()[-1])
    assert seen["user"] == ["the user's workflows", "the user's activities", "the user's workers"]
    assert all(Path(f).is_relative_to(user) for f in seen["user_files"])
    assert Path(seen["agentloop"]) == site / "agentloop" / "__init__.py"
    assert [Path(f).relative_to(site).as_posix() for f in seen["ours"]] == [
        "agentloop/workflows/agent_run.py", "agentloop/activities/agent_activities.py", "agentloop/workers/worker.py"
    ]
    assert seen["editable_finders"] == []
    # A committed agent run's history replays there, next to the user's own workflow.
    assert seen["replay_failure"] is None
