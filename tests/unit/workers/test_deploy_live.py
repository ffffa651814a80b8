"""Live deltas on in the shipped deployments (docs/live-deltas.md): compose's
one-shot writes a secret serve and the models workers read from a volume
only they mount; Kubernetes' workers post to every serve replica through a
headless Service. The one-shot's shell script is run here, as compose
would run it."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from agentloop.server import ServerSettings
from agentloop.shared.base.contracts import LIVE_TOKEN_ENV, LIVE_URL_ENV
from agentloop.shared.base.errors import UserError
from agentloop.shared.live.secret import LIVE_TOKEN_FILE_ENV, live_secret
from tests.unit.workers.test_deploy import compose, objects

TOKEN_DIR = "/run/agentloop-live"


def test_compose_serve_and_the_models_workers_read_the_one_shot_s_secret() -> None:
    services = compose()["services"]
    for name in ("serve", "models"):
        service = services[name]
        assert service["environment"][LIVE_TOKEN_FILE_ENV] == f"{TOKEN_DIR}/token", name
        assert LIVE_TOKEN_ENV not in service["environment"], name  # one source: the file
        assert service["volumes"] == [f"live-token:{TOKEN_DIR}:ro"], name
        assert service["depends_on"]["live-token"] == {"condition": "service_completed_successfully"}, name
    assert services["models"]["environment"][LIVE_URL_ENV] == "http://serve:8000"
    mounting = [name for name, s in services.items() if any("live-token:" in v for v in s.get("volumes", []))]
    assert sorted(mounting) == ["live-token", "models", "serve"]  # not the tools worker, not the UI


def test_the_one_shot_writes_a_secret_once_and_takes_a_given_one(tmp_path: Path) -> None:
    script = compose()["services"]["live-token"]["entrypoint"]
    assert script[:2] == ["sh", "-c"]
    # Compose turns $$ into $; the volume is a folder here.
    text = script[2].replace("$$", "$").replace(TOKEN_DIR, str(tmp_path))
    token = tmp_path / "token"

    def run(**env: str) -> str:
        subprocess.run(["sh", "-c", text], check=True, env={"PATH": os.environ["PATH"], **env}, timeout=30)
        return token.read_text().strip()

    first = run()
    assert re.fullmatch(r"[0-9a-f]{64}", first) and token.stat().st_mode & 0o777 == 0o600
    assert run() == first  # kept across restarts
    assert run(AGENTLOOP_LIVE_TOKEN="given-secret") == "given-secret"


def test_kubernetes_workers_post_to_every_serve_replica() -> None:
    live = objects("Service")["agentloop-serve-live"]["spec"]
    serve = objects("Deployment")["agentloop-serve"]["spec"]
    assert live["clusterIP"] == "None" and live["selector"] == serve["selector"]["matchLabels"]
    assert live["ports"][0]["port"] == 8000 and serve["replicas"] >= 2
    worker = objects("Deployment")["agentloop-models"]["spec"]["template"]["spec"]["containers"][0]
    assert {"name": LIVE_URL_ENV, "value": "http://agentloop-serve-live:8000"} in worker["env"]
    for deployment in (worker, serve["template"]["spec"]["containers"][0]):
        assert {"secretRef": {"name": "agentloop-live", "optional": True}} in deployment["envFrom"]


def test_the_secret_comes_from_a_file_when_not_given(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("from-the-file\n")
    assert live_secret({LIVE_TOKEN_FILE_ENV: str(path)}) == "from-the-file"
    assert live_secret({LIVE_TOKEN_FILE_ENV: str(path), LIVE_TOKEN_ENV: "given"}) == "given"
    assert ServerSettings.from_env({LIVE_TOKEN_FILE_ENV: str(path)}).live_token == "from-the-file"
    with pytest.raises(UserError, match="cannot read it"):
        live_secret({LIVE_TOKEN_FILE_ENV: str(tmp_path / "none")})
    (tmp_path / "empty").write_text(" \n")
    with pytest.raises(UserError, match="is empty"):
        ServerSettings.from_env({LIVE_TOKEN_FILE_ENV: str(tmp_path / "empty")})


async def test_a_worker_reads_the_secret_file_and_says_once_when_it_cannot(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from agentloop.activities.live_sender import LiveFanout, live_sender

    path = tmp_path / "token"
    path.write_text("worker-secret")
    sender = live_sender({LIVE_URL_ENV: "http://serve:8000", LIVE_TOKEN_FILE_ENV: str(path)})
    assert isinstance(sender, LiveFanout) and sender._token == "worker-secret"
    missing = {LIVE_URL_ENV: "http://serve:8000", LIVE_TOKEN_FILE_ENV: str(tmp_path / "gone")}
    assert live_sender(missing) is None and live_sender(missing) is None  # the model call goes on
    assert [r.getMessage() for r in caplog.records].count(
        f"live deltas not sent: {LIVE_TOKEN_FILE_ENV}={tmp_path / 'gone'}: cannot read it (No such file or "
        "directory); give a readable file holding the live secret, or unset it") == 1
