"""Temporal Cloud and TLS: the worker, the CLI and `AgentClient.connect` read
Temporal's own environment configuration (`TEMPORAL_TLS_*`,
`TEMPORAL_API_KEY`, profiles in `temporal.toml`) the way the `temporal` CLI
does. The session's dev server behind a TLS-terminating gRPC proxy
(tests/helpers/servers/tls_proxy.py) that sees every call's metadata; throwaway certificates."""

from __future__ import annotations

import asyncio
import signal
import sys
import uuid
from pathlib import Path

import pytest

from agentloop import AgentClient
from agentloop.workers.devserver import DevServer
from tests.helpers.cli import agentloop_async, clean_env, read_until
from tests.helpers.paths import ROOT
from tests.helpers.servers.tls_proxy import Certificates, TLSProxy, make_certificates


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


def tls_env(tmp_path: Path, proxy: TLSProxy, certs: Certificates, task_queue: str, *, client_cert: bool,
            **extra: str) -> dict[str, str]:
    env = clean_env(tmp_path, TEMPORAL_ADDRESS=proxy.address, AGENTLOOP_TASK_QUEUE=task_queue,
                    TEMPORAL_TLS_SERVER_CA_CERT_PATH=str(certs.ca), **extra)
    if client_cert:
        env.update(TEMPORAL_TLS_CLIENT_CERT_PATH=str(certs.client_cert),
                   TEMPORAL_TLS_CLIENT_KEY_PATH=str(certs.client_key))
    return env


async def test_worker_cli_and_client_over_mtls_with_an_api_key(
    tmp_path: Path, workspace: Path, dev_server: DevServer, certs: Certificates, task_queue: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run_id = f"mtls-{uuid.uuid4().hex[:8]}"
    with TLSProxy(dev_server.address, certs, mtls=True) as proxy:
        env = tls_env(tmp_path, proxy, certs, task_queue, client_cert=True)
        # Each process sends its own key, so the proxy tells which of them authenticated.
        worker = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentloop.cli", "worker", cwd=ROOT,
            env={**env, "TEMPORAL_API_KEY": "key-worker", "AGENTLOOP_WORKSPACE_ROOTS": str(tmp_path)},
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )
        try:
            assert worker.stderr is not None
            started = await read_until(worker.stderr, "-llm-<lane>'\n")  # the end of the start line
            run = await agentloop_async("run", "look", "--model", "scripted:demo", "--workspace", str(workspace),
                                  "--run-id", run_id, env={**env, "TEMPORAL_API_KEY": "key-run"})
            show = await agentloop_async("show", run_id, env={**env, "TEMPORAL_API_KEY": "key-ops"})
            for name, value in {**env, "TEMPORAL_API_KEY": "key-sdk"}.items():
                if name.startswith("TEMPORAL_"):
                    monkeypatch.setenv(name, value)
            client = await AgentClient.connect(task_queue=task_queue)
            result = await client.get_handle(run_id).result()
            worker.send_signal(signal.SIGTERM)
            _, rest = await asyncio.wait_for(worker.communicate(), 60)
        finally:
            if worker.returncode is None:
                worker.kill()
                await worker.wait()
        authorizations = proxy.authorizations()
    assert f"on {proxy.address} (namespace 'default', mTLS + API key, unversioned)" in started
    assert run.code == 0, run.err
    assert "You asked: 'look'" in run.out
    assert show.code == 0 and "status:   completed" in show.out
    assert result.status == "completed"
    assert authorizations == {"Bearer key-worker", "Bearer key-run", "Bearer key-ops", "Bearer key-sdk"}
    for said in (started, rest.decode(), run.out, run.err, show.out):
        assert "key-" not in said  # the key is never printed


async def test_tls_and_api_key_from_a_profile_in_temporal_toml(
    tmp_path: Path, workspace: Path, dev_server: DevServer, certs: Certificates, task_queue: str,
) -> None:
    run_id = f"profile-{uuid.uuid4().hex[:8]}"
    with TLSProxy(dev_server.address, certs) as proxy:  # server-authenticated TLS, no client certificate
        config = tmp_path / "temporal.toml"
        config.write_text(
            f'[profile.cloud]\naddress = "{proxy.address}"\nnamespace = "default"\napi_key = "key-profile"\n\n'
            f'[profile.cloud.tls]\nserver_ca_cert_path = "{certs.ca}"\n'
        )
        env = clean_env(tmp_path, TEMPORAL_CONFIG_FILE=str(config), TEMPORAL_PROFILE="cloud",
                        AGENTLOOP_TASK_QUEUE=task_queue)
        run = await agentloop_async("run", "look", "--model", "scripted:demo", "--workspace", str(workspace),
                              "--run-id", run_id, "--local-worker", env=env)
        listing = await agentloop_async("list", "--json", env=env)
        authorizations = proxy.authorizations()
    assert run.code == 0, run.err
    assert listing.code == 0, listing.err
    assert authorizations == {"Bearer key-profile"}


async def test_tls_settings_never_reach_the_embedded_server(tmp_path: Path, workspace: Path) -> None:
    # A Temporal Cloud key in the environment, but no address: `run` starts its own plaintext server.
    proc = await agentloop_async("run", "look", "--model", "scripted:demo", "--workspace", str(workspace),
                           env=clean_env(tmp_path, TEMPORAL_API_KEY="key-cloud", TEMPORAL_TLS="true"))
    assert proc.code == 0, proc.err


async def test_a_tls_mismatch_is_a_sentence_that_names_the_setting(
    tmp_path: Path, dev_server: DevServer, certs: Certificates, task_queue: str,
) -> None:
    with TLSProxy(dev_server.address, certs, mtls=True) as mtls, TLSProxy(dev_server.address, certs) as tls:
        no_client_cert = await agentloop_async(
            "list", env=tls_env(tmp_path, mtls, certs, task_queue, client_cert=False))
        untrusted = await agentloop_async(
            "list", env=clean_env(tmp_path, TEMPORAL_ADDRESS=tls.address, TEMPORAL_TLS="true"))
        plaintext = await agentloop_async("list", env=clean_env(tmp_path, TEMPORAL_ADDRESS=tls.address))
    for proc in (no_client_cert, untrusted, plaintext):
        assert proc.code == 2 and "Traceback" not in proc.err
    assert no_client_cert.err.startswith(f"agentloop: cannot connect to Temporal at {mtls.address} (from "
                                         "TEMPORAL_ADDRESS; namespace 'default', TLS): ")
    assert "set TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH" in no_client_cert.err
    assert untrusted.err == (f"agentloop: cannot connect to Temporal at {tls.address} (from TEMPORAL_ADDRESS; "
                             "namespace 'default', TLS): the server's TLS certificate is signed by an authority this "
                             "client does not trust; set TEMPORAL_TLS_SERVER_CA_CERT_PATH (or tls.server_ca_cert_path "
                             "in the profile) to its CA\n")
    assert plaintext.err.startswith(f"agentloop: cannot connect to Temporal at {tls.address} (from "
                                    "TEMPORAL_ADDRESS; namespace 'default', plaintext): ")
    assert "set TEMPORAL_TLS=true" in plaintext.err
